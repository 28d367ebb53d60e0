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

// MemcachedSeriesLabel is the label that holds a Memcached's name on every
// series scraped from its pods, copied from the pods' CRLabel by the
// ServiceMonitor's relabeling and by deploy/monitoring/prometheus.yaml's.
// PodMatchers, the dashboards and the console select a Memcached's series
// by it. It is named as prometheus.yaml has always named it, rather than
// CRLabel as the Prometheus Operator's podTargetLabels would copy it, so
// that both scrapes give the same label, the one that MemcachedAlertLabel
// puts on the alerts of a PrometheusRule. No series of the sidecar has a
// label of that name, which the scrape would rename exported_memcached.
const MemcachedSeriesLabel = "memcached"

// serviceMonitorSpec is the spec of m's ServiceMonitor: it selects m's
// headless Service by its labels, in m's namespace, and scrapes the port
// named metrics of its endpoints, with MemcachedSeriesLabel taken from the
// CRLabel of the pod behind each endpoint. The pods are left as they are:
// their template already carries CRLabel.
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
			"relabelings": []interface{}{map[string]interface{}{
				"action":       "replace",
				"sourceLabels": []interface{}{"__meta_kubernetes_pod_label_" + CRLabel},
				"targetLabel":  MemcachedSeriesLabel,
			}},
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
