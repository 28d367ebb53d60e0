package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	// ReasonServiceMonitorCreated, ReasonServiceMonitorUpdated and
	// ReasonServiceMonitorDeleted are the reasons of the Normal Events
	// recorded when the operator creates a Memcached's ServiceMonitor,
	// restores its spec, or deletes it once monitoring is off.
	ReasonServiceMonitorCreated = "ServiceMonitorCreated"
	ReasonServiceMonitorUpdated = "ServiceMonitorUpdated"
	ReasonServiceMonitorDeleted = "ServiceMonitorDeleted"
)

// serviceMonitorChild is the ServiceMonitor of a Memcached with monitoring,
// whose spec is restored when someone changed it, while the API server
// serves ServiceMonitors; without them it does nothing, and nothing fails.
// It is read from the API server, as no cache watches a
// CustomResourceDefinition that may not exist: one GET per reconcile of a
// Memcached with monitoring, none for the others, and a second one for a
// foreign ServiceMonitor, as ensureExists confirms what a cache shows.
//
// Once monitoring is off, serviceChild removes it before it takes the
// metrics port off the Service: that port marks the Memcacheds that may
// still have a ServiceMonitor, so that the others cost no request, and it
// stays until the ServiceMonitor is gone, across failures and restarts.
var serviceMonitorChild = &ownedChild[*unstructured.Unstructured]{
	childKind: childKind{
		kind:         "servicemonitor",
		readFailed:   memcached.ReasonServiceMonitorReadFailed,
		createFailed: memcached.ReasonServiceMonitorCreateFailed,
		notOwned:     memcached.ReasonServiceMonitorNotOwned,
		updateFailed: memcached.ReasonServiceMonitorUpdateFailed,
		deleteFailed: memcached.ReasonServiceMonitorDeleteFailed,
	},
	api: &kube.Kind{
		Resource: memcached.ServiceMonitorGVR,
		New:      func() kube.Object { return &unstructured.Unstructured{} },
		Optional: true,
	},
	wanted: memcached.Monitored,
	want: func(_ *Handler, m *v1alpha1.Memcached) (*unstructured.Unstructured, error) {
		return memcached.NewServiceMonitor(m)
	},
	holds: func(got, want *unstructured.Unstructured) bool {
		return holds(got.Object["spec"], want.Object["spec"])
	},
	restore: func(_, want *unstructured.Unstructured) map[string]interface{} {
		return map[string]interface{}{"/spec": want.Object["spec"]}
	},
	restoreFailed: "failed to restore servicemonitor %s/%s: %w",
	created:       event{ReasonServiceMonitorCreated, "Created servicemonitor %[1]s for the metrics port of service %[1]s"},
	restored:      event{ReasonServiceMonitorUpdated, "Restored the spec of servicemonitor %s"},
	deleted:       event{ReasonServiceMonitorDeleted, "Deleted servicemonitor %s: monitoring is off"},
}

// holds reports whether got, decoded JSON, has every field of want with
// want's value, and lists of want's length: fields that the API server or
// a newer CustomResourceDefinition defaults are no difference to restore.
func holds(got, want interface{}) bool {
	switch w := want.(type) {
	case map[string]interface{}:
		g, ok := got.(map[string]interface{})
		if !ok {
			return false
		}
		for k, v := range w {
			if !holds(g[k], v) {
				return false
			}
		}
		return true
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !holds(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}
