package stub

import (
	"reflect"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// serviceMonitorChild names the ServiceMonitor's failures.
var serviceMonitorChild = childKind{
	kind:         "servicemonitor",
	readFailed:   memcached.ReasonServiceMonitorReadFailed,
	createFailed: memcached.ReasonServiceMonitorCreateFailed,
	notOwned:     memcached.ReasonServiceMonitorNotOwned,
}

// ensureServiceMonitor makes sure that a Memcached with monitoring has its
// ServiceMonitor, restoring its spec when someone changed it, while the
// API server serves ServiceMonitors; without them it does nothing, and
// nothing fails. It reads the ServiceMonitor from the API server, as no
// cache watches a CustomResourceDefinition that may not exist: one GET per
// reconcile of a Memcached with monitoring, none for the others.
func (h *Handler) ensureServiceMonitor(m *v1alpha1.Memcached) *failure {
	if !memcached.Monitored(m) || !h.client.ServiceMonitorsServed() {
		return nil
	}
	want, err := memcached.NewServiceMonitor(m)
	if err != nil {
		return newFailure(memcached.ReasonServiceMonitorCreateFailed, "failed to build servicemonitor %s/%s: %v", m.Namespace, m.Name, err)
	}
	// get and read are both the API server's: a foreign ServiceMonitor
	// costs a second GET, as ensureExists confirms what a cache shows.
	gone := false
	s, created, f := ensureExists(m, serviceMonitorChild, h.client.ReadServiceMonitor, h.client.ReadServiceMonitor,
		func() (*unstructured.Unstructured, error) {
			s, err := h.client.CreateServiceMonitor(want)
			gone = apierrors.IsNotFound(err)
			return s, err
		})
	if gone {
		// The CRD went after discovery last said it was served: no error,
		// and the client asks discovery again on the next call.
		return nil
	}
	if f != nil {
		return f
	}
	if created {
		h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonServiceMonitorCreated, "Created servicemonitor %s for the metrics port of service %s", m.Name, m.Name)
		return nil
	}
	if !metav1.IsControlledBy(s, m) {
		return notOwned(m, serviceMonitorChild, s)
	}
	if holds(s.Object["spec"], want.Object["spec"]) {
		return nil
	}
	patch, err := memcached.JSONPatchSet(s.GetUID(), map[string]interface{}{"/spec": want.Object["spec"]})
	if err == nil {
		err = h.client.PatchServiceMonitor(s.GetNamespace(), s.GetName(), s.GetUID(), patch)
	}
	if err != nil {
		return newFailure(memcached.ReasonServiceMonitorUpdateFailed, "failed to restore servicemonitor %s/%s: %w", s.GetNamespace(), s.GetName(), err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonServiceMonitorUpdated, "Restored the spec of servicemonitor %s", s.GetName())
	return nil
}

// removeServiceMonitor deletes m's own ServiceMonitor, if it has one and
// ServiceMonitors are served. A ServiceMonitor of that name that is not
// m's is left alone. ensureService calls it before it takes the metrics
// port off a Service whose Memcached no longer has monitoring: that port
// marks the Memcacheds that may still have a ServiceMonitor, so that the
// others cost no request, and it stays until the ServiceMonitor is gone,
// across failures and restarts.
func (h *Handler) removeServiceMonitor(m *v1alpha1.Memcached) *failure {
	if !h.client.ServiceMonitorsServed() {
		return nil
	}
	s, err := h.client.ReadServiceMonitor(m.Namespace, m.Name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return newFailure(memcached.ReasonServiceMonitorReadFailed, "failed to get servicemonitor %s/%s: %v", m.Namespace, m.Name, err)
	}
	if !metav1.IsControlledBy(s, m) || s.GetDeletionTimestamp() != nil {
		return nil
	}
	if err := h.client.DeleteServiceMonitor(s.GetNamespace(), s.GetName(), s.GetUID()); err != nil {
		if isGone(err) {
			return nil
		}
		return newFailure(memcached.ReasonServiceMonitorDeleteFailed, "failed to delete servicemonitor %s/%s: %v", s.GetNamespace(), s.GetName(), err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonServiceMonitorDeleted, "Deleted servicemonitor %s: monitoring is off", s.GetName())
	return nil
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
