package stub

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func TestTrimmedPodsGiveTheSameStatus(t *testing.T) {
	m := newMemcached("example", 3)
	full := []*corev1.Pod{
		newPod(m, "example-a", corev1.PodRunning, true),
		withContainers(newPod(m, "example-b", corev1.PodRunning, false), crashLooping("example-b", "10s", 1)),
		withContainers(newPod(m, "example-c", corev1.PodPending, false), waiting("memcached", "ErrImagePull", "pull access denied")),
	}
	for _, p := range full {
		p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now", templateHashAnnotation: "old"}
		p.Spec = memcachedPodSpec(m, testImage)
		p.Status.PodIP, p.Status.HostIP = "198.18.64.7", "198.18.0.1"
	}
	var trimmed []*corev1.Pod
	for _, p := range full {
		c := p.DeepCopy()
		trimPod(c)
		trimmed = append(trimmed, c)
	}

	current := manifestHash(t, m, testImage)
	got := computeStatus(m, observation{pods: trimmed, templateHash: current}, testNow)
	want := computeStatus(m, observation{pods: full, templateHash: current}, testNow)

	if !reflect.DeepEqual(got, want) {
		t.Errorf("status from trimmed pods:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(trimmed[0].Spec, corev1.PodSpec{}) || !reflect.DeepEqual(trimmed[0].Annotations, map[string]string{templateHashAnnotation: "old"}) {
		t.Errorf("trimmed pod holds more than the template hash of its spec and annotations: %+v", trimmed[0])
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
	if templateOf(d) != manifestHash(t, m, testImage) {
		t.Errorf("trimmed deployment lost its template hash: %+v", d.Spec.Template.ObjectMeta)
	}
	if len(d.Spec.Template.Spec.Containers) != 0 || d.Status.ReadyReplicas != 0 || d.Annotations != nil {
		t.Errorf("trimmed deployment still holds its template, status or annotations: %+v", d)
	}
}

func TestTrimmedServiceAndBudgetKeepWhatTheReconcileCompares(t *testing.T) {
	m := newMemcached("example", 3)
	s := newServiceForMemcached(m)
	s.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	want := newServiceForMemcached(m)
	trimService(s)
	if !reflect.DeepEqual(s, want) {
		t.Errorf("trimmed service:\n got %+v\nwant %+v", s, want)
	}
	p := newPodDisruptionBudgetForMemcached(m)
	p.Status.CurrentHealthy = 3
	wantPDB := newPodDisruptionBudgetForMemcached(m)
	trimPodDisruptionBudget(p)
	if !reflect.DeepEqual(p, wantPDB) {
		t.Errorf("trimmed budget:\n got %+v\nwant %+v", p, wantPDB)
	}
}

func TestSpecChanged(t *testing.T) {
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
			if got := specChanged(base, updated); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !specChanged("not a deployment", base) {
		t.Errorf("an update of unknown objects must count as a change")
	}
}

func TestTrimmedListWatchTrimsListsAndEvents(t *testing.T) {
	m := newMemcached("example", 1)
	kube := kubefake.NewSimpleClientset(newPod(m, "example-a", corev1.PodRunning, true))
	pods := kube.CoreV1().Pods("test")
	// The API server decodes a new object for every event; the fake
	// clientset's watch would share its objects with its tracker.
	events := watch.NewFake()
	var selectors []string
	lw := trimmedListWatch("app=memcached",
		func(o metav1.ListOptions) (runtime.Object, error) {
			selectors = append(selectors, o.LabelSelector)
			return pods.List(o)
		},
		func(o metav1.ListOptions) (watch.Interface, error) {
			selectors = append(selectors, o.LabelSelector)
			return events, nil
		},
		func(obj runtime.Object) { obj.(*corev1.Pod).Annotations = map[string]string{"trimmed": "yes"} })

	list, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := list.(*corev1.PodList).Items[0]; p.Annotations["trimmed"] != "yes" {
		t.Errorf("listed pod not trimmed: %+v", p.ObjectMeta)
	}
	w, err := lw.Watch(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go events.Add(newPod(m, "example-b", corev1.PodPending, false))
	select {
	case e := <-w.ResultChan():
		if p := e.Object.(*corev1.Pod); p.Name != "example-b" || p.Annotations["trimmed"] != "yes" {
			t.Errorf("watched pod not trimmed: %+v", p.ObjectMeta)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	if !reflect.DeepEqual(selectors, []string{"app=memcached", "app=memcached"}) {
		t.Errorf("selectors: got %q, want the list and the watch to select app=memcached", selectors)
	}
}
