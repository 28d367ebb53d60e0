package stub

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Client is the narrow slice of the Kubernetes API that the reconcile uses.
// Memcached resources come from the SDK's events instead (see Handler).
//
// For each kind of child, Get reads what the client knows without asking the
// API server (NotFound means it has not seen the object; the caller must not
// modify what it returns), Read asks the API server, Create sends a manifest
// and returns the object as stored, trimmed as the cache's are, Patch sends a
// JSON patch (RFC 6902) that begins by testing that the object's UID is the
// given one (see memcached.JSONPatchSet) and returns an error wrapping
// kube.ErrReplaced when the object of that name has another UID or is gone, and
// Delete deletes the object only while it still has the given UID.
type Client interface {
	// UpdateMemcachedStatus writes m.Status through the status subresource
	// and returns the Memcached as the API server stored it.
	UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error)
	// MemcachedAPIServed returns nil when the API server serves the
	// Memcached API, or the error that says why not.
	MemcachedAPIServed() error

	GetDeployment(namespace, name string) (*appsv1.Deployment, error)
	// ListDeployments returns every Deployment the client knows of with
	// the app=memcached label, which the caller must not modify.
	ListDeployments() ([]*appsv1.Deployment, error)
	ReadDeployment(namespace, name string) (*appsv1.Deployment, error)
	CreateDeployment(manifest *unstructured.Unstructured) (*appsv1.Deployment, error)
	PatchDeployment(namespace, name string, uid types.UID, patch []byte) error
	// ScaleDeployment sets spec.replicas of the named Deployment and nothing
	// else, while its UID is uid, as Patch does.
	ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error

	GetService(namespace, name string) (*corev1.Service, error)
	ReadService(namespace, name string) (*corev1.Service, error)
	CreateService(manifest *unstructured.Unstructured) (*corev1.Service, error)
	PatchService(namespace, name string, uid types.UID, patch []byte) error
	DeleteService(namespace, name string, uid types.UID) error

	GetPodDisruptionBudget(namespace, name string) (*policyv1beta1.PodDisruptionBudget, error)
	ReadPodDisruptionBudget(namespace, name string) (*policyv1beta1.PodDisruptionBudget, error)
	CreatePodDisruptionBudget(manifest *unstructured.Unstructured) (*policyv1beta1.PodDisruptionBudget, error)
	PatchPodDisruptionBudget(namespace, name string, uid types.UID, patch []byte) error
	DeletePodDisruptionBudget(namespace, name string, uid types.UID) error

	// ServiceMonitorsServed reports whether the API server serves the
	// Prometheus Operator's ServiceMonitors, as discovery said at most
	// kube.DefaultServiceMonitorCheckInterval (or
	// --servicemonitor-check-interval) ago. The ServiceMonitor calls below go
	// to the API server; no cache holds ServiceMonitors.
	ServiceMonitorsServed() bool
	ReadServiceMonitor(namespace, name string) (*unstructured.Unstructured, error)
	CreateServiceMonitor(manifest *unstructured.Unstructured) (*unstructured.Unstructured, error)
	PatchServiceMonitor(namespace, name string, uid types.UID, patch []byte) error
	DeleteServiceMonitor(namespace, name string, uid types.UID) error

	// ListPods returns the pods of the Memcached namespace/name, those with
	// its labels (memcached.Labels), which the caller must not modify.
	ListPods(namespace, name string) ([]*corev1.Pod, error)
}
