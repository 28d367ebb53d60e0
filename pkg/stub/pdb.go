package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonPodDisruptionBudgetUpdated is the reason of the Normal Event
// recorded when the operator restores the budget of a Memcached's
// PodDisruptionBudget.
const ReasonPodDisruptionBudgetUpdated = "PodDisruptionBudgetUpdated"

// pdbChild names the PodDisruptionBudget's failures.
var pdbChild = childKind{
	kind:         "poddisruptionbudget",
	readFailed:   memcached.ReasonPodDisruptionBudgetReadFailed,
	createFailed: memcached.ReasonPodDisruptionBudgetCreateFailed,
	notOwned:     memcached.ReasonPodDisruptionBudgetNotOwned,
}

// ensurePodDisruptionBudget makes sure that m has its budget while it has
// more than one pod, and none of its own otherwise, restoring the budget
// when someone changed it.
func (h *Handler) ensurePodDisruptionBudget(m *v1alpha1.Memcached) *failure {
	if !memcached.WantsPodDisruptionBudget(m) {
		return h.removePodDisruptionBudget(m)
	}
	want := memcached.NewPodDisruptionBudget(m)
	p, created, f := ensureExists(m, pdbChild, h.client.GetPodDisruptionBudget, h.client.ReadPodDisruptionBudget,
		func() (*policyv1beta1.PodDisruptionBudget, error) {
			manifest, err := memcached.ToManifest(want)
			if err != nil {
				return nil, err
			}
			return h.client.CreatePodDisruptionBudget(manifest)
		})
	if f != nil || created {
		return f
	}
	if !metav1.IsControlledBy(p, m) {
		return notOwned(m, pdbChild, p)
	}
	if p.Spec.MinAvailable == nil && reflect.DeepEqual(p.Spec.MaxUnavailable, want.Spec.MaxUnavailable) &&
		reflect.DeepEqual(p.Spec.Selector, want.Spec.Selector) {
		return nil
	}
	values := map[string]interface{}{
		"/spec/maxUnavailable": want.Spec.MaxUnavailable,
		"/spec/selector":       want.Spec.Selector,
	}
	if p.Spec.MinAvailable != nil {
		// A budget has minAvailable or maxUnavailable, never both.
		values["/spec/minAvailable"] = nil
	}
	patch, err := memcached.JSONPatchSet(p.UID, values)
	if err == nil {
		err = h.client.PatchPodDisruptionBudget(p.Namespace, p.Name, p.UID, patch)
	}
	if err != nil {
		return newFailure(memcached.ReasonPodDisruptionBudgetUpdateFailed, "failed to restore poddisruptionbudget %s/%s: %w", p.Namespace, p.Name, err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonPodDisruptionBudgetUpdated, "Restored poddisruptionbudget %s to maxUnavailable 1", p.Name)
	return nil
}

// removePodDisruptionBudget deletes m's own budget, if it has one. A budget
// of that name that is not m's is left alone: it is not in the way.
func (h *Handler) removePodDisruptionBudget(m *v1alpha1.Memcached) *failure {
	p, err := h.client.GetPodDisruptionBudget(m.Namespace, m.Name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return newFailure(memcached.ReasonPodDisruptionBudgetReadFailed, "failed to get poddisruptionbudget %s/%s: %v", m.Namespace, m.Name, err)
	}
	if !metav1.IsControlledBy(p, m) || p.DeletionTimestamp != nil {
		return nil
	}
	if err := h.client.DeletePodDisruptionBudget(p.Namespace, p.Name, p.UID); err != nil && !isGone(err) {
		return newFailure(memcached.ReasonPodDisruptionBudgetDeleteFailed, "failed to delete poddisruptionbudget %s/%s: %v", p.Namespace, p.Name, err)
	}
	return nil
}
