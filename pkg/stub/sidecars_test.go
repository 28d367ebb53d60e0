package stub

import (
	"reflect"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
)

// fakeSidecars is what the pods' sidecars reported, as SidecarReports.
type fakeSidecars struct {
	problems []memcached.SidecarProblem
}

func (s *fakeSidecars) Problems(pods []*corev1.Pod) []memcached.SidecarProblem {
	var out []memcached.SidecarProblem
	for _, p := range s.problems {
		for _, pod := range pods {
			if pod.Name == p.Pod {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestReportsSidecarProblems: a pod's sidecar that reports a failed
// certificate refresh, or a worker that keeps exiting, makes the Memcached
// Degraded=True, naming the pod and the sidecar's message, with one Warning
// Event and no retry, while Available and Progressing follow the pods,
// which stay Ready; once the report clears, so does the condition.
func TestReportsSidecarProblems(t *testing.T) {
	problems := []memcached.SidecarProblem{
		{Pod: "example-b", Reason: "CertificateRefreshFailed", Message: "the mounted certificate files do not load: tls: private key does not match public key"},
		{Pod: "example-b", Reason: "SidecarFailing", Message: "its worker exited (signal: killed); it is restarted with backoff until it runs for 1m0s"},
	}
	for _, problem := range problems {
		t.Run(problem.Reason, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			f := newFixture(t, inSync(m, 2,
				memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
				memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true),
			)...)
			sidecars := &fakeSidecars{problems: []memcached.SidecarProblem{problem}}
			f.handler.ReadSidecarReports(sidecars)
			message := "pod example-b: sidecar: " + problem.Message

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: got %v, want nil: a sidecar's problem is no step to retry", err)
			}
			if len(f.client.statuses) != 1 {
				t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
			}
			want := inSyncStatus(m, "example-a", "example-b")
			want.Conditions[2] = v1alpha1.MemcachedCondition{
				Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: problem.Reason, Message: message,
				LastTransitionTime: memcachedtest.Now, ObservedGeneration: m.Generation,
			}
			if got := f.client.statuses[0]; !reflect.DeepEqual(got, want) {
				t.Errorf("status:\n got %+v\nwant %+v", got, want)
			}
			if got, want := f.events(), []string{"Warning " + problem.Reason + " " + message}; !reflect.DeepEqual(got, want) {
				t.Errorf("events: got %q, want %q", got, want)
			}

			// Reported already: no write, no second Event.
			f.storeStatus(m)
			if err := f.handle(m, false); err != nil {
				t.Fatal(err)
			}
			if len(f.client.statuses) != 1 || len(f.events()) != 0 {
				t.Errorf("again: %d status writes and Events %q, want 1 and none", len(f.client.statuses), f.events())
			}

			sidecars.problems = nil
			if err := f.handle(m, false); err != nil {
				t.Fatal(err)
			}
			if n := len(f.client.statuses); n != 2 {
				t.Fatalf("wrote status %d times, want 2", n)
			}
			if c := memcached.FindCondition(f.client.statuses[1].Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonAsExpected {
				t.Errorf("Degraded after the report cleared: got %+v, want False %s", c, memcached.ReasonAsExpected)
			}
			if got := f.events(); len(got) != 0 {
				t.Errorf("events after the report cleared: got %q, want none", got)
			}
		})
	}
}
