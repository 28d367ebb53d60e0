package memcached

// The reasons below name a reconcile step that failed. Each is the reason of
// the Warning Event recorded when the failure starts or changes and, except
// for ReasonStatusUpdateFailed, of the Degraded=True condition that stays on
// the Memcached until the step succeeds. Event and condition carry the same
// message: what the operator tried, then the API server's own message, such
// as a quota, RBAC, admission or validation refusal. Each child's own are
// declared beside its builder (service.go, pdb.go, servicemonitor.go).
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
