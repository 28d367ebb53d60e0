package stub

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestRestoresAHandEditOfTheDeployment covers a Deployment whose template
// hash is still the desired one but whose fields the operator set someone
// changed, as the cache's digest of the operator's apply shows: the reconcile
// applies the desired Deployment with the live template's record
// annotations, so that a template that runs what the spec asks for is not
// changed, records an Event and reports Progressing=True Restoring.
func TestRestoresAHandEditOfTheDeployment(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2)
	d := objs[1].(*appsv1.Deployment)
	d.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
	d.Annotations[memcached.ObservedDigestAnnotation] = "edited"
	d.Spec.Template.Annotations[memcached.SpecHashAnnotation] = "spec-of-an-earlier-generation"
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, writesDeployment("apply deployment test/example"))
	applied := f.client.applied["apply deployment test/example"]
	if applied == nil {
		t.Fatal("nothing applied")
	}
	containers, _, _ := unstructured.NestedSlice(applied.Object, "spec", "template", "spec", "containers")
	if image := containers[0].(map[string]interface{})["image"]; image != memcachedtest.Image {
		t.Errorf("applied image: got %v, want %s", image, memcachedtest.Image)
	}
	if got, _, _ := unstructured.NestedString(applied.Object, "spec", "template", "metadata", "annotations", memcached.SpecHashAnnotation); got != "spec-of-an-earlier-generation" {
		t.Errorf("applied spec hash: got %q, want the live template's, so that the restore changes nothing else", got)
	}
	if got := f.client.deployments["test/example"].Annotations[memcached.ObservedDigestAnnotation]; got != memcachedtest.CurrentDigest(m) {
		t.Errorf("digest after the restore: got %q, want %q", got, memcachedtest.CurrentDigest(m))
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+ReasonDeploymentRestored+" ") {
		t.Errorf("events: got %q, want one Normal %s", got, ReasonDeploymentRestored)
	}
	if c := f.progressing("example"); c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRestoring {
		t.Errorf("Progressing: got %s %s %q, want True %s", c.Status, c.Reason, c.Message, memcached.ReasonRestoring)
	}

	// The cache now shows the restored Deployment: nothing more to do.
	f.requireNothingToRestore("example")
}

// TestLeavesADeploymentThatHoldsWhatWasAppliedAlone: with the digest of what
// the operator applied, there is nothing to restore, whatever else others
// added to the Deployment.
func TestLeavesADeploymentThatHoldsWhatWasAppliedAlone(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true))
	objs[1].(*appsv1.Deployment).Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-12-01T00:00:00Z"
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	for _, a := range f.client.actions {
		if strings.HasPrefix(a, "apply ") || strings.HasPrefix(a, "patch ") || strings.HasPrefix(a, "create ") {
			t.Errorf("unexpected %s", a)
		}
	}
}

// TestRestoresTheLabelsOfEveryChild: a child whose labels someone removed
// or changed gets the operator's back, and keeps the labels others added.
func TestRestoresTheLabelsOfEveryChild(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(objs []runtime.Object)
		wantPatch string
		wantValue string
	}{
		{
			name: "service",
			edit: func(objs []runtime.Object) {
				objs[2].(*corev1.Service).Labels = map[string]string{memcached.CRLabel: "example", "team": "web"}
			},
			wantPatch: "patch service test/example",
			wantValue: `{"op":"add","path":"/metadata/labels","value":{"app":"memcached","memcached_cr":"example","team":"web"}}`,
		},
		{
			name: "budget",
			edit: func(objs []runtime.Object) {
				objs[3].(*policyv1beta1.PodDisruptionBudget).Labels[memcached.CRLabel] = "other"
			},
			wantPatch: "patch poddisruptionbudget test/example",
			wantValue: `{"op":"add","path":"/metadata/labels","value":{"app":"memcached","memcached_cr":"example"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			objs := inSync(m, 2)
			tt.edit(objs)
			f := newFixture(t, objs...)

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			patch, ok := f.client.patches[tt.wantPatch]
			if !ok {
				t.Fatalf("actions %q, want %s", f.client.actions, tt.wantPatch)
			}
			if !strings.Contains(patch, tt.wantValue) {
				t.Errorf("patch: got %s, want it to hold %s", patch, tt.wantValue)
			}
			if got := f.events(); len(got) != 1 || !strings.Contains(got[0], "Restored the labels of") {
				t.Errorf("events: got %q, want one that says the labels were restored", got)
			}
		})
	}
}

// TestConvertsTheRecordOfADeploymentNeverApplied: a Deployment that an
// operator version without server-side apply created shows no digest; its
// record is converted to the operator's apply before the apply, which then
// owns what that version set.
func TestConvertsTheRecordOfADeploymentNeverApplied(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2)
	delete(objs[1].(*appsv1.Deployment).Annotations, memcached.ObservedDigestAnnotation)
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions[:3], []string{
		"get deployment test/example",
		"convert updates of deployments.apps test/example",
		"apply deployment test/example",
	})
}

// TestCountsOnlyItsOwnPods: a pod that carries the Memcached's labels but
// that no ReplicaSet of its Deployment runs, such as one made by hand, is not
// in status.nodes and counts as no replica.
func TestCountsOnlyItsOwnPods(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	foreign := memcachedtest.NewPod(m, "a-bare-pod", corev1.PodRunning, true)
	foreign.OwnerReferences = nil
	f := newFixture(t, inSync(m, 1, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), foreign)...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	s := f.client.memcacheds["test/example"].Status
	if len(s.Nodes) != 1 || s.Nodes[0] != "example-a" || s.Replicas != 1 || s.ReadyReplicas != 1 {
		t.Errorf("status: nodes %v, replicas %d, ready %d; want only example-a", s.Nodes, s.Replicas, s.ReadyReplicas)
	}
}

// requireNothingToRestore reconciles Memcached name again, as the fixture
// stores it, and fails on any apply or patch: after a restore, the cache
// shows the restored Deployment, and a second reconcile writes nothing.
func (f *fixture) requireNothingToRestore(name string) {
	f.t.Helper()
	f.client.actions = nil
	m := f.client.memcacheds["test/"+name].DeepCopy()
	if err := f.handle(m, false); err != nil {
		f.t.Fatalf("second Handle: %v", err)
	}
	for _, a := range f.client.actions {
		if strings.HasPrefix(a, "apply ") || strings.HasPrefix(a, "patch ") {
			f.t.Errorf("second reconcile: unexpected %s", a)
		}
	}
}
