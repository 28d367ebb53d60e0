package stub

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimmedPodsGiveTheSameStatus(t *testing.T) {
	m := newMemcached("example", 3)
	full := []*corev1.Pod{
		newPod(m, "example-a", corev1.PodRunning, true),
		withContainers(newPod(m, "example-b", corev1.PodRunning, false), crashLooping("example-b", "10s", 1)),
		withContainers(newPod(m, "example-c", corev1.PodPending, false), waiting("memcached", "ErrImagePull", "pull access denied")),
	}
	for _, p := range full {
		p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
		p.Spec = memcachedPodSpec(testImage)
		p.Status.PodIP, p.Status.HostIP = "198.18.64.7", "198.18.0.1"
	}
	var trimmed []*corev1.Pod
	for _, p := range full {
		c := p.DeepCopy()
		trimPod(c)
		trimmed = append(trimmed, c)
	}

	got, want := computeStatus(m, trimmed, testNow), computeStatus(m, full, testNow)

	if !reflect.DeepEqual(got, want) {
		t.Errorf("status from trimmed pods:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(trimmed[0].Spec, corev1.PodSpec{}) || trimmed[0].Annotations != nil {
		t.Errorf("trimmed pod still holds its spec or annotations: %+v", trimmed[0])
	}
}

func TestTrimmedDeploymentKeepsWhatTheReconcileReads(t *testing.T) {
	m := newMemcached("example", 3)
	d := ownedDeployment(m, 2)
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Status.ReadyReplicas = 2

	trimDeployment(d)

	if !metav1.IsControlledBy(d, m) || *d.Spec.Replicas != 2 || d.Name != "example" || d.Labels[crLabel] != "example" {
		t.Errorf("trimmed deployment lost what the reconcile reads: %+v", d)
	}
	if len(d.Spec.Template.Spec.Containers) != 0 || d.Status.ReadyReplicas != 0 {
		t.Errorf("trimmed deployment still holds its template or status: %+v", d)
	}
}

func TestDeploymentChanged(t *testing.T) {
	m := newMemcached("example", 2)
	base := ownedDeployment(m, 2)
	base.Generation = 1
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{name: "status only", change: func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }, want: false},
		{name: "spec (generation)", change: func(d *appsv1.Deployment) { d.Generation = 2 }, want: true},
		{name: "labels", change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"app": "other"} }, want: true},
		{name: "owner references", change: func(d *appsv1.Deployment) { d.OwnerReferences = nil }, want: true},
		{name: "deletion", change: func(d *appsv1.Deployment) { d.DeletionTimestamp = &now }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tt.change(updated)
			if got := deploymentChanged(base, updated); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !deploymentChanged("not a deployment", base) {
		t.Errorf("an update of unknown objects must count as a change")
	}
}
