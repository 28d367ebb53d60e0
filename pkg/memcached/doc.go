// Package memcached holds what a Memcached asks for, as pure functions of
// it: the children's desired objects (deployment.go, service.go, pdb.go,
// servicemonitor.go, prometheusrule.go, discovery.go, whose ConfigMap also
// depends on the pods the caches show and the version stored before), the
// spec's rules and defaults (spec.go, extraargs.go, security.go) and the
// bounds of the operator's policy flags (policy.go),
// the status it should have given what the caches show (status.go), and
// the reasons that conditions and Events give (reasons.go, and each child's
// beside its builder). It imports no
// client: nothing here reads the cluster, logs or keeps state, so that
// every rule is tested as a table of inputs and outputs, and package stub,
// which holds the handler, only decides when to apply them.
//
// # Children
//
// Every child is named after the Memcached, labelled by Labels
// and controlled by it. An object of that name that another owner controls
// is never changed: it is reported as NotOwned in Degraded and an Event.
//
// The Deployment rolls one pod at a time (maxSurge 1, maxUnavailable 0), so
// Ready pods never drop below spec.size. Whether its template is current is
// decided by a hash of the desired template (TemplateHashAnnotation, on every
// pod too), not by comparing templates, so that the caches need not hold pod
// templates and pods of an older template are told apart. Whether someone
// changed what the operator set is decided by the API server's own record of
// the fields the operator's server-side apply owns (OwnedDigest, owned.go),
// compared with the desired Deployment's (DesiredDigest). progressDeadlineSeconds is
// 300: the Deployment controller restarts that clock with every pod that
// becomes available, so it bounds one pod's start; Deployments of earlier
// versions get it by a patch of that field alone, which rolls nothing
// (TestSetsTheProgressDeadlineOfExistingDeployments). A pod being deleted keeps
// serving for 5 s (a preStop sleep, which needs no shell in the image) while it
// leaves the Service's endpoints.
//
// The Service is headless, so cluster DNS and its EndpointSlices give every
// Ready pod, which is how memcached clients find their servers. A Service
// someone gave a cluster IP is deleted and recreated, since a cluster IP
// cannot be removed. The budget (maxUnavailable 1) exists only while
// spec.size is above 1: at 0 or 1 it would protect nothing or block every
// drain.
//
// spec.tls and spec.auth name Secrets that the operator never reads
// (security.go): the pods mount each as a volume that lists the keys
// memcached reads and is not optional, so that the kubelet starts none of a
// pod's containers before the Secret holds them all, and no Secret value is
// in any environment (TestNoSecretInTheEnvironment). The kubelet tells a
// missing Secret or key only in a FailedMount Event on the pod, whose
// newest message per pod the operator's cache of those Events gives
// (Observation.MountFailures): the status reports it as Degraded=True
// FailedMount for a pod whose containers have not started
// (TestDegradedCondition; TestMissingSecretDegraded and
// TestRequiredTLSWithoutCADegraded on the real node). With spec.tls,
// spec.auth or spec.monitoring the pods run a sidecar (pkg/sidecar) that
// reloads certificates, makes memcached load a changed -Y file (the pods of
// a Memcached with auth share one process namespace for its SIGHUP), serves
// memcached's stats, and reports what it could not make memcached do,
// which the operator polls (package sidecarpoll) into the Degraded
// condition (SidecarFailure); a new --sidecar-image rolls with the fleet's
// pacing. The sidecar container runs a supervisor that restarts the worker
// doing all that, so that no failure of the sidecar makes the pod NotReady
// (sidecarContainer); a failing worker is reported the same way.
//
// # Status
//
// The status says which pods a Memcached has (status.nodes, sorted), how
// many are Ready, and three conditions: Available, Progressing and Degraded
// (ComputeStatus). The failing pod reported is the first by name, and the
// kubelet's back-off delays and restart counts are left out of messages, so
// a crash loop does not change the status on every restart.
//
// status.observedGeneration is the generation whose spec the Deployment
// runs, not the last one the operator saw: it stays behind while a spec is
// refused or cannot be applied (Observation.Behind). Each condition names
// the generation it describes, which kubectl wait checks: Available and
// Degraded the current one, Progressing the one acted on, so that
// `kubectl wait --for=condition=Progressing=false` never returns for a spec
// that nothing acts on.
//
// The spec is checked again (ValidateSpec, spec.go) with the same patterns
// and messages as the CRD's rules (TestCRDHasTheSameRules), for resources
// stored before the schema had them: an invalid spec is reported as
// InvalidSpec and nothing is created or changed. The allow-list of
// spec.extraArgs (extraargoptions.go) is where both come from: the
// conformance corpus is generated from it, and TestConformance (test/e2e)
// runs memcached 1.6.18 with each spec of the corpus to check that the API
// server and ValidateSpec refuse exactly what memcached does not serve
// with, beyond a few bounds of the operator's own.
package memcached
