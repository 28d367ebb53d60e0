package kube

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func TestTrimmedPodsGiveTheSameStatus(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	exited := memcachedtest.MemcachedExit
	unschedulable := memcachedtest.NewPod(m, "example-e", corev1.PodPending, false)
	unschedulable.Status.Conditions = append(unschedulable.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient memory.", LastTransitionTime: memcachedtest.Now,
	})
	// mounted is a pod whose volumes the kubelet mounted after FailedMount
	// Events: its containers are being made.
	mounted := memcachedtest.Starting(memcachedtest.NewPod(m, "example-g", corev1.PodPending, false), "memcached", memcached.SidecarName)
	mounted.Status.Conditions[1].Status = corev1.ConditionTrue
	mountFailures := map[types.UID]string{
		"uid-example-f": memcachedtest.MissingSecret("tls", "example-tls"),
		"uid-example-g": memcachedtest.MissingSecret("tls", "example-tls"),
	}
	full := []*corev1.Pod{
		memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
		memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-b", corev1.PodRunning, false), memcachedtest.CrashLooping("example-b", "10s", 1)),
		memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-c", corev1.PodPending, false), memcachedtest.Waiting("memcached", "ErrImagePull", "pull access denied")),
		memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-d", corev1.PodRunning, false), corev1.ContainerStatus{
			Name: "memcached", State: corev1.ContainerState{Terminated: &exited},
		}),
		unschedulable,
		memcachedtest.Starting(memcachedtest.NewPod(m, "example-f", corev1.PodPending, false), "memcached", memcached.SidecarName),
		mounted,
	}
	for _, p := range full {
		p.GenerateName = "example-5d8f7c9b4-"
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "example-5d8f7c9b4"}}
		p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now", memcached.TemplateHashAnnotation: "old"}
		p.Labels["team"] = "a label of the user's"
		p.Spec = memcached.PodSpec(m, memcachedtest.Image, memcachedtest.SidecarImage)
		p.Status.PodIP, p.Status.HostIP, p.Status.QOSClass, p.Status.StartTime = "198.18.64.7", "198.18.0.1", corev1.PodQOSBurstable, &memcachedtest.Now
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: memcachedtest.Now},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: memcachedtest.Now})
		for i := range p.Status.ContainerStatuses {
			c := &p.Status.ContainerStatuses[i]
			c.Image, c.ImageID, c.ContainerID, c.RestartCount = memcachedtest.Image, "sha256:0123", "containerd://4567", 3
			if c.LastTerminationState.Terminated != nil {
				c.LastTerminationState.Terminated.FinishedAt = memcachedtest.Now
			}
		}
	}
	var trimmed []*corev1.Pod
	for _, p := range full {
		c := p.DeepCopy()
		trimPod(c)
		trimmed = append(trimmed, c)
	}

	current := memcachedtest.ManifestHash(t, m, memcachedtest.Image)
	status := func(pods ...*corev1.Pod) v1alpha1.MemcachedStatus {
		return memcached.ComputeStatus(m, memcached.Observation{Pods: pods, TemplateHash: current, MountFailures: mountFailures}, memcachedtest.Now)
	}
	if got, want := status(trimmed...), status(full...); !reflect.DeepEqual(got, want) {
		t.Errorf("status from trimmed pods:\n got %+v\nwant %+v", got, want)
	}
	// Degraded reports the first failing pod only: each pod alone shows
	// that its own failure survives the trim.
	for i := range full {
		if got, want := status(trimmed[i]), status(full[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("status from trimmed pod %s:\n got %+v\nwant %+v", full[i].Name, got, want)
		}
	}
	if !reflect.DeepEqual(trimmed[0].Spec, corev1.PodSpec{}) || !reflect.DeepEqual(trimmed[0].Annotations, map[string]string{memcached.TemplateHashAnnotation: "old"}) {
		t.Errorf("trimmed pod holds more than the template hash of its spec and annotations: %+v", trimmed[0])
	}
	if want := map[string]string{memcached.AppLabel: memcached.AppLabelValue, memcached.CRLabel: "example", appsv1.DefaultDeploymentUniqueLabelKey: memcachedtest.PodTemplateHash}; !reflect.DeepEqual(trimmed[0].Labels, want) {
		t.Errorf("trimmed pod's labels: got %v, want the operator's and the template hash alone, %v", trimmed[0].Labels, want)
	}
}

func TestTrimmedDeploymentKeepsWhatTheReconcileReads(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	d := memcachedtest.OwnedDeployment(m, 2)
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Status.ReadyReplicas = 2
	d.Status.ObservedGeneration = 4
	d.Status.Replicas, d.Status.UpdatedReplicas = 3, 1
	d.Status.Conditions = fullDeploymentConditions(memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal), memcachedtest.DeadlineExceeded)

	trimDeployment(d)

	if !metav1.IsControlledBy(d, m) || *d.Spec.Replicas != 2 || d.Name != "example" || d.Labels[memcached.CRLabel] != "example" ||
		d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != memcached.ProgressDeadlineSeconds {
		t.Errorf("trimmed deployment lost what the reconcile reads: %+v", d)
	}
	if memcached.TemplateOf(d) != memcachedtest.ManifestHash(t, m, memcachedtest.Image) {
		t.Errorf("trimmed deployment lost its template hash: %+v", d.Spec.Template.ObjectMeta)
	}
	if want := []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal), memcachedtest.DeadlineExceeded}; !reflect.DeepEqual(d.Status.Conditions, want) {
		t.Errorf("trimmed conditions:\n got %+v\nwant %+v", d.Status.Conditions, want)
	}
	if s := d.Status; s.ObservedGeneration != 4 || s.Replicas != 3 || s.UpdatedReplicas != 1 {
		t.Errorf("trimmed deployment lost how far its controller rolled it: %+v", s)
	}
	if len(d.Spec.Template.Spec.Containers) != 0 || d.Status.ReadyReplicas != 0 || d.Annotations != nil {
		t.Errorf("trimmed deployment still holds its template, other status counts or annotations: %+v", d)
	}
}

// fullDeploymentConditions returns the conditions the Deployment controller
// writes with stuck among them: with times, and with Available and a
// Progressing that is True unless stuck holds a False one.
func fullDeploymentConditions(stuck ...appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	conditions := []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
		Message: "Deployment has minimum availability.", LastUpdateTime: memcachedtest.Now, LastTransitionTime: memcachedtest.Now,
	}}
	progressing := appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
		Message: `ReplicaSet "example-6b7f9c5d4" is progressing.`,
	}
	for _, c := range stuck {
		if c.Type == appsv1.DeploymentProgressing {
			progressing = c
			continue
		}
		c.LastUpdateTime, c.LastTransitionTime = memcachedtest.Now, memcachedtest.Now
		conditions = append(conditions, c)
	}
	progressing.LastUpdateTime, progressing.LastTransitionTime = memcachedtest.Now, memcachedtest.Now
	return append(conditions, progressing)
}

func TestTrimmedDeploymentGivesTheSameStatus(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	old := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	old.Annotations = map[string]string{memcached.TemplateHashAnnotation: "older"}
	pods := []*corev1.Pod{old, memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-c", corev1.PodPending, false)}
	tests := []struct {
		name  string
		stuck []appsv1.DeploymentCondition
	}{
		{name: "rolling"},
		{name: "pods cannot be created", stuck: []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal)}},
		{name: "past the deadline", stuck: []appsv1.DeploymentCondition{memcachedtest.DeadlineExceeded}},
		{name: "both", stuck: []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.PriorityClassRefusal), memcachedtest.DeadlineExceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := memcachedtest.OwnedDeployment(m, 2)
			full.Status.Conditions = fullDeploymentConditions(tt.stuck...)
			trimmed := full.DeepCopy()
			trimDeployment(trimmed)
			status := func(d *appsv1.Deployment) v1alpha1.MemcachedStatus {
				return memcached.ComputeStatus(m, memcached.Observation{Pods: pods, TemplateHash: memcachedtest.CurrentHash(m), DeploymentConditions: d.Status.Conditions}, memcachedtest.Now)
			}

			if got, want := status(trimmed), status(full); !reflect.DeepEqual(got, want) {
				t.Errorf("status from the trimmed deployment:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDeploymentChanged(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	base := memcachedtest.OwnedDeployment(m, 2)
	base.Generation = 1
	base.Status.Conditions = fullDeploymentConditions()
	base.Status.ObservedGeneration, base.Status.Replicas, base.Status.UpdatedReplicas = 1, 3, 1
	tests := []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{name: "ready replicas", change: func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }, want: false},
		{name: "another step of the roll", change: func(d *appsv1.Deployment) {
			d.Status.Conditions = fullDeploymentConditions()
			d.Status.Conditions[1].Reason, d.Status.Conditions[1].LastUpdateTime = "NewReplicaSetAvailable", metav1.Now()
		}, want: false},
		{name: "spec (generation)", change: func(d *appsv1.Deployment) { d.Generation = 2 }, want: true},
		{name: "a pod more of the new template", change: func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 2 }, want: false},
		{name: "the roll is over", change: func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 2, 2 }, want: true},
		{name: "pods cannot be created", change: func(d *appsv1.Deployment) {
			d.Status.Conditions = fullDeploymentConditions(memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal))
		}, want: true},
		{name: "past the deadline", change: func(d *appsv1.Deployment) {
			d.Status.Conditions = fullDeploymentConditions(memcachedtest.DeadlineExceeded)
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, updated := base.DeepCopy(), base.DeepCopy()
			tt.change(updated)
			trimDeployment(old)
			trimDeployment(updated)
			if got := deploymentChanged(old, updated); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !deploymentChanged("not a deployment", base) {
		t.Errorf("an update of unknown objects must count as a change")
	}
}

func TestSpecChanged(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	base := memcachedtest.OwnedDeployment(m, 2)
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
			if got := SpecChanged(base, updated); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !SpecChanged("not a deployment", base) {
		t.Errorf("an update of unknown objects must count as a change")
	}
}

func TestPodChanged(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	base := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	base.ResourceVersion = "1"
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{name: "bound to a node", change: func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, want: false},
		{name: "scheduled", change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
		}, want: false},
		{name: "started", change: func(p *corev1.Pod) { p.Status.StartTime, p.Status.PodIP = &memcachedtest.Now, "198.18.64.7" }, want: false},
		{name: "running", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, want: true},
		{name: "ready", change: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }, want: true},
		{name: "failing", change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{memcachedtest.Waiting("memcached", "ErrImagePull", "pull access denied")}
		}, want: true},
		{name: "being deleted", change: func(p *corev1.Pod) { p.DeletionTimestamp = &memcachedtest.Now }, want: true},
		{name: "volumes mounted", change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: memcached.PodReadyToStartContainers, Status: corev1.ConditionTrue})
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, updated := base.DeepCopy(), base.DeepCopy()
			tt.change(updated)
			updated.ResourceVersion = "2"
			trimPod(old)
			trimPod(updated)
			if got := podChanged(old, updated); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if old.ResourceVersion != "1" {
				t.Errorf("podChanged changed the cached pod's resourceVersion to %s", old.ResourceVersion)
			}
		})
	}
	if !podChanged("not a pod", base) {
		t.Errorf("an update of unknown objects must count as a change")
	}
}

func TestTrimmedListWatchTrimsListsAndEvents(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	kube := kubefake.NewSimpleClientset(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true))
	pods := kube.CoreV1().Pods("test")
	// The API server decodes a new object for every event; the fake
	// clientset's watch would share its objects with its tracker.
	events := watch.NewFake()
	var selectors []string
	lw := trimmedListWatch(labelSelector("app=memcached"),
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
	go events.Add(memcachedtest.NewPod(m, "example-b", corev1.PodPending, false))
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
func TestTrimDeploymentKeepsTheRollRecord(t *testing.T) {
	d := memcachedtest.PacedDeployment(memcachedtest.NewMemcached("example", 2), 2)
	d.Spec.Template.Annotations["other"] = "x"
	want := map[string]string{}
	for _, k := range []string{memcached.TemplateHashAnnotation, memcached.SpecHashAnnotation, memcached.PacedRollAnnotation} {
		want[k] = d.Spec.Template.Annotations[k]
	}
	trimDeployment(d)
	if got := d.Spec.Template.Annotations; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestTrimmedListPagesAtTheLatestVersion: a cache's list asks for pages of
// at most listPage objects at the latest version, whatever version the
// reflector asks for, trims each page before it asks for the next, and
// returns every object with the first page's resourceVersion, the snapshot
// of all the pages.
func TestTrimmedListPagesAtTheLatestVersion(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	pages := [][]string{{"a", "b"}, {"c"}, {"d", "e"}}
	var asked []metav1.ListOptions
	var listed []*corev1.Pod
	lw := trimmedListWatch(labelSelector("app=memcached"),
		func(o metav1.ListOptions) (runtime.Object, error) {
			asked = append(asked, o)
			for _, p := range listed {
				if p.Spec.NodeName != "" {
					t.Errorf("page %d asked for before pod %s of an earlier page was trimmed", len(asked), p.Name)
				}
			}
			i := len(asked) - 1
			l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(10 + i)}}
			if i < len(pages)-1 {
				l.Continue = fmt.Sprintf("page-%d", i+1)
			}
			for _, name := range pages[i] {
				p := memcachedtest.NewPod(m, name, corev1.PodRunning, true)
				p.Spec.NodeName = "node-1" // which trimPod drops
				l.Items = append(l.Items, *p)
			}
			for j := range l.Items {
				listed = append(listed, &l.Items[j])
			}
			return l, nil
		},
		func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
		TrimOf(trimPod))

	got, err := lw.List(metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	l := got.(*corev1.PodList)
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Name)
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s not trimmed", p.Name)
		}
	}
	if fmt.Sprint(names) != "[a b c d e]" || l.ResourceVersion != "10" || l.Continue != "" {
		t.Errorf("got %v at resourceVersion %q, continue %q; want [a b c d e] at the first page's 10, no continue", names, l.ResourceVersion, l.Continue)
	}
	for i, o := range asked {
		want := ""
		if i > 0 {
			want = fmt.Sprintf("page-%d", i)
		}
		if o.Limit != listPage || o.ResourceVersion != "" || o.Continue != want || o.LabelSelector != "app=memcached" {
			t.Errorf("request %d: %+v; want limit %d, the latest version, continue %q, app=memcached", i, o, listPage, want)
		}
	}
}
