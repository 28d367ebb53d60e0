package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ReasonPodDisruptionBudgetUpdated is the reason of the Normal Event
// recorded when the operator restores the budget of a Memcached's
// PodDisruptionBudget.
const ReasonPodDisruptionBudgetUpdated = "PodDisruptionBudgetUpdated"

// pdbChild is m's PodDisruptionBudget while m has more than one pod; with
// one, m's own is deleted. Its budget is restored when someone changed it.
// It speaks policy/v1, which client-go 1.11 does not know, as JSON decoded
// into the policy/v1beta1 types, whose fields used here have the same
// names.
var pdbChild = &ownedChild[*policyv1beta1.PodDisruptionBudget]{
	childKind: childKind{
		kind:         "poddisruptionbudget",
		readFailed:   memcached.ReasonPodDisruptionBudgetReadFailed,
		createFailed: memcached.ReasonPodDisruptionBudgetCreateFailed,
		notOwned:     memcached.ReasonPodDisruptionBudgetNotOwned,
		updateFailed: memcached.ReasonPodDisruptionBudgetUpdateFailed,
		deleteFailed: memcached.ReasonPodDisruptionBudgetDeleteFailed,
	},
	api: &kube.Kind{
		Resource: memcached.PolicyV1.WithResource(memcached.PodDisruptionBudgetResource.Resource),
		New:      func() kube.Object { return &policyv1beta1.PodDisruptionBudget{} },
		NewList:  func() runtime.Object { return &policyv1beta1.PodDisruptionBudgetList{} },
		Trim:     kube.TrimOf(trimPodDisruptionBudget),
		// The disruption controller updates a budget's status whenever a
		// pod's readiness changes; the status comes from the pods.
		Changed: kube.SpecChanged,
	},
	wanted:         memcached.WantsPodDisruptionBudget,
	removeUnwanted: func(*v1alpha1.Memcached) bool { return true },
	want: func(_ *Handler, m *v1alpha1.Memcached) (*policyv1beta1.PodDisruptionBudget, error) {
		return memcached.NewPodDisruptionBudget(m), nil
	},
	holds: func(got, want *policyv1beta1.PodDisruptionBudget) bool {
		return got.Spec.MinAvailable == nil && reflect.DeepEqual(got.Spec.MaxUnavailable, want.Spec.MaxUnavailable) &&
			reflect.DeepEqual(got.Spec.Selector, want.Spec.Selector)
	},
	restore: func(got, want *policyv1beta1.PodDisruptionBudget) map[string]interface{} {
		values := map[string]interface{}{
			"/spec/maxUnavailable": want.Spec.MaxUnavailable,
			"/spec/selector":       want.Spec.Selector,
		}
		if got.Spec.MinAvailable != nil {
			// A budget has minAvailable or maxUnavailable, never both.
			values["/spec/minAvailable"] = nil
		}
		return values
	},
	restoreFailed: "failed to restore poddisruptionbudget %s/%s: %w",
	restored:      event{ReasonPodDisruptionBudgetUpdated, "Restored poddisruptionbudget %s to maxUnavailable 1"},
}

// trimPodDisruptionBudget keeps what pdbChild compares: the budget's
// metadata without annotations, and its spec.
func trimPodDisruptionBudget(p *policyv1beta1.PodDisruptionBudget) {
	p.Annotations = nil
	p.Status = policyv1beta1.PodDisruptionBudgetStatus{}
}
