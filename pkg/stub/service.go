package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ReasonServiceUpdated is the reason of the Normal Event recorded when the
// operator restores the selector or ports of a Memcached's Service.
const ReasonServiceUpdated = "ServiceUpdated"

// serviceChild is m's headless Service, which selects m's pods on the
// memcached port and, with monitoring, the metrics port. Its selector and
// ports are restored when someone changed them; a cluster IP cannot be
// removed, so a Service with one goes and is created anew.
var serviceChild = &ownedChild[*corev1.Service]{
	childKind: childKind{
		kind:         "service",
		readFailed:   memcached.ReasonServiceReadFailed,
		createFailed: memcached.ReasonServiceCreateFailed,
		notOwned:     memcached.ReasonServiceNotOwned,
		updateFailed: memcached.ReasonServiceUpdateFailed,
	},
	api: &kube.Kind{
		Resource: corev1.SchemeGroupVersion.WithResource(memcached.ServiceResource.Resource),
		New:      func() kube.Object { return &corev1.Service{} },
		NewList:  func() runtime.Object { return &corev1.ServiceList{} },
		Trim:     kube.TrimOf(trimService),
	},
	want: func(_ *Handler, m *v1alpha1.Memcached) (*corev1.Service, error) { return memcached.NewService(m), nil },
	holds: func(got, want *corev1.Service) bool {
		return reflect.DeepEqual(got.Spec.Selector, want.Spec.Selector) && portsEqual(got.Spec.Ports, want.Spec.Ports)
	},
	restore: func(_, want *corev1.Service) map[string]interface{} {
		return map[string]interface{}{
			"/spec/selector": want.Spec.Selector,
			"/spec/ports":    want.Spec.Ports,
		}
	},
	replace: func(got *corev1.Service) string {
		if got.Spec.ClusterIP != corev1.ClusterIPNone {
			return "which has a cluster IP"
		}
		return ""
	},
	beforeRestore: func(h *Handler, m *v1alpha1.Memcached, got *corev1.Service) *failure {
		if !memcached.Monitored(m) && memcached.HasMetricsPort(got) {
			if f := serviceMonitorChild.remove(h, m); f != nil {
				return f
			}
			return prometheusRuleChild.remove(h, m)
		}
		return nil
	},
	restoreFailed: "failed to restore the selector and ports of service %s/%s: %w",
	restored:      event{ReasonServiceUpdated, "Restored the selector and ports of service %s"},
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

// trimService keeps what serviceChild compares: the Service's metadata
// without annotations, its cluster IP, selector and ports.
func trimService(s *corev1.Service) {
	s.Annotations = nil
	s.Spec = corev1.ServiceSpec{
		ClusterIP: s.Spec.ClusterIP,
		Selector:  s.Spec.Selector,
		Ports:     s.Spec.Ports,
	}
	s.Status = corev1.ServiceStatus{}
}
