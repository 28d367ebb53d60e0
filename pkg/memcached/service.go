package memcached

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NewService returns the headless Service of m's pods: it has
// no cluster IP, so DNS gives every Ready pod's address, and each pod a name
// of its own for its lifetime, which is how memcached clients list their
// servers.
// With monitoring it also has the sidecar's metrics port, for scrapers
// that find their targets through the Service's endpoints; with discovery,
// the sidecar's discovery port, so that the Service's DNS name and port are
// the configuration endpoint that ElastiCache clients are given.
func NewService(m *v1alpha1.Memcached) *corev1.Service {
	ports := []corev1.ServicePort{{
		Name:       memcachedPortName,
		Port:       memcachedPort,
		TargetPort: intstr.FromString(memcachedPortName),
		Protocol:   corev1.ProtocolTCP,
	}}
	if Monitored(m) {
		ports = append(ports, corev1.ServicePort{
			Name:       metricsPortName,
			Port:       metricsPort,
			TargetPort: intstr.FromString(metricsPortName),
			Protocol:   corev1.ProtocolTCP,
		})
	}
	if Discovered(m) {
		ports = append(ports, corev1.ServicePort{
			Name:       discoveryPortName,
			Port:       discoveryPort,
			TargetPort: intstr.FromString(discoveryPortName),
			Protocol:   corev1.ProtocolTCP,
		})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(m),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  Labels(m.Name),
			Ports:     ports,
		},
	}
}

// The reasons below name the failed steps of the Memcached's Service,
// as those of reasons.go name the Deployment's.
const (
	// ReasonServiceCreateFailed, ReasonServiceReadFailed and
	// ReasonServiceUpdateFailed are the same for the Memcached's headless
	// Service; an update restores its selector and ports.
	ReasonServiceCreateFailed = "ServiceCreateFailed"
	ReasonServiceReadFailed   = "ServiceReadFailed"
	ReasonServiceUpdateFailed = "ServiceUpdateFailed"
	// ReasonServiceNotOwned means a Service with the Memcached's name exists
	// but another owner controls it; the operator leaves it alone.
	ReasonServiceNotOwned = "ServiceNotOwned"
)
