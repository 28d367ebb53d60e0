package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonServiceUpdated is the reason of the Normal Event recorded when the
// operator restores the selector or ports of a Memcached's Service.
const ReasonServiceUpdated = "ServiceUpdated"

// serviceChild names the Service's failures.
var serviceChild = childKind{
	kind:         "service",
	readFailed:   memcached.ReasonServiceReadFailed,
	createFailed: memcached.ReasonServiceCreateFailed,
	notOwned:     memcached.ReasonServiceNotOwned,
}

// ensureService makes sure that m's headless Service exists, is m's own and
// selects m's pods on the memcached port and, with monitoring, the metrics
// port, restoring its selector and ports
// when someone changed them.
func (h *Handler) ensureService(m *v1alpha1.Memcached) *failure {
	want := memcached.NewService(m)
	s, created, f := ensureExists(m, serviceChild, h.client.GetService, h.client.ReadService,
		func() (*corev1.Service, error) {
			manifest, err := memcached.ToManifest(want)
			if err != nil {
				return nil, err
			}
			return h.client.CreateService(manifest)
		})
	if f != nil || created {
		return f
	}
	if !metav1.IsControlledBy(s, m) {
		return notOwned(m, serviceChild, s)
	}
	if s.Spec.ClusterIP != corev1.ClusterIPNone {
		// A cluster IP cannot be removed: the Service goes, and its
		// deletion brings the reconcile that creates it anew.
		if err := h.client.DeleteService(s.Namespace, s.Name, s.UID); err != nil && !isGone(err) {
			return newFailure(memcached.ReasonServiceUpdateFailed, "failed to delete service %s/%s, which has a cluster IP: %v", s.Namespace, s.Name, err)
		}
		return nil
	}
	if reflect.DeepEqual(s.Spec.Selector, want.Spec.Selector) && portsEqual(s.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	if !memcached.Monitored(m) && memcached.HasMetricsPort(s) {
		if f := h.removeServiceMonitor(m); f != nil {
			return f
		}
	}
	patch, err := memcached.JSONPatchSet(s.UID, map[string]interface{}{
		"/spec/selector": want.Spec.Selector,
		"/spec/ports":    want.Spec.Ports,
	})
	if err == nil {
		err = h.client.PatchService(s.Namespace, s.Name, s.UID, patch)
	}
	if err != nil {
		return newFailure(memcached.ReasonServiceUpdateFailed, "failed to restore the selector and ports of service %s/%s: %w", s.Namespace, s.Name, err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonServiceUpdated, "Restored the selector and ports of service %s", s.Name)
	return nil
}

// portsEqual reports whether got holds the ports of want, comparing what
// the operator sets and ignoring what the API server fills in.
func portsEqual(got, want []corev1.ServicePort) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Port != w.Port || g.TargetPort != w.TargetPort || g.Protocol != w.Protocol {
			return false
		}
	}
	return true
}
