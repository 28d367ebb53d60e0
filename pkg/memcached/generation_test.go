package memcached_test

import (
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
)

// TestStatusOfGenerationsNotActedOn: status.observedGeneration and the
// Progressing condition follow the generation whose spec the Deployment
// runs, Available and Degraded the current one. So kubectl wait
// --for=condition=Progressing=false returns only for a generation the
// operator acted on and whose pods are all rolled, and
// --for=condition=Degraded returns for a refused one.
func TestStatusOfGenerationsNotActedOn(t *testing.T) {
	// good is generation 1 with its 3 pods Ready, as the operator reported it.
	good := memcachedtest.NewMemcached("example", 3)
	goodPods := []*corev1.Pod{
		memcachedtest.NewPod(good, "example-a", corev1.PodRunning, true),
		memcachedtest.NewPod(good, "example-b", corev1.PodRunning, true),
		memcachedtest.NewPod(good, "example-c", corev1.PodRunning, true),
	}
	good.Status = memcached.ComputeStatus(good, memcached.Observation{Pods: goodPods, TemplateHash: memcachedtest.CurrentHash(good)}, memcachedtest.Now)
	goodDeployed := &memcached.Rollout{Size: 3, TemplateHash: memcachedtest.CurrentHash(good)}
	// next is generation 2 of good, with a new image and 5 pods.
	next := good.DeepCopy()
	next.Generation, next.Spec.Size, next.Spec.Image = 2, 5, "example.com/memcached:next"
	// fresh is a new Memcached the operator has not acted on.
	fresh := memcachedtest.NewMemcached("example", 2)
	empty := memcachedtest.NewMemcached("example", 0)
	// actedThenRefused is generation 2, acted on, then refused by a policy
	// the operator was restarted with.
	actedThenRefused := next.DeepCopy()
	actedThenRefused.Status.ObservedGeneration = 2
	// duringRoll is generation 3, refused while the roll to generation 2,
	// next, goes on.
	duringRoll := next.DeepCopy()
	duringRoll.Generation = 3
	duringRoll.Status = memcached.ComputeStatus(next, memcached.Observation{TemplateHash: memcachedtest.CurrentHash(next)}, memcachedtest.Now)
	// fixed is generation 3 after next was refused.
	fixed := next.DeepCopy()
	fixed.Generation = 3
	fixed.Status = memcached.FailedStatus(next, memcached.Observation{Pods: goodPods, Behind: true, Deployed: goodDeployed}, memcached.ReasonInvalidSpec, "refused", memcachedtest.Now)
	rolling := append(goodPods[:2:2], memcachedtest.NewPod(next, "example-d", corev1.PodRunning, false))
	nextPods := []*corev1.Pod{
		memcachedtest.NewPod(next, "example-d", corev1.PodRunning, true),
		memcachedtest.NewPod(next, "example-e", corev1.PodRunning, true),
		memcachedtest.NewPod(next, "example-f", corev1.PodRunning, true),
		memcachedtest.NewPod(next, "example-g", corev1.PodRunning, true),
		memcachedtest.NewPod(next, "example-h", corev1.PodRunning, true),
	}

	type progressing struct {
		status          corev1.ConditionStatus
		reason, message string
		generation      int64
	}
	tests := []struct {
		name string
		m    *v1alpha1.Memcached
		o    memcached.Observation
		// reason, unless "", is that of a failed step (FailedStatus).
		reason          string
		wantObserved    int64
		wantProgressing *progressing
		wantDegraded    corev1.ConditionStatus
		// wantDone is whether kubectl wait --for=condition=Progressing=false returns.
		wantDone bool
	}{
		{
			name: "refused spec after a good one", m: next, reason: memcached.ReasonInvalidSpec,
			o:            memcached.Observation{Pods: goodPods, Behind: true, Deployed: goodDeployed},
			wantObserved: 1, wantProgressing: &progressing{corev1.ConditionFalse, memcached.ReasonComplete, "3/3 pods ready", 1}, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "spec refused by policy while the roll of the one before goes on", m: duringRoll, reason: memcached.ReasonPolicyViolation,
			o:            memcached.Observation{Pods: rolling, Behind: true, Deployed: &memcached.Rollout{Size: 5, TemplateHash: memcachedtest.CurrentHash(next)}},
			wantObserved: 2, wantProgressing: &progressing{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template", 2}, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "refused spec on a new object", m: fresh, reason: memcached.ReasonInvalidSpec,
			o:            memcached.Observation{Behind: true},
			wantObserved: 0, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "refused spec on a new object of size 0, whose pods would all be Ready", m: empty, reason: memcached.ReasonPolicyViolation,
			o:            memcached.Observation{Behind: true},
			wantObserved: 0, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "spec acted on once and refused since", m: actedThenRefused, reason: memcached.ReasonPolicyViolation,
			o:            memcached.Observation{Pods: goodPods, Behind: true, Deployed: goodDeployed},
			wantObserved: 1, wantProgressing: &progressing{corev1.ConditionFalse, memcached.ReasonComplete, "3/3 pods ready", 1}, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "scale refused before the Deployment took the spec", m: next, reason: memcached.ReasonDeploymentScaleFailed,
			o:            memcached.Observation{Pods: goodPods, Behind: true, Deployed: goodDeployed},
			wantObserved: 1, wantProgressing: &progressing{corev1.ConditionFalse, memcached.ReasonComplete, "3/3 pods ready", 1}, wantDegraded: corev1.ConditionTrue,
		},
		{
			name: "a fix after a refusal, rolling", m: fixed,
			o:            memcached.Observation{Pods: rolling, TemplateHash: memcachedtest.CurrentHash(fixed)},
			wantObserved: 3, wantProgressing: &progressing{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template", 3}, wantDegraded: corev1.ConditionFalse,
		},
		{
			name: "a fix after a refusal, rolled", m: fixed,
			o:            memcached.Observation{Pods: nextPods, TemplateHash: memcachedtest.CurrentHash(fixed)},
			wantObserved: 3, wantProgressing: &progressing{corev1.ConditionFalse, memcached.ReasonComplete, "5/5 pods ready", 3}, wantDegraded: corev1.ConditionFalse,
			wantDone: true,
		},
		{
			name: "a real roll, under way", m: next,
			o:            memcached.Observation{Pods: rolling, TemplateHash: memcachedtest.CurrentHash(next)},
			wantObserved: 2, wantProgressing: &progressing{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template", 2}, wantDegraded: corev1.ConditionFalse,
		},
		{
			name: "a real roll, done", m: next,
			o:            memcached.Observation{Pods: nextPods, TemplateHash: memcachedtest.CurrentHash(next)},
			wantObserved: 2, wantProgressing: &progressing{corev1.ConditionFalse, memcached.ReasonComplete, "5/5 pods ready", 2}, wantDegraded: corev1.ConditionFalse,
			wantDone: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got v1alpha1.MemcachedStatus
			if tt.reason != "" {
				got = memcached.FailedStatus(tt.m, tt.o, tt.reason, "why", memcachedtest.Now)
			} else {
				got = memcached.ComputeStatus(tt.m, tt.o, memcachedtest.Now)
			}

			if got.ObservedGeneration != tt.wantObserved {
				t.Errorf("observedGeneration: got %d, want %d", got.ObservedGeneration, tt.wantObserved)
			}
			c := memcached.FindCondition(got.Conditions, v1alpha1.MemcachedProgressing)
			switch want := tt.wantProgressing; {
			case want == nil && c != nil:
				t.Errorf("Progressing: got %+v, want none: the operator has acted on no generation", c)
			case want != nil && c == nil:
				t.Errorf("Progressing: got none, want %+v", *want)
			case want != nil && (c.Status != want.status || c.Reason != want.reason || c.Message != want.message || c.ObservedGeneration != want.generation):
				t.Errorf("Progressing: got %s %s %q for generation %d, want %s %s %q for generation %d",
					c.Status, c.Reason, c.Message, c.ObservedGeneration, want.status, want.reason, want.message, want.generation)
			}
			for _, typ := range []v1alpha1.MemcachedConditionType{v1alpha1.MemcachedAvailable, v1alpha1.MemcachedDegraded} {
				if c := memcached.FindCondition(got.Conditions, typ); c == nil || c.ObservedGeneration != tt.m.Generation {
					t.Errorf("%s: got %+v, want it for generation %d", typ, c, tt.m.Generation)
				}
			}
			if done := memcachedtest.WaitMet(tt.m.Generation, got, v1alpha1.MemcachedProgressing, corev1.ConditionFalse); done != tt.wantDone {
				t.Errorf("kubectl wait --for=condition=Progressing=false returns: got %t, want %t", done, tt.wantDone)
			}
			if degraded := memcachedtest.WaitMet(tt.m.Generation, got, v1alpha1.MemcachedDegraded, tt.wantDegraded); !degraded {
				t.Errorf("kubectl wait --for=condition=Degraded=%s does not return, want it to", tt.wantDegraded)
			}
		})
	}
}
