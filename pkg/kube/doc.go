// Package kube holds the operator's API clients: CachedClient, which the
// handler in package stub reads and writes a Memcached's children through,
// the informers that fill its caches, and the APIMonitor, which says in the
// log when the Memcached API goes and comes back. NewClients builds the REST
// clients they need from the operator's configuration.
//
// # One client for every kind of child
//
// A Kind describes a kind of child: its resource, its type, how its cached
// objects are trimmed, which of their updates need a reconcile, and whether
// its API may come and go. NewCachedClient builds, for each Kind it is
// given, a REST client for the kind's group version, an informer and the
// memory of created objects (children.go), and serves every kind by the
// same calls: Get, Read, Create, Patch and Delete. A new kind of child
// needs no code here. Only the Deployment has calls of its own
// (ListDeployments, ScaleDeployment), for the handler's fleet rolls and
// sizes.
//
// # The kubelet's word on Secrets
//
// The operator may not read Secrets. A pod whose Secret of spec.tls or
// spec.auth is missing or lacks a key shows only containers waiting in
// ContainerCreating; the kubelet says why in a Warning Event FailedMount on
// the pod. events.go caches those Events alone, selected by the API server
// by field (involvedObject.kind=Pod,reason=FailedMount) and trimmed, indexed
// by pod UID; MountFailure gives the newest one's message, and a change of
// one queues the pod's Memcached (TestMountEventsSelectTheKubeletsFailedMounts,
// TestNewestEvent, TestMountEventEnqueuesThePodsMemcached).
//
// # Reads without requests
//
// The SDK's client sends every read to the API server, at client-go 1.11's
// default 5 requests per second. CachedClient reads informer caches
// instead, so a reconcile that changes nothing sends no request (but one
// GET of its ServiceMonitor and one of its PrometheusRule with monitoring:
// no cache watches a CRD that may come and go), and writes through clients with the operator's
// own limits (--kube-api-qps, --kube-api-burst).
//
// # Scopes
//
// A Scope is the namespaces the operator serves (ParseScope reads
// WATCH_NAMESPACE): for every namespace, each kind has one informer across
// the cluster; for a list, one informer per listed namespace, so that the
// operator never lists across namespaces and a Role in each is all the RBAC
// it needs (scoped; TestCachedClientListsEachNamespaceOfItsScope,
// TestCachedClientServesTwoNamespaces).
//
// With every namespace, NamespaceCache narrows the Scope to the namespaces
// whose labels match --namespace-selector: one informer lists and watches
// those namespaces alone, across the cluster, gives the handler its
// predicate (Serves) and reports each namespace that becomes served
// (OnServed), so that its Memcacheds are reconciled at once
// (TestNamespaceCacheServes, TestNamespaceCacheReportsNamespacesThatBecomeServed,
// TestNamespaceCacheListsTheSelectedNamespaces).
//
// # Children's changes
//
// The SDK's informers are private, so informers.go runs informers of its
// own for each Kind that is not Optional and for the pods labelled
// app=memcached. The types client-go 1.11 knows travel as protobuf; the
// others as JSON decoded into the Kind's type: PodDisruptionBudgets, whose
// policy/v1beta1 Kubernetes 1.25 removed, travel as policy/v1 JSON decoded
// into the 1.11 types, whose fields used here have the same names, and
// ServiceMonitors as unstructured JSON. Deployments travel as JSON too,
// for the managed fields and pod fields that the 1.11 types cannot hold:
// their digest (memcached.OwnedDigest) is derived from the parts it reads
// and carried over from the cached copy while those are unchanged, so that
// a status write of the Deployment controller costs its decoding by
// json-iterator and no digest (TestObserveCarriesOverOnlyWhileItsInputsHold,
// TestDecodeJSONAgreesWithTheWholeObject). Every cache lists page by page,
// each page trimmed before the next (TestTrimmedListPagesAtTheLatestVersion).
// The caches hold trimmed copies (a
// pod keeps only what the status reads; a Deployment, only its template's
// hash and roll annotations and the conditions that say it is stuck), and
// pods are indexed by Memcached, so a reconcile costs the same with ten
// resources or a thousand. A child's change queues its Memcached
// (OnChildChange), which the handler batches over
// --child-updates-batch-period, as the Endpoints controllers batch pod
// updates, so that a pod's start costs one status write; a pod update that
// changes nothing the status reads queues nothing
// (TestTrimmedPodsGiveTheSameStatus, TestDeploymentChanged).
//
// # No read after a create
//
// A child the cache has not shown yet is created at once and the created
// object kept until the cache shows it; only a create that finds the name
// taken reads the API server, to see whose the object is, so a child of an
// earlier resource of the same name that the cache still shows does not
// stand in the way (TestPhantomChildIsCreatedAnew in package stub,
// TestCachedClientForgetsAChildTheCacheSawGo). Every patch tests the
// child's UID first, and a patch refused because the child was replaced
// returns ErrReplaced.
//
// # Requests that hang
//
// The reconcile's clients should have a request timeout (main gives them
// --kube-api-timeout), so that a request left unanswered fails and its
// Memcached is retried instead of holding a worker; the informers list and
// watch through twin clients without it (Clients), since client-go 1.11
// would cut every watch at that timeout too.
//
// # The CRD going away
//
// With no informer of its own on Memcached, the APIMonitor learns that the
// Memcached API is gone by asking discovery, every apiCheckInterval, only
// after Memcached deletions and until apiCheckGrace after the last one
// (deleting a CRD deletes every Memcached first).
package kube
