package stub

import (
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reasons below name a reconcile step that failed. Each is the reason of
// the Warning Event recorded when the failure starts or changes and, except
// for ReasonStatusUpdateFailed, of the Degraded=True condition that stays on
// the Memcached until the step succeeds. Event and condition carry the same
// message: what the operator tried, then the API server's own message, such
// as a quota, RBAC, admission or validation refusal.
const (
	// ReasonDeploymentCreateFailed means the API server refused to create the
	// Memcached's Deployment or could not be reached.
	ReasonDeploymentCreateFailed = "DeploymentCreateFailed"
	// ReasonDeploymentScaleFailed means the API server refused to set the
	// Deployment's replicas to spec.size or could not be reached.
	ReasonDeploymentScaleFailed = "DeploymentScaleFailed"
	// ReasonDeploymentReadFailed means the Deployment could not be read, for
	// example because RBAC forbids it.
	ReasonDeploymentReadFailed = "DeploymentReadFailed"
	// ReasonDeploymentUpdateFailed means the API server refused to set the
	// Deployment's pod template to the one the spec asks for.
	ReasonDeploymentUpdateFailed = "DeploymentUpdateFailed"
	// ReasonServiceCreateFailed, ReasonServiceReadFailed and
	// ReasonServiceUpdateFailed are the same for the Memcached's headless
	// Service; an update restores its selector and ports.
	ReasonServiceCreateFailed = "ServiceCreateFailed"
	ReasonServiceReadFailed   = "ServiceReadFailed"
	ReasonServiceUpdateFailed = "ServiceUpdateFailed"
	// ReasonServiceNotOwned means a Service with the Memcached's name exists
	// but another owner controls it; the operator leaves it alone.
	ReasonServiceNotOwned = "ServiceNotOwned"
	// ReasonPodDisruptionBudgetCreateFailed and the three reasons after it
	// are the same for the Memcached's PodDisruptionBudget, which the
	// operator also deletes when spec.size drops to 1 or 0.
	ReasonPodDisruptionBudgetCreateFailed = "PodDisruptionBudgetCreateFailed"
	ReasonPodDisruptionBudgetReadFailed   = "PodDisruptionBudgetReadFailed"
	ReasonPodDisruptionBudgetUpdateFailed = "PodDisruptionBudgetUpdateFailed"
	ReasonPodDisruptionBudgetDeleteFailed = "PodDisruptionBudgetDeleteFailed"
	// ReasonPodDisruptionBudgetNotOwned means a PodDisruptionBudget with the
	// Memcached's name exists but another owner controls it.
	ReasonPodDisruptionBudgetNotOwned = "PodDisruptionBudgetNotOwned"
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
	// ReasonInvalidSpec means the spec asks for what memcached cannot run
	// with, such as extra arguments the operator does not allow, values
	// memcached exits on, a cache larger than the memory limit, or pod
	// fields the API server would refuse in the Deployment. The CRD's
	// schema refuses such specs;
	// this catches those stored before it did. Nothing is changed until the
	// spec is fixed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonPodListFailed means the Memcached's pods could not be listed from
	// the operator's cache; the status then keeps the pods it last reported.
	ReasonPodListFailed = "PodListFailed"
	// ReasonStatusUpdateFailed is the reason of the Warning Event recorded
	// when writing the Memcached's status fails. It has no condition: a
	// status that cannot be written cannot say so. The Event is recorded on
	// every failed write, and client-go's event correlator folds identical
	// ones into one Event whose count grows.
	ReasonStatusUpdateFailed = "StatusUpdateFailed"
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
}

// deploymentChild names the Deployment's failures.
var deploymentChild = childKind{
	kind:         "deployment",
	readFailed:   ReasonDeploymentReadFailed,
	createFailed: ReasonDeploymentCreateFailed,
	notOwned:     ReasonDeploymentNotOwned,
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
func ensureExists[T childObject](m *v1alpha1.Memcached, k childKind, get, read func(namespace, name string) (T, error), create func() (T, error)) (obj T, created bool, f *failure) {
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
		return obj, false, newFailure(k.createFailed, "failed to create %s %s/%s: %v", k.kind, m.Namespace, m.Name, err)
	}
	return obj, true, nil
}

// isGone reports whether err says that the object is gone, or was replaced
// by another of the same name, which a UID precondition refuses with a
// conflict.
func isGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
