package stub

import (
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failure is a reconcile step that did not happen. The reconcile reports it
// on the Memcached, as a Warning Event and a Degraded=True condition with
// reason and the error's text, and returns it, so that the SDK logs it and
// retries with backoff.
type failure struct {
	// reason is the Event's and the Degraded condition's reason.
	reason string
	// err says what failed, for the Memcached's user and for the log.
	err error
}

func (f *failure) Error() string { return f.err.Error() }

func (f *failure) Unwrap() error { return f.err }

// newFailure returns a failure with reason and the error built from format
// and args, as fmt.Errorf builds it.
func newFailure(reason, format string, args ...interface{}) *failure {
	return &failure{reason: reason, err: fmt.Errorf(format, args...)}
}

// childKind names one kind of child of a Memcached and the reasons of its
// failures.
type childKind struct {
	// kind is the child's kind as messages name it, in lower case.
	kind                               string
	readFailed, createFailed, notOwned string
	// updateFailed and deleteFailed are the reasons of failed restores
	// and deletions, which the Deployment's steps name themselves.
	updateFailed, deleteFailed string
}

// deploymentChild names the Deployment's failures.
var deploymentChild = childKind{
	kind:         "deployment",
	readFailed:   memcached.ReasonDeploymentReadFailed,
	createFailed: memcached.ReasonDeploymentCreateFailed,
	notOwned:     memcached.ReasonDeploymentNotOwned,
}

// notOwned returns the failure of finding obj, which another owner
// controls, where m's child of kind k should be.
func notOwned(m *v1alpha1.Memcached, k childKind, obj metav1.Object) *failure {
	return newFailure(k.notOwned, "%s %s/%s already exists and is not controlled by memcached %s", k.kind, obj.GetNamespace(), obj.GetName(), m.Name)
}

// ensureExists returns m's child of kind k, named after m, from get,
// creating it with create when get has none, and reports whether it created
// it. Only a create that finds the name taken costs a read from the API
// server: the object there may be one the cache leaves out, such as
// someone else's without the app=memcached label. An object from get that m
// does not control is read again from the API server before the caller
// reports it as another owner's: the cache may still show, or the client
// may still remember having created, the child of an earlier Memcached of
// the same name that is gone with it.
func ensureExists[T kube.Object](m *v1alpha1.Memcached, k childKind, get, read func(namespace, name string) (T, error), create func() (T, error)) (obj T, created bool, f *failure) {
	obj, err := get(m.Namespace, m.Name)
	if err == nil && !metav1.IsControlledBy(obj, m) {
		obj, err = read(m.Namespace, m.Name)
	}
	if err == nil {
		return obj, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return obj, false, newFailure(k.readFailed, "failed to get %s %s/%s: %v", k.kind, m.Namespace, m.Name, err)
	}
	obj, err = create()
	if apierrors.IsAlreadyExists(err) {
		if obj, err = read(m.Namespace, m.Name); err != nil {
			return obj, false, newFailure(k.readFailed, "failed to get %s %s/%s: %v", k.kind, m.Namespace, m.Name, err)
		}
		return obj, false, nil
	}
	if err != nil {
		return obj, false, newFailure(k.createFailed, "failed to create %s %s/%s: %w", k.kind, m.Namespace, m.Name, err)
	}
	return obj, true, nil
}

// isGone reports whether err says that the object is gone, or was replaced
// by another of the same name, which a UID precondition refuses with a
// conflict.
func isGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
