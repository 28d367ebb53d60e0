package stub

import (
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
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

// notOwned returns the failure of finding d, which another owner controls,
// where m's Deployment should be.
func notOwned(m *v1alpha1.Memcached, d *appsv1.Deployment) *failure {
	return newFailure(ReasonDeploymentNotOwned, "deployment %s/%s already exists and is not controlled by memcached %s", d.Namespace, d.Name, m.Name)
}
