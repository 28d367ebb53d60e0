// Package stub holds the memcached-operator's event handler: for every
// Memcached it keeps a memcached Deployment of spec.size pods running the
// pod template the spec asks for, a headless Service that lists them,
// with more than one pod a PodDisruptionBudget, with monitoring where
// the API is served a ServiceMonitor and, if asked for, a PrometheusRule
// with the alerts of its pods, with spec.networkPolicy a NetworkPolicy
// that admits to its pods only the peers it names and the operator
// (networkpolicy.go), and, with discovery, the ConfigMap of the
// membership that its pods serve to ElastiCache clients (discovery.go);
// and it reports the pods in
// status: their names, how many are Ready, and conditions that say whether
// they are available, still changing and, if something is wrong, why.
//
// # Shape
//
// main.go calls sdk.Watch on Memcached resources, sdk.Handle with a
// Handler and sdk.Run. Handle type-switches on the event and queues a
// reconcile (reconcile.go) that reads as a checklist: ensure the
// Deployment, check that it is ours, ensure its size and pod template, then
// ensure each of the other children in turn, and update the status. The
// steps read and write through Client, which package kube implements with
// informer caches; pure builders, spec and status rules are package
// memcached's.
//
// Every child after the Deployment has one shape: an ownedChild (child.go),
// a value whose fields are all that tell it from the others (its
// kube.Kind, its builder, what it compares and restores, its reasons and
// Events), run by one generic step that creates it, leaves another owner's
// alone and restores what someone changed. service.go, pdb.go,
// networkpolicy.go, servicemonitor.go, prometheusrule.go and discovery.go
// each declare one;
// Kinds gives their kube.Kinds to kube.NewCachedClient, which serves any
// Kind by the same calls.
//
// # Where to add
//
// A new child, as the NetworkPolicy came: its pure builder and the reasons
// of its failures in package memcached (networkpolicy.go, as service.go has
// the Service's); its ownedChild, with its kube.Kind, in a file here
// (networkpolicy.go, as service.go); and one line in the list of children
// (child.go). Package kube and the generic step need no change
// (TestANewChildIsOneDeclaration, TestCachedClientServesANewChild); the
// operator's Role does, for a resource it does not grant yet
// (deploy/rbac.yaml, then make olm-catalog). A new
// condition, or a new rule of an existing one: in package memcached's
// status.go alone (ComputeStatus and its reasons), with its type in
// pkg/apis/cache/v1alpha1; the steps here only pass on what they saw.
//
// # What the v0.0.x SDK gets wrong on today's clusters, and what this does
//
//   - Resync in nanoseconds: sdk.Watch(..., 5) means 5 ns. main takes the
//     resync as a time.Duration flag that refuses anything below a second.
//   - 5 requests per second: the SDK's client has client-go 1.11's default
//     limits. The reconcile reads and writes through package kube's
//     CachedClient instead, with limits of its own.
//   - Status through the subresource: with the CRD's status subresource,
//     sdk.Update cannot change status (operator-sdk #643). Status is written
//     with a PUT to the status subresource, through a REST client of its own
//     for the Memcached API, and only when it differs.
//   - Old types, new API: client-go 1.11's structs lack every pod field added
//     since 2018, so a Deployment is never PUT. It is created and its pod
//     template set by server-side applies of JSON rendered from its manifest
//     (memcached.DeploymentManifest), which is how its pods get a
//     RuntimeDefault seccomp profile, and which makes the API server keep
//     the record of the fields the operator set that tells a hand edit
//     (restoreDeployment); spec.replicas alone is patched to scale, so
//     scaling never rolls a pod. Every write of a child is bound to the
//     UID the cache shows (memcached.JSONPatchSet's test, an apply's
//     metadata.uid), so a child deleted and created anew within the cache's
//     lag is never changed by mistake; the refusal (kube.ErrReplaced) is
//     retried quietly, like a stale write (TestNeverPatchesAReplacedChild).
//   - One watch on Memcached, several workers: Handle does not reconcile in
//     the SDK's single worker. It keeps the event's Memcached in a store and
//     queues its key in the handler's own rate-limited work queue, from
//     which --workers goroutines reconcile; client-go's work queue never
//     hands one key to two workers. The SDK's informer is the only watch on
//     Memcached: a status write replaces the stored version with the one the
//     API server returned (unless the SDK has delivered a newer one), so the
//     next reconcile does not write from a stale resourceVersion. Failures
//     are retried by the handler's queue (5 ms doubling, up to maxBackoff,
//     for as long as they fail), so the SDK's own retries, which give up
//     after 15, never run. The update event of the operator's
//     own status write is no news, so a failure whose message changes on
//     every attempt still keeps to that backoff
//     (TestBackoffHoldsAgainstOwnStatusWrites).
//   - Children's changes, reads without requests, the CRD going away:
//     package kube's CachedClient reads informer caches of its own and
//     queues a Memcached when one of its children or pods changes, and its
//     APIMonitor logs when the Memcached API goes and comes back.
//   - Deletes: a delete event only drops the Memcached from the store and
//     starts the APIMonitor's check; owner references let the garbage
//     collector remove the children.
//   - Requests that hang: main gives the reconcile's clients
//     --kube-api-timeout (see package kube), so a request left unanswered
//     fails and its Memcached is retried instead of holding a worker.
//
// # Served namespaces
//
// The SDK delivers every Memcached of the watched namespaces, and Handle
// keeps each one; with --namespace-selector, main gives the handler a
// predicate (ServeNamespaces, from kube.NamespaceCache) that reconcileKey
// asks before anything else, so that a Memcached of a namespace outside the
// selector is never reconciled, whatever queued it: no child, no status, no
// Event, no deletion. A namespace that becomes served queues its known
// Memcacheds at once (EnqueueNamespace); one that stops being served keeps
// what was made and written for them (TestLeavesUnservedNamespaceAlone).
//
// # Fleet rolls
//
// A change on the operator's side (a new default image, an operator whose
// template differs) changes the template of many Memcacheds at once. rolls.go
// paces those: the spec-hash annotation records the spec each template was
// built from (without spec.size), so a template that differs while the
// spec does not is the operator's change, and waits for one of
// --max-concurrent-rolls slots (RollPending). The rolls in flight are
// counted from the Deployment cache (templates marked paced-roll with pods
// of an older template left), so a restart or a new leader keeps the
// count; an index of it, filled in one pass and then kept by each
// reconcile, makes each slot decision cost the same at any number of
// Memcacheds (TestSlotDecisionsReadTheDeploymentCacheOnce). A roll the resource's own spec asks for, and a new resource, never
// wait (TestPacesAFleetRoll, TestCountsRollsInFlightFromTheCaches,
// TestAStuckPacedRollHoldsItsSlot,
// TestSpecChangesAndNewMemcachedsDoNotWaitForTheFleet).
//
// Before it asks for a slot, such a roll waits for the Memcached's
// maintenance window, spec.maintenanceWindow or --maintenance-window
// (window.go): outside it the status says WaitingForMaintenanceWindow with
// the next opening, and the Memcached is queued for that instant
// (TestAnOperatorChangeWaitsForTheWindow). A roll that started finishes
// after the window closes.
//
// # Status writes
//
// Status is computed, compared with the stored one, and written only when it
// differs. While the pods are only progressing (Progressing True, nothing
// Degraded), it is written at most once per --progress-status-interval, counted
// from the previous write or the Deployment's creation (progress.go), since
// each write costs the API server a validation and an etcd write and every
// Memcached watcher an event. A status that says more is written at once: the
// end of the progress, a failure, a new observedGeneration, any condition
// whose status changes (TestProgressOnly, TestNewMemcachedGetsOneStatusWrite),
// and the start of a roll. A roll's first status, Progressing True
// RollingUpdate, is never held: it says that pods are being replaced from now
// on, and a status that went on saying Complete or RollPending while they are
// would be wrong, not merely late; so every roll, however fast, shows in the
// status and to a watch of it. A roll the spec asks for starts with a new
// observedGeneration anyway; a paced roll that gets its slot costs one write
// more, once per roll (rollStarts, TestARollStartIsWrittenAtOnce). The steps
// of a roll after its start are held like any progress.
// The failing pod reported is the first by name, and the kubelet's back-off
// delays and restart counts are left out of messages, so a crash loop does not
// cost a write per restart. A Warning Event goes with a Degraded condition when
// that condition is first written, not on every retry (failure.go). The status
// itself, and how the spec is checked, are package memcached's.
//
// # What the sidecars report
//
// What a pod's sidecar could not make memcached do (a certificate refresh, a
// reload of the -Y file), and the sidecar's own failures (its worker exits and
// is restarted, while the container keeps running), are invisible to the
// kubelet and the pod stays Ready.
// main.go starts a sidecarpoll.Poller, which asks the sidecars of the pods
// that PolledPods names, those of served Memcacheds' own ReplicaSets
// (TestPolledPodsAreThoseOfServedMemcacheds), over the pod network, and
// queues a Memcached when a report of one of its pods changes;
// the handler reads the reports (ReadSidecarReports) into the Degraded
// condition and records a Warning Event when it is first written, with no
// retry, since no step failed (TestReportsSidecarProblems). Why a poll, and
// not a probe or the sidecar's container state, is in package sidecarpoll.
//
// # What the kubelet reports in Events alone
//
// A Secret of spec.tls or spec.auth that is missing or lacks a key keeps
// the kubelet from mounting it, and the pod's status shows only containers
// waiting in ContainerCreating. The reconcile reads the message of each
// pod's newest FailedMount Event from the client (Client.MountFailure,
// package kube's cache of those Events, which queues the pod's Memcached
// when one changes) into memcached.Observation.MountFailures, which the
// Degraded condition reports like any pod failure, with no Event of the
// operator's: the kubelet's is there (TestReportsASecretTheKubeletCannotMount).
package stub
