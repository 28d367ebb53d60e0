package memcached_test

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
)

func TestPolicyCheck(t *testing.T) {
	keyless := corev1.Toleration{Operator: corev1.TolerationOpExists}
	keyed := corev1.Toleration{Key: "example.com/dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name    string
		policy  memcached.Policy
		spec    func(s *v1alpha1.MemcachedSpec)
		wantErr string
	}{
		{name: "no policy allows all", spec: func(s *v1alpha1.MemcachedSpec) {
			s.Image, s.PriorityClassName, s.Tolerations = "evil.example.org/miner:1", "system-cluster-critical", []corev1.Toleration{keyless}
		}},
		{name: "defaults pass a strict policy", policy: memcachedtest.StrictPolicy, spec: func(*v1alpha1.MemcachedSpec) {}},
		{name: "image under a prefix", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "registry.example.com/cache/memcached:1.6" }},
		{name: "image with a tag under a prefix", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "docker.io/library/memcached:1.6-alpine" }},
		{name: "image outside every prefix", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "evil.example.org/miner:1" },
			wantErr: `spec.image "evil.example.org/miner:1" does not start with one of the prefixes the operator allows (registry.example.com/cache/, docker.io/library/memcached:)`},
		{name: "image that only shares a host name's beginning", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Image = "registry.example.com.evil.org/cache/x" },
			wantErr: "does not start with one of the prefixes"},
		{name: "allowed priority class", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "cache-high" }},
		{name: "priority class outside the list", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "system-cluster-critical" },
			wantErr: `spec.priorityClassName "system-cluster-critical" is not one of the priority classes the operator allows (cache-low, cache-high)`},
		{name: "toleration with a key", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyed} }},
		{name: "keyless Exists", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyed, keyless} },
			wantErr: "spec.tolerations[1] has no key and operator Exists, which tolerates every taint"},
		{name: "keyless Exists for one effect", policy: memcachedtest.StrictPolicy, spec: func(s *v1alpha1.MemcachedSpec) {
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, wantErr: "spec.tolerations[0] has no key"},
		{name: "keyless Exists allowed without the flag", policy: memcached.Policy{ImagePrefixes: []string{"x/"}}, spec: func(s *v1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{keyless} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)
			err := tt.policy.Check(m)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want it allowed", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
