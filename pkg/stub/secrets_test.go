package stub

import (
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestReportsASecretTheKubeletCannotMount: a pod whose TLS Secret is
// missing, then lacks tls.key, shows only containers waiting in
// ContainerCreating; the kubelet's FailedMount Event, as the cache of
// Events shows it, makes the Memcached Degraded=True FailedMount with the
// kubelet's message naming the Secret, then the key, and Progressing says
// that the pods are stuck. Once the kubelet mounted the Secret and the pod
// is Ready, the Event, which stays for an hour, is history.
func TestReportsASecretTheKubeletCannotMount(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	m.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "example-tls"}
	pod := memcachedtest.Starting(memcachedtest.NewPod(m, "example-a", corev1.PodPending, false), "memcached", memcached.SidecarName)
	f := newFixture(t, inSync(m, 1, pod)...)
	f.client.mountFailures = map[types.UID]string{}

	steps := []struct {
		name string
		// mount is the pod's newest FailedMount message.
		mount string
		// mounted makes the pod the kubelet's once it mounted its volumes
		// and memcached serves.
		mounted                bool
		wantDegraded           corev1.ConditionStatus
		wantReason, wantDetail string
	}{
		{
			name: "missing Secret", mount: memcachedtest.MissingSecret("tls", "example-tls"),
			wantDegraded: corev1.ConditionTrue, wantReason: memcached.ReasonFailedMount,
			wantDetail: `pod example-a: MountVolume.SetUp failed for volume "tls" : secret "example-tls" not found`,
		},
		{
			name: "missing key", mount: memcachedtest.MissingSecretKey("tls", "tls.key"),
			wantDegraded: corev1.ConditionTrue, wantReason: memcached.ReasonFailedMount,
			wantDetail: `pod example-a: MountVolume.SetUp failed for volume "tls" : references non-existent secret key: tls.key`,
		},
		{
			name: "mounted and serving", mount: memcachedtest.MissingSecretKey("tls", "tls.key"), mounted: true,
			wantDegraded: corev1.ConditionFalse, wantReason: memcached.ReasonAsExpected,
		},
	}
	for _, step := range steps {
		f.client.mountFailures[pod.UID] = step.mount
		if step.mounted {
			ready := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
			ready.Status.Conditions = append(ready.Status.Conditions, corev1.PodCondition{Type: memcached.PodReadyToStartContainers, Status: corev1.ConditionTrue})
			f.client.pods[0] = ready
		}
		writes := len(f.client.statuses)

		if err := f.handle(m, false); err != nil {
			t.Fatalf("%s: Handle: got %v, want nil: a pod's failure is no step to retry", step.name, err)
		}

		if len(f.client.statuses) != writes+1 {
			t.Fatalf("%s: wrote status %d times, want once", step.name, len(f.client.statuses)-writes)
		}
		status := f.client.statuses[len(f.client.statuses)-1]
		degraded := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded)
		if degraded == nil || degraded.Status != step.wantDegraded || degraded.Reason != step.wantReason || degraded.Message != step.wantDetail {
			t.Errorf("%s: Degraded: got %+v, want %s %s %q", step.name, degraded, step.wantDegraded, step.wantReason, step.wantDetail)
		}
		progressing := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedProgressing)
		if stuck := step.wantDegraded == corev1.ConditionTrue; progressing == nil || stuck != (progressing.Message == "0/1 pods ready; stuck: "+memcached.ReasonFailedMount) {
			t.Errorf("%s: Progressing: got %+v, want it to say stuck: %s while the mount fails", step.name, progressing, memcached.ReasonFailedMount)
		}
		// The kubelet records its Event; the operator adds none.
		if got := f.events(); len(got) != 0 {
			t.Errorf("%s: events: got %q, want none", step.name, got)
		}
		f.storeStatus(m)
	}
}
