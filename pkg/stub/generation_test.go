package stub

import (
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
)

// TestObservedGenerationFollowsTheDeployment runs one Memcached through a
// refused spec, a fix and the roll the fix starts: status.observedGeneration
// and Progressing stay with the generation the Deployment runs until the
// operator sets the Deployment to the new spec, so kubectl wait
// --for=condition=Progressing=false returns only once that spec has rolled,
// while --for=condition=Degraded returns for the refused one.
func TestObservedGenerationFollowsTheDeployment(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	pods := func(m *v1alpha1.Memcached, names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			out = append(out, memcachedtest.NewPod(m, n, corev1.PodRunning, true))
		}
		return out
	}
	m.Status = inSyncStatus(m, "example-a", "example-b")
	objects := inSync(m, 2)
	for _, p := range pods(m, "example-a", "example-b") {
		objects = append(objects, p)
	}
	f := newFixture(t, objects...)
	fixedImage := "registry.local/memcached:1.6.99"

	steps := []struct {
		name string
		// change makes the next generation, unless nil; pods, unless nil,
		// replace the pods the client lists.
		change          func(m *v1alpha1.Memcached)
		pods            func(m *v1alpha1.Memcached) []*corev1.Pod
		wantErr         bool
		wantObserved    int64
		wantProgressing string // status and reason
		wantDegraded    string
		wantReplicas    int32
		// wantDone is whether kubectl wait --for=condition=Progressing=false returns.
		wantDone bool
	}{
		{
			name:    "refused: a thread count memcached exits on, and more pods",
			change:  func(m *v1alpha1.Memcached) { m.Spec.Size = 4; m.Spec.ExtraArgs = []string{"--threads=0"} },
			wantErr: true, wantObserved: 1, wantProgressing: "False Complete", wantDegraded: "True " + memcached.ReasonInvalidSpec, wantReplicas: 2,
		},
		{
			name: "fixed: a valid spec with a new image",
			change: func(m *v1alpha1.Memcached) {
				m.Spec.Size, m.Spec.ExtraArgs, m.Spec.Image = 2, nil, fixedImage
			},
			wantObserved: 3, wantProgressing: "True " + memcached.ReasonRollingUpdate, wantDegraded: "False " + memcached.ReasonAsExpected, wantReplicas: 2,
		},
		{
			name:         "rolled: the new template's pods are Ready",
			pods:         func(m *v1alpha1.Memcached) []*corev1.Pod { return pods(m, "example-c", "example-d") },
			wantObserved: 3, wantProgressing: "False " + memcached.ReasonComplete, wantDegraded: "False " + memcached.ReasonAsExpected, wantReplicas: 2,
			wantDone: true,
		},
	}
	for _, step := range steps {
		if step.change != nil {
			m = m.DeepCopy()
			step.change(m)
			m.Generation++
		}
		if step.pods != nil {
			f.client.pods = step.pods(m)
		}
		f.client.statuses = nil

		err := f.handle(m, false)

		if (err != nil) != step.wantErr {
			t.Fatalf("%s: Handle: got %v, want an error %t", step.name, err, step.wantErr)
		}
		if len(f.client.statuses) != 1 {
			t.Fatalf("%s: wrote status %d times, want 1", step.name, len(f.client.statuses))
		}
		f.storeStatus(m)
		if m.Status.ObservedGeneration != step.wantObserved {
			t.Errorf("%s: observedGeneration: got %d, want %d", step.name, m.Status.ObservedGeneration, step.wantObserved)
		}
		if got := conditionOf(m.Status, v1alpha1.MemcachedProgressing); got != step.wantProgressing {
			t.Errorf("%s: Progressing: got %q, want %q", step.name, got, step.wantProgressing)
		}
		if c := memcached.FindCondition(m.Status.Conditions, v1alpha1.MemcachedProgressing); c == nil || c.ObservedGeneration != step.wantObserved {
			t.Errorf("%s: Progressing: got %+v, want it for generation %d", step.name, c, step.wantObserved)
		}
		if got := conditionOf(m.Status, v1alpha1.MemcachedDegraded); got != step.wantDegraded {
			t.Errorf("%s: Degraded: got %q, want %q", step.name, got, step.wantDegraded)
		}
		if d := f.client.deployments["test/example"]; *d.Spec.Replicas != step.wantReplicas {
			t.Errorf("%s: deployment replicas: got %d, want %d", step.name, *d.Spec.Replicas, step.wantReplicas)
		}
		if done := memcachedtest.WaitMet(m.Generation, m.Status, v1alpha1.MemcachedProgressing, corev1.ConditionFalse); done != step.wantDone {
			t.Errorf("%s: kubectl wait --for=condition=Progressing=false returns: got %t, want %t", step.name, done, step.wantDone)
		}
		if !memcachedtest.WaitMet(m.Generation, m.Status, v1alpha1.MemcachedDegraded, memcached.FindCondition(m.Status.Conditions, v1alpha1.MemcachedDegraded).Status) {
			t.Errorf("%s: kubectl wait --for=condition=Degraded does not return, want it to: Degraded judges the current spec", step.name)
		}
		f.events()
	}
}

// TestRefusedNewMemcachedHasNoProgressing: a new Memcached whose spec is
// refused has no generation the operator acted on, so it gets no
// Progressing condition at all, whatever its size, and kubectl wait
// --for=condition=Progressing=false does not return.
func TestRefusedNewMemcachedHasNoProgressing(t *testing.T) {
	tests := []struct {
		name   string
		size   int32
		policy bool
		change func(m *v1alpha1.Memcached)
		reason string
	}{
		{name: "invalid, size 2", size: 2, reason: memcached.ReasonInvalidSpec,
			change: func(m *v1alpha1.Memcached) { m.Spec.ExtraArgs = []string{"--threads=0"} }},
		{name: "outside the policy, size 0", size: 0, policy: true, reason: memcached.ReasonPolicyViolation,
			change: func(m *v1alpha1.Memcached) { m.Spec.Image = "evil.example.org/miner:1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)
			tt.change(m)
			f := newFixture(t, m)
			if tt.policy {
				f.handler.EnforcePolicy(memcachedtest.StrictPolicy)
			}

			if err := f.handle(m, false); err == nil {
				t.Fatal("Handle: got nil, want the refusal")
			}

			status := f.client.statuses[0]
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedProgressing); c != nil {
				t.Errorf("Progressing: got %+v, want none", c)
			}
			if status.ObservedGeneration != 0 {
				t.Errorf("observedGeneration: got %d, want 0: nothing was acted on", status.ObservedGeneration)
			}
			if got, want := conditionOf(status, v1alpha1.MemcachedDegraded), "True "+tt.reason; got != want {
				t.Errorf("Degraded: got %q, want %q", got, want)
			}
			if memcachedtest.WaitMet(m.Generation, status, v1alpha1.MemcachedProgressing, corev1.ConditionFalse) {
				t.Error("kubectl wait --for=condition=Progressing=false returns, want it to wait")
			}
			if !memcachedtest.WaitMet(m.Generation, status, v1alpha1.MemcachedDegraded, corev1.ConditionTrue) {
				t.Error("kubectl wait --for=condition=Degraded does not return, want it to")
			}
		})
	}
}

// conditionOf returns the status and reason of status's condition of type
// typ, or "" without one.
func conditionOf(status v1alpha1.MemcachedStatus, typ v1alpha1.MemcachedConditionType) string {
	c := memcached.FindCondition(status.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}
