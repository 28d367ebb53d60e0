package stub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// DefaultImage is the memcached image of Memcacheds without spec.image
// unless --memcached-image or MEMCACHED_IMAGE say otherwise. A change of it
// rolls them all, paced (see rolls.go).
const DefaultImage = "memcached:1.6-alpine"

// maxBackoff is the longest that a failing reconcile of one Memcached waits
// for its next attempt. The handler's queue retries a failing Memcached for
// as long as it fails, never dropping it as the SDK's own queue does after
// 15 retries: with a resync of 0, or an outage longer than the backoff's
// first minutes, a dropped Memcached would wait for its next change.
const maxBackoff = 5 * time.Minute

// newRateLimiter is client-go's DefaultControllerRateLimiter with its
// per-item backoff capped at maxBackoff instead of 1000 s: 5ms doubling per
// failure of one Memcached, under an overall limit of 10 retries/s (bursts
// of 100).
func newRateLimiter() workqueue.RateLimiter {
	return workqueue.NewMaxOfRateLimiter(
		workqueue.NewItemExponentialFailureRateLimiter(5*time.Millisecond, maxBackoff),
		&workqueue.BucketRateLimiter{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// queueName names the handler's work queue in the operator's metrics.
const queueName = "memcached-reconcile"

// newQueue returns a work queue for the handler's keys.
func newQueue() workqueue.RateLimitingInterface {
	return workqueue.NewNamedRateLimitingQueue(newRateLimiter(), queueName)
}

// Handler reconciles Memcached resources. The SDK delivers every change of a
// Memcached to Handle, which keeps the Memcached and queues its key; a change
// of one of its Deployment or pods queues the key through EnqueueMemcached.
// Run's workers take the keys from that one queue, so reconciles of
// different Memcached resources overlap their round trips to the API server,
// while client-go's work queue never hands one key to two workers at once.
//
// A reconcile that fails is reported on the Memcached (a Warning Event and a
// Degraded=True condition, see failure.go) and retried with backoff, for as
// long as it fails (see newRateLimiter): the n-th retry of one Memcached
// waits 5ms*2^(n-1), that is 5ms, 10ms, 20ms ... 41s, 82s, 164s, then
// maxBackoff (5 minutes) between retries, under an overall limit of 10
// retries/s (bursts of 100). A Memcached that the API server keeps refusing,
// for a quota, RBAC, an admission policy or an invalid object alike, thus
// costs 17 attempts in its first 5.5 minutes, most of them in its first
// seconds, then one every 5 minutes, plus one per change to it: changes are
// handled at once but do not reset the backoff. The update event of the operator's own status write is
// no change (see memcachedStore.store), so a failure whose message differs
// on every attempt, such as a webhook's connection error, which every
// attempt writes, still waits for its backoff.
type Handler struct {
	client   Client
	recorder record.EventRecorder
	image    string
	// sidecarImage runs beside memcached when a Memcached has TLS, auth or monitoring.
	sidecarImage string
	now          func() metav1.Time
	// queueMu guards queue, which Run replaces at its start.
	queueMu sync.RWMutex
	// queue is the work queue of the current or last Run: once that
	// Run has returned it is shut down and takes nothing until the next.
	queue      workqueue.RateLimitingInterface
	memcacheds *memcachedStore
	templates  *templateHashes
	// written is the membership last written into each discovery ConfigMap.
	written  *writtenClusters
	progress *progressReports
	rolls    *rollPacer
	// window, if set, is the maintenance window of Memcacheds without
	// their own (see window.go).
	window *memcached.Window
	api    *kube.APIMonitor
	// batch delays the reconciles that children's changes ask for.
	batch time.Duration
	// policy bounds what a Memcached may ask of its pods.
	policy memcached.Policy
	// observe, if set, is told the outcome of every reconcile.
	observe ReconcileObserver
	// sidecars, if set, tells what the pods' sidecars last reported.
	sidecars SidecarReports
	// serves, if set, tells whether the handler may act in a namespace.
	serves func(namespace string) bool
	// networkPolicies are the operator's settings of every Memcached's
	// NetworkPolicy.
	networkPolicies memcached.NetworkPolicyOptions
}

// SidecarReports tells what the sidecars of pods last reported they could
// not make memcached do (see package sidecarpoll, which asks them). Run's
// workers call it concurrently.
type SidecarReports interface {
	// Problems returns the problems of pods, sorted by pod name.
	Problems(pods []*corev1.Pod) []memcached.SidecarProblem
}

// ReadSidecarReports makes the status of every Memcached report what its
// pods' sidecars reported to r: Degraded=True naming the pod with the
// sidecar's reason and message, and a Warning Event when that condition is
// first written. The caller queues a Memcached (EnqueueMemcached) when
// a report of one of its pods changes. Call it before h handles any event.
func (h *Handler) ReadSidecarReports(r SidecarReports) {
	h.sidecars = r
}

// ReconcileObserver is told how each reconcile ended: how long it took and
// its error, nil on success (see IsStale for errors that are no failure).
// It lets the operator count reconciles for its metrics while the handler
// knows nothing of who listens. Run's workers call it concurrently, so it
// must be safe for that, quick, and must not call the handler.
type ReconcileObserver func(took time.Duration, err error)

// ObserveReconciles makes h call observe after every reconcile. Call it
// before h handles any event.
func (h *Handler) ObserveReconciles(observe ReconcileObserver) {
	h.observe = observe
}

// IsStale reports whether err, returned by a reconcile, only says that a
// write lost a race with a newer version of the object, or with a child's
// replacement (kube.ErrReplaced) or change (kube.ErrChanged), or was not sent because this process may
// not write now (ErrWritesStopped): nothing failed, and the reconcile runs
// again on the newer version, or once it may write.
func IsStale(err error) bool {
	return errors.Is(err, errStale) || errors.Is(err, kube.ErrReplaced) || errors.Is(err, kube.ErrChanged) || errors.Is(err, ErrWritesStopped)
}

// NewHandler returns a Handler that reads and writes through client, records
// Events with recorder and runs image in new memcached Deployments.
func NewHandler(client Client, recorder record.EventRecorder, image string) *Handler {
	return &Handler{
		client:       client,
		recorder:     recorder,
		image:        image,
		sidecarImage: memcached.DefaultSidecarImage,
		now:          metav1.Now,
		queue:        newQueue(),
		memcacheds:   newMemcachedStore(),
		templates:    newTemplateHashes(),
		written:      newWrittenClusters(),
		progress:     newProgressReports(0),
		rolls:        newRollPacer(intstr.Parse(DefaultMaxConcurrentRolls)),
		api:          kube.NewAPIMonitor(client.MemcachedAPIServed),
	}
}

// UseSidecarImage makes h run image as the sidecar of memcached pods with
// TLS, auth or monitoring, instead of memcached.DefaultSidecarImage. Call it before h
// handles any event.
func (h *Handler) UseSidecarImage(image string) {
	h.sidecarImage = image
}

// AdmitToNetworkPolicies makes the NetworkPolicies of Memcacheds with
// spec.networkPolicy admit what o says: the operator's own pods to the
// sidecars' port, and the default monitoring namespaces to the metrics
// port. Without it they admit neither. Call it before h handles any event.
func (h *Handler) AdmitToNetworkPolicies(o memcached.NetworkPolicyOptions) {
	h.networkPolicies = o
}

// Handle takes an SDK event: it keeps the event's Memcached as the latest
// known and queues it for Run's workers. It never fails, so the SDK's own
// retries never run; the handler's queue retries instead.
func (h *Handler) Handle(ctx context.Context, event sdk.Event) error {
	switch o := event.Object.(type) {
	case *v1alpha1.Memcached:
		k := o.Namespace + "/" + o.Name
		if event.Deleted {
			// The Deployment has a controller owner reference to the
			// Memcached, so the garbage collector removes it and its pods.
			h.memcacheds.delete(k)
			h.templates.delete(k)
			h.written.delete(k)
			h.progress.forget(k)
			h.forgetRoll(k)
			h.api.MemcachedDeleted(ctx)
			return nil
		}
		if h.memcacheds.store(k, o) {
			h.work().Add(k)
		}
	}
	return nil
}

// EnqueueMemcached asks Run's workers to reconcile the Memcached
// namespace/name after the batch period (see BatchChildUpdates); the
// requests for one Memcached within it collapse into one reconcile.
func (h *Handler) EnqueueMemcached(namespace, name string) {
	h.enqueueBatched(namespace + "/" + name)
}

// BatchChildUpdates sets how long a reconcile that a child's change asks for
// waits, so that the changes of a Memcached's pods within that period, which
// come in bursts as pods are created, scheduled, started and become Ready,
// cost one reconcile and one status write instead of one each, as the
// Endpoints and EndpointSlice controllers batch pod updates. The price is
// that much delay in status.nodes. Call it before h handles any event.
func (h *Handler) BatchChildUpdates(period time.Duration) {
	h.batch = period
}

// ServeNamespaces makes h reconcile only the Memcacheds of the namespaces
// that serves reports true for, such as those that --namespace-selector
// matches (see kube.NamespaceCache): a Memcached elsewhere gets nothing
// from h, no child, no status, no Event, no deletion, however often it is
// queued. h still keeps it as the latest known, so that EnqueueNamespace
// finds it when its namespace becomes served. Call it before h handles any
// event.
func (h *Handler) ServeNamespaces(serves func(namespace string) bool) {
	h.serves = serves
}

// EnqueueNamespace asks Run's workers to reconcile, at once, every known
// Memcached of namespace: the caller's word that the namespace has just
// become served (see ServeNamespaces).
func (h *Handler) EnqueueNamespace(namespace string) {
	q := h.work()
	for _, key := range h.memcacheds.keysIn(namespace) {
		q.Add(key)
	}
}

// EnforcePolicy makes h refuse every Memcached outside p, with Degraded=True
// and a Warning Event of reason memcached.ReasonPolicyViolation, and leave its
// Deployment as it is, or uncreated. Call it before h handles any event.
func (h *Handler) EnforcePolicy(p memcached.Policy) {
	h.policy = p
}

// ReportProgressEvery makes h write the status of a Memcached whose pods are
// still starting, scaling or rolling at most once per interval, counted from
// its previous status write or the creation of its Deployment; the start
// of a roll, the end of the progress, failures and new generations are
// written at once (see progressReports). 0, the default, writes every
// change. Call it before h handles any event.
func (h *Handler) ReportProgressEvery(interval time.Duration) {
	h.progress = newProgressReports(interval)
}

// enqueueBatched queues key after the batch period.
func (h *Handler) enqueueBatched(key string) {
	if h.batch <= 0 {
		h.work().Add(key)
		return
	}
	h.work().AddAfter(key, h.batch)
}

// Run reconciles what Handle and EnqueueMemcached queue, with workers
// goroutines, until ctx is done. It returns once every worker has finished
// the reconcile it was in, so that a leader hands its Lease over, or stands
// by, only after its last write; a worker takes no new key once ctx is done.
//
// Run may be called again once it has returned, as for each term of a
// leader (never two at once). Each call works a queue of its own, with no
// backoff from an earlier one, and starts it with every Memcached the SDK
// has delivered: between two calls, Handle and EnqueueMemcached keep the
// latest Memcacheds but queue nothing (before the first, they queue into a
// queue that it replaces), and a new leader reconciles them all.
func (h *Handler) Run(ctx context.Context, workers int) {
	q := newQueue()
	h.queueMu.Lock()
	old := h.queue
	h.queue = q
	h.queueMu.Unlock()
	shutDown(old)
	// After the new queue is in place, so that a Memcached that the SDK
	// delivers meanwhile is queued by Handle or found here.
	for _, key := range h.memcacheds.keys() {
		q.Add(key)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.Until(func() {
				for ctx.Err() == nil && h.processNextItem(q) {
				}
			}, time.Second, ctx.Done())
		}()
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	shutDown(q)
}

// shutDown shuts q down, unless it is already, and takes out what it still
// holds, so that the queue depth of the operator's metrics counts none of
// it. No worker may be taking from q.
func shutDown(q workqueue.RateLimitingInterface) {
	if !q.ShuttingDown() {
		q.ShutDown()
	}
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		q.Done(item)
	}
}

// work returns the queue of the current or last Run.
func (h *Handler) work() workqueue.RateLimitingInterface {
	h.queueMu.RLock()
	defer h.queueMu.RUnlock()
	return h.queue
}

// processNextItem reconciles one Memcached queued in q and requeues it
// with backoff on failure. It returns false when q is shut down.
func (h *Handler) processNextItem(q workqueue.RateLimitingInterface) bool {
	item, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(item)
	key := item.(string)
	h.handleResult(q, key, h.reconcileKey(key))
	return true
}

// handleResult forgets key's failures in q after a success and requeues it
// with backoff after a failure, however many came before (see
// newRateLimiter).
func (h *Handler) handleResult(q workqueue.RateLimitingInterface, key string, err error) {
	switch {
	case err == nil:
		q.Forget(key)
	case IsStale(err):
		logrus.Debugf("retrying memcached %s: %v", key, err)
		q.AddRateLimited(key)
	default:
		logrus.Errorf("error syncing memcached %s: %v", key, err)
		q.AddRateLimited(key)
	}
}

// reconcileKey reconciles the Memcached with the namespace/name key, as the
// SDK last delivered it, if its namespace is served (see ServeNamespaces).
func (h *Handler) reconcileKey(key string) error {
	m, ok := h.memcacheds.get(key)
	if !ok {
		// No Memcached of that name: nothing here is ours to manage, but
		// a Deployment of its name may still count for the pacing.
		namespace, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return err
		}
		d, err := typed[*appsv1.Deployment]{h.client, kube.DeploymentKind}.get(namespace, name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		h.observeRoll(key, d)
		return nil
	}
	if h.serves != nil && !h.serves(m.Namespace) {
		// Not ours to touch: what an earlier reconcile made stays as it
		// is, and counts no more for the pacing.
		h.observeRoll(key, nil)
		return nil
	}
	return h.reconcile(m)
}

// memcachedStore holds the latest version of every Memcached that the SDK
// delivered, by namespace/name. It is the handler's only view of Memcached
// resources: the SDK's informer is the one watch on them.
type memcachedStore struct {
	mu    sync.RWMutex
	items map[string]*v1alpha1.Memcached
	// written holds, by namespace/name, the resourceVersion of the
	// operator's own last status write, until the SDK delivers the next
	// version.
	written map[string]string
}

func newMemcachedStore() *memcachedStore {
	return &memcachedStore{items: map[string]*v1alpha1.Memcached{}, written: map[string]string{}}
}

// store keeps m, which the SDK made for this event alone, as key's latest,
// and reports whether m is news to the handler: false when m is the version
// that the operator's own status write made (see update), which the
// reconcile that wrote it has already seen. A resync that delivers the same
// version again is news, and so is everything that the SDK delivers before
// update records the write.
func (s *memcachedStore) store(key string, m *v1alpha1.Memcached) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	written, ok := s.written[key]
	own := ok && written == m.ResourceVersion
	delete(s.written, key)
	s.items[key] = m
	return !own
}

// update replaces key's Memcached with m, the version the API server
// returned for a status write made from version from, and records that
// store should not take m for news; unless the store no longer holds from:
// the SDK has delivered a newer change, the deletion, or m itself, since.
// ResourceVersions are only compared for equality, as the API allows.
func (s *memcachedStore) update(key, from string, m *v1alpha1.Memcached) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.items[key]; ok && old.ResourceVersion == from {
		s.items[key] = m
		s.written[key] = m.ResourceVersion
	}
}

// delete forgets key.
func (s *memcachedStore) delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, key)
	delete(s.written, key)
}

// keys returns the namespace/name of every Memcached held.
func (s *memcachedStore) keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.items))
	for k := range s.items {
		keys = append(keys, k)
	}
	return keys
}

// keysIn returns the namespace/name of every Memcached held in namespace.
func (s *memcachedStore) keysIn(namespace string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var keys []string
	for k, m := range s.items {
		if m.Namespace == namespace {
			keys = append(keys, k)
		}
	}
	return keys
}

// uid returns the UID of key's latest Memcached, and whether it is held,
// without the copy that get makes.
func (s *memcachedStore) uid(key string) (types.UID, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.items[key]
	if !ok {
		return "", false
	}
	return m.UID, true
}

// sized is a Memcached's namespace, name and spec.size.
type sized struct {
	namespace, name string
	size            int32
}

// sizes returns the namespace, name and spec.size of every Memcached held,
// without the copies that get makes.
func (s *memcachedStore) sizes() []sized {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]sized, 0, len(s.items))
	for _, m := range s.items {
		out = append(out, sized{namespace: m.Namespace, name: m.Name, size: m.Spec.Size})
	}
	return out
}

// get returns a copy of key's latest Memcached that the caller may modify.
func (s *memcachedStore) get(key string) (*v1alpha1.Memcached, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.items[key]
	if !ok {
		return nil, false
	}
	return m.DeepCopy(), true
}
