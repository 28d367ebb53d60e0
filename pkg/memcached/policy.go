package memcached

import (
	"fmt"
	"slices"
	"strings"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// ReasonPolicyViolation means the Memcached asks for what the operator's
// policy flags do not allow (see Policy). Like ReasonInvalidSpec, nothing
// is created or changed until the spec complies: no new Deployment, and an
// existing one keeps its pod template and replicas.
const ReasonPolicyViolation = "PolicyViolation"

// Policy bounds what a Memcached may ask of its pods, for clusters where
// the users who may create Memcached resources may not create pods: the
// operator's ServiceAccount may, so without a policy such users could run
// through the operator what they may not run themselves. The zero Policy
// allows everything the CRD accepts.
type Policy struct {
	// ImagePrefixes, when not empty, are the prefixes one of which
	// spec.image must start with. An empty spec.image, the operator's own
	// --memcached-image, is always allowed.
	ImagePrefixes []string
	// PriorityClasses, when not empty, are the only priority classes
	// spec.priorityClassName may name; an empty one is always allowed.
	PriorityClasses []string
	// ForbidKeylessTolerations refuses a toleration with no key and
	// operator Exists, which tolerates every taint, including those that
	// keep pods off control-plane and dedicated nodes.
	ForbidKeylessTolerations bool
}

// Check returns why m is outside p, or nil. The handler refuses such an m
// before it changes anything.
func (p Policy) Check(m *v1alpha1.Memcached) error {
	if image := m.Spec.Image; image != "" && len(p.ImagePrefixes) > 0 && !slices.ContainsFunc(p.ImagePrefixes, func(prefix string) bool { return strings.HasPrefix(image, prefix) }) {
		return fmt.Errorf("spec.image %q does not start with one of the prefixes the operator allows (%s)", image, strings.Join(p.ImagePrefixes, ", "))
	}
	if pc := m.Spec.PriorityClassName; pc != "" && len(p.PriorityClasses) > 0 && !slices.Contains(p.PriorityClasses, pc) {
		return fmt.Errorf("spec.priorityClassName %q is not one of the priority classes the operator allows (%s)", pc, strings.Join(p.PriorityClasses, ", "))
	}
	if p.ForbidKeylessTolerations {
		for i, t := range m.Spec.Tolerations {
			if t.Key == "" && t.Operator == corev1.TolerationOpExists {
				return fmt.Errorf("spec.tolerations[%d] has no key and operator Exists, which tolerates every taint; the operator allows only tolerations that name a key", i)
			}
		}
	}
	return nil
}
