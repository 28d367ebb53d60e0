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

// strictPolicy is a Policy with every check on.
var strictPolicy = Policy{
	ImagePrefixes:            []string{"registry.example.com/cache/", "docker.io/library/memcached:"},
	PriorityClasses:          []string{"cache-low", "cache-high"},
	ForbidKeylessTolerations: true,
}

func TestPolicyCheck(t *testing.T) {
	keyless := corev1.Toleration{Operator: corev1.TolerationOpExists}
	keyed := corev1.Toleration{Key: "example.com/dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name    string
		policy  Policy
		spec    func(s *v1alpha1.MemcachedSpec)
		wantErr string
	}{
		{name: "no policy allows all", spec: func(s *v1alpha1.MemcachedSpec) {
			s.Image, s.PriorityClassName, s.Tolerations = "evil.example.org/miner:1", "system-cluster-critical", []corev1.Toleration{keyless}
		}},
		{name: "defaults pass a strict policy", policy: strictPolicy, spec: func(*v1alpha1.MemcachedSpec) {}},
		{name: "image under a prefix", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "registry.example.com/cache/memcached:1.6" }},
		{name: "image with a tag under a prefix", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "docker.io/library/memcached:1.6-alpine" }},
		{name: "image outside every prefix", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "evil.example.org/miner:1" },
			wantErr: `spec.image "evil.example.org/miner:1" does not start with one of the prefixes the operator allows (registry.example.com/cache/, docker.io/library/memcached:)`},
		{name: "image that only shares a host name's beginning", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "registry.example.com.evil.org/cache/x" },
			wantErr: "does not start with one of the prefixes"},
		{name: "allowed priority class", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "cache-high" }},
		{name: "priority class outside the list", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "system-cluster-critical" },
			wantErr: `spec.priorityClassName "system-cluster-critical" is not one of the priority classes the operator allows (cache-low, cache-high)`},
		{name: "toleration with a key", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyed} }},
		{name: "keyless Exists", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyed, keyless} },
			wantErr: "spec.tolerations[1] has no key and operator Exists, which tolerates every taint"},
		{name: "keyless Exists for one effect", policy: strictPolicy, spec: func(s *v1alpha1.MemcachedSpec) {
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, wantErr: "spec.tolerations[0] has no key"},
		{name: "keyless Exists allowed without the flag", policy: Policy{ImagePrefixes: []string{"x/"}}, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyless} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)
			err := tt.policy.check(m)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want it allowed", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

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
			f.handler.EnforcePolicy(strictPolicy)
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
				"update memcached/status test/example",
			})
			if c := memcached.FindCondition(f.client.statuses[0].Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonPolicyViolation || c.Message != err.Error() {
				t.Errorf("Degraded: got %+v, want True with reason %s and message %q", c, ReasonPolicyViolation, err)
			}
			if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonPolicyViolation+" ") {
				t.Errorf("events: got %q, want one Warning %s", got, ReasonPolicyViolation)
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
	f.handler.EnforcePolicy(strictPolicy)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, createActions)
}
