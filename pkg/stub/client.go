package stub

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Client is the narrow slice of the Kubernetes API that the reconcile uses.
// Memcached resources come from the SDK's events instead (see Handler).
//
// Every kind of child goes through the same calls, given its kube.Kind
// (see Kinds): Get reads what the client knows without asking the API server
// (NotFound means it has not seen the object; the caller must not modify
// what it returns), except for an Optional kind, which it reads from the API
// server; Read asks the API server; Create sends a manifest and returns the
// object as stored, trimmed as the cache's are; Patch sends a JSON patch
// (RFC 6902) that begins by testing that the object's UID is the given one
// (see memcached.JSONPatchSet) and returns an error wrapping
// kube.ErrReplaced when the object of that name has another UID or is gone;
// Delete deletes the object only while it still has the given UID. The
// objects are of the kind's type, which the steps get through typed.
//
// The Deployment is written by server-side apply instead (ApplyNew, Apply),
// so that the API server keeps the record of the fields the operator set
// from which a Get's Deployment carries memcached.ObservedDigestAnnotation
// (see memcached.OwnedDigest).
type Client interface {
	// UpdateMemcachedStatus writes m.Status through the status subresource
	// and returns the Memcached as the API server stored it.
	UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error)
	// MemcachedAPIServed returns nil when the API server serves the
	// Memcached API, or the error that says why not.
	MemcachedAPIServed() error

	Get(k *kube.Kind, namespace, name string) (kube.Object, error)
	Read(k *kube.Kind, namespace, name string) (kube.Object, error)
	Create(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error)
	Patch(k *kube.Kind, namespace, name string, uid types.UID, patch []byte) error
	// ApplyNew creates the object of manifest as Create does, by a
	// server-side apply, and fails as Create does when one of its name
	// exists already.
	ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error)
	// Apply sets what manifest holds, and takes back the fields others
	// changed, on the object of its name while its UID is uid, failing as
	// Patch does otherwise.
	Apply(k *kube.Kind, manifest *unstructured.Unstructured, uid types.UID) error
	// ConvertUpdates makes what an operator version without server-side
	// apply set on the object its apply's, while its UID is uid (see
	// kube.CachedClient.ConvertUpdates).
	ConvertUpdates(k *kube.Kind, namespace, name string, uid types.UID) error
	Delete(k *kube.Kind, namespace, name string, uid types.UID) error
	// Served reports whether the API server serves k's API: always for a
	// kind that is not Optional, else as discovery said at most
	// kube.DefaultServiceMonitorCheckInterval (or
	// --servicemonitor-check-interval) ago.
	Served(k *kube.Kind) bool

	// ListDeployments returns every Deployment the client knows of with
	// the app=memcached label, which the caller must not modify.
	ListDeployments() ([]*appsv1.Deployment, error)
	// ScaleDeployment sets spec.replicas of the named Deployment and nothing
	// else, while its UID is uid, as Patch does.
	ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error

	// ListPods returns the pods of the Memcached namespace/name, those with
	// its labels (memcached.Labels), which the caller must not modify.
	ListPods(namespace, name string) ([]*corev1.Pod, error)
	// MountFailure returns the message of the newest FailedMount Event
	// that the kubelet recorded on the pod of uid in namespace, or "" without one (see
	// kube.CachedClient.MountFailure): the kubelet's only word on a Secret
	// that is missing or lacks a key, which the operator may not read.
	MountFailure(namespace string, uid types.UID) string
}
