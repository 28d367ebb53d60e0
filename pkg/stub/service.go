package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ReasonServiceUpdated is the reason of the Normal Event recorded when the
// operator restores the selector or ports of a Memcached's Service.
const ReasonServiceUpdated = "ServiceUpdated"

// serviceChild names the Service's failures.
var serviceChild = childKind{
	kind:         "service",
	readFailed:   ReasonServiceReadFailed,
	createFailed: ReasonServiceCreateFailed,
	notOwned:     ReasonServiceNotOwned,
}

// newServiceForMemcached returns the headless Service of m's pods: it has
// no cluster IP, so DNS gives every Ready pod's address, and each pod a name
// of its own for its lifetime, which is how memcached clients list their
// servers.
// With monitoring it also has the sidecar's metrics port, for scrapers
// that find their targets through the Service's endpoints.
func newServiceForMemcached(m *v1alpha1.Memcached) *corev1.Service {
	ports := []corev1.ServicePort{{
		Name:       memcachedPortName,
		Port:       memcachedPort,
		TargetPort: intstr.FromString(memcachedPortName),
		Protocol:   corev1.ProtocolTCP,
	}}
	if monitored(m) {
		ports = append(ports, corev1.ServicePort{
			Name:       metricsPortName,
			Port:       metricsPort,
			TargetPort: intstr.FromString(metricsPortName),
			Protocol:   corev1.ProtocolTCP,
		})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(m),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labelsForMemcached(m.Name),
			Ports:     ports,
		},
	}
}

// ensureService makes sure that m's headless Service exists, is m's own and
// selects m's pods on the memcached port and, with monitoring, the metrics
// port, restoring its selector and ports
// when someone changed them.
func (h *Handler) ensureService(m *v1alpha1.Memcached) *failure {
	want := newServiceForMemcached(m)
	s, created, f := ensureExists(m, serviceChild, h.client.GetService, h.client.ReadService,
		func() (*corev1.Service, error) {
			manifest, err := toManifest(want)
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
			return newFailure(ReasonServiceUpdateFailed, "failed to delete service %s/%s, which has a cluster IP: %v", s.Namespace, s.Name, err)
		}
		return nil
	}
	if reflect.DeepEqual(s.Spec.Selector, want.Spec.Selector) && portsEqual(s.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	patch, err := jsonPatchSet(s.UID, map[string]interface{}{
		"/spec/selector": want.Spec.Selector,
		"/spec/ports":    want.Spec.Ports,
	})
	if err == nil {
		err = h.client.PatchService(s.Namespace, s.Name, s.UID, patch)
	}
	if err != nil {
		return newFailure(ReasonServiceUpdateFailed, "failed to restore the selector and ports of service %s/%s: %w", s.Namespace, s.Name, err)
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
