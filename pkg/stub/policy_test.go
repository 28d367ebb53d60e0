package stub

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestPolicyViolationChangesNothing: a Memcached outside the policy gets
// Degraded=True PolicyViolation and one Warning Event, and no pod: no
// Deployment is created, and an existing one is neither scaled nor given
// the new template, so that the pods it runs stay those of a spec that
// complied.
func TestPolicyViolationChangesNothing(t *testing.T) {
	tests := []struct {
		name    string
		objects func(m *v1alpha1.Memcached) []runtime.Object
		change  func(m *v1alpha1.Memcached)
	}{
		{name: "new memcached with an image outside the prefixes", objects: func(m *v1alpha1.Memcached) []runtime.Object { return []runtime.Object{m} },
			change: func(m *v1alpha1.Memcached) { m.Spec.Image = "evil.example.org/miner:1" }},
		{name: "existing memcached moved to a priority class outside the list and scaled", objects: func(m *v1alpha1.Memcached) []runtime.Object { return inSync(m, 2) },
			change: func(m *v1alpha1.Memcached) { m.Spec.PriorityClassName = "system-node-critical"; m.Spec.Size = 5 }},
		{name: "existing memcached given a keyless Exists toleration", objects: func(m *v1alpha1.Memcached) []runtime.Object { return inSync(m, 2) },
			change: func(m *v1alpha1.Memcached) {
				m.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			f := newFixture(t, tt.objects(m)...)
			f.handler.EnforcePolicy(memcachedtest.StrictPolicy)
			changed := m.DeepCopy()
			tt.change(changed)
			changed.Generation++

			err := f.handle(changed, false)

			if err == nil {
				t.Fatal("Handle: got nil, want the policy violation")
			}
			checkActions(t, f.client.actions, []string{
				"list pods test app=memcached,memcached_cr=example",
				"get service test/example",
				"get deployment test/example",
				"update memcached/status test/example",
			})
			if c := memcached.FindCondition(f.client.statuses[0].Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonPolicyViolation || c.Message != err.Error() {
				t.Errorf("Degraded: got %+v, want True with reason %s and message %q", c, memcached.ReasonPolicyViolation, err)
			}
			if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+memcached.ReasonPolicyViolation+" ") {
				t.Errorf("events: got %q, want one Warning %s", got, memcached.ReasonPolicyViolation)
			}
		})
	}
}

func TestPolicyAllowsACompliantMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	m.Spec.Image = "registry.example.com/cache/memcached:1.6"
	m.Spec.PriorityClassName = "cache-low"
	m.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/dedicated", Operator: corev1.TolerationOpExists}}
	f := newFixture(t, m)
	f.handler.EnforcePolicy(memcachedtest.StrictPolicy)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, createActions)
}
