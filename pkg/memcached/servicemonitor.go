package memcached

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serviceMonitorInterval is how often Prometheus scrapes the sidecar:
// memcached's stats change little faster, and the Prometheus Operator's own
// examples use it.
const serviceMonitorInterval = "30s"

// ServiceMonitorGVR is the Prometheus Operator's ServiceMonitor API. Its
// CustomResourceDefinition may be absent: the operator uses the API only while
// discovery says it is served (see kube.Kind.Optional).
var ServiceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// serviceMonitorSpec is the spec of m's ServiceMonitor: it selects m's
// headless Service by its labels, in m's namespace, and scrapes the port
// named metrics of its endpoints.
func serviceMonitorSpec(m *v1alpha1.Memcached) map[string]interface{} {
	matchLabels := map[string]interface{}{}
	for k, v := range Labels(m.Name) {
		matchLabels[k] = v
	}
	return map[string]interface{}{
		"selector":          map[string]interface{}{"matchLabels": matchLabels},
		"namespaceSelector": map[string]interface{}{"matchNames": []interface{}{m.Namespace}},
		"endpoints": []interface{}{map[string]interface{}{
			"port":     metricsPortName,
			"interval": serviceMonitorInterval,
		}},
	}
}

// NewServiceMonitor returns m's ServiceMonitor. client-go 1.11
// has no type for it, so it is unstructured, with the metadata every child
// has and spec.monitoring.labels (see monitoringMeta).
func NewServiceMonitor(m *v1alpha1.Memcached) (*unstructured.Unstructured, error) {
	meta := monitoringMeta(m)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": ServiceMonitorGVR.GroupVersion().String(),
		"kind":       "ServiceMonitor",
		"metadata":   content,
		"spec":       serviceMonitorSpec(m),
	}}, nil
}

// HasMetricsPort reports whether s has the metrics port.
func HasMetricsPort(s *corev1.Service) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == metricsPortName {
			return true
		}
	}
	return false
}

// The reasons below name the failed steps of the Memcached's ServiceMonitor,
// as those of reasons.go name the Deployment's.
const (
	// ReasonServiceMonitorCreateFailed and the three reasons after it are
	// the same for the Memcached's ServiceMonitor, which the operator
	// deletes when monitoring is turned off.
	ReasonServiceMonitorCreateFailed = "ServiceMonitorCreateFailed"
	ReasonServiceMonitorReadFailed   = "ServiceMonitorReadFailed"
	ReasonServiceMonitorUpdateFailed = "ServiceMonitorUpdateFailed"
	ReasonServiceMonitorDeleteFailed = "ServiceMonitorDeleteFailed"
	// ReasonServiceMonitorNotOwned means a ServiceMonitor with the
	// Memcached's name exists but another owner controls it.
	ReasonServiceMonitorNotOwned = "ServiceMonitorNotOwned"
)
