package memcached

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NewPodDisruptionBudget returns the budget that lets a node
// drain evict only one of m's pods at a time. It is built on client-go
// 1.11's policy/v1beta1 type but sent as policy/v1 (see pdbChild in package
// stub).
func NewPodDisruptionBudget(m *v1alpha1.Memcached) *policyv1beta1.PodDisruptionBudget {
	one := intstr.FromInt(1)
	return &policyv1beta1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: PolicyV1.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: childMeta(m),
		Spec: policyv1beta1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: Labels(m.Name)},
		},
	}
}

// WantsPodDisruptionBudget reports whether m should have a budget: with a
// single pod, a budget of one unavailable pod protects nothing, and one of
// none would block every node drain.
func WantsPodDisruptionBudget(m *v1alpha1.Memcached) bool {
	return m.Spec.Size > 1
}

// PolicyV1 is the group version of PodDisruptionBudgets that Kubernetes
// serves since 1.25 removed policy/v1beta1, the only one client-go 1.11
// knows.
var PolicyV1 = schema.GroupVersion{Group: "policy", Version: "v1"}

// The reasons below name the failed steps of the Memcached's PodDisruptionBudget,
// as those of reasons.go name the Deployment's.
const (
	// ReasonPodDisruptionBudgetCreateFailed and the three reasons after it
	// are the same for the Memcached's PodDisruptionBudget, which the
	// operator also deletes when spec.size drops to 1 or 0.
	ReasonPodDisruptionBudgetCreateFailed = "PodDisruptionBudgetCreateFailed"
	ReasonPodDisruptionBudgetReadFailed   = "PodDisruptionBudgetReadFailed"
	ReasonPodDisruptionBudgetUpdateFailed = "PodDisruptionBudgetUpdateFailed"
	ReasonPodDisruptionBudgetDeleteFailed = "PodDisruptionBudgetDeleteFailed"
	// ReasonPodDisruptionBudgetNotOwned means a PodDisruptionBudget with the
	// Memcached's name exists but another owner controls it.
	ReasonPodDisruptionBudgetNotOwned = "PodDisruptionBudgetNotOwned"
)
