// Package stub holds the memcached-operator's event handler: for every
// Memcached it keeps a memcached Deployment of spec.size pods and reports
// those pods in status: their names, how many are Ready, and conditions that
// say whether they are available and, if not, why.
package stub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// DefaultImage is the memcached image of new Deployments unless
// --memcached-image or MEMCACHED_IMAGE say otherwise.
const DefaultImage = "memcached:1.6-alpine"

// maxChildRetries is how often a reconcile that a child's change asked for is
// retried with backoff before it is dropped, as the SDK does for its events;
// the next change or the Memcached resync brings it back.
const maxChildRetries = 15

// Handler reconciles Memcached resources. Two sources ask it to: the SDK,
// through Handle, when a Memcached changes; and Run's queue, through
// EnqueueMemcached, when one of a Memcached's Deployment or pods changes.
//
// A reconcile that fails is reported on the Memcached (a Warning Event and a
// Degraded=True condition, see failure.go) and retried with backoff by the
// queue that asked for it. Both queues are client-go workqueues with
// DefaultControllerRateLimiter: the n-th retry of one Memcached waits
// 5ms*2^(n-1), that is 5ms, 10ms, 20ms ... 41s, 82s, about 164s for all 15,
// under an overall limit of 10 retries/s (bursts of 100); after the 15th the
// Memcached is dropped until its next change or the next resync. A
// Memcached that the API server keeps refusing, for a quota, RBAC, an
// admission policy or an invalid object alike, thus costs at most 16
// attempts per resync period, most of them in its first seconds, plus one
// per change to the Memcached: changes, including the status write that
// reports the failure, are handled at once but do not reset the backoff.
type Handler struct {
	client   Client
	recorder record.EventRecorder
	image    string
	now      func() metav1.Time
	queue    workqueue.RateLimitingInterface
	// observe, if set, is told the outcome of every reconcile.
	observe ReconcileObserver
	// mu serializes reconciles, so the SDK's worker and the queue's never
	// write the same Memcached's children at once.
	mu sync.Mutex
}

// ReconcileObserver is told how each reconcile ended: how long it took and
// its error, nil on success (see IsStale for errors that are no failure).
// It lets the operator count reconciles for its metrics while the handler
// knows nothing of who listens. It is called with the handler's lock held,
// so it must be quick and must not call the handler.
type ReconcileObserver func(took time.Duration, err error)

// ObserveReconciles makes h call observe after every reconcile, from both
// the SDK's events and its own queue. Call it before h handles any event.
func (h *Handler) ObserveReconciles(observe ReconcileObserver) {
	h.observe = observe
}

// IsStale reports whether err, returned by a reconcile, only says that a
// write lost a race with a newer version of the object: nothing failed,
// and the reconcile runs again on the newer version.
func IsStale(err error) bool {
	return errors.Is(err, errStale)
}

// NewHandler returns a Handler that reads and writes through client, records
// Events with recorder and runs image in new memcached Deployments.
func NewHandler(client Client, recorder record.EventRecorder, image string) *Handler {
	return &Handler{
		client:   client,
		recorder: recorder,
		image:    image,
		now:      metav1.Now,
		queue:    workqueue.NewNamedRateLimitingQueue(workqueue.DefaultControllerRateLimiter(), "memcached-children"),
	}
}

// Handle reconciles the Memcached of an SDK event.
func (h *Handler) Handle(ctx context.Context, event sdk.Event) error {
	switch o := event.Object.(type) {
	case *v1alpha1.Memcached:
		if event.Deleted {
			// The Deployment has a controller owner reference to the
			// Memcached, so the garbage collector removes it and its pods.
			return nil
		}
		err := h.reconcile(o)
		if errors.Is(err, errStale) {
			// A newer version exists; retry through the queue, which
			// backs off quietly instead of logging an error.
			h.EnqueueMemcached(o.Namespace, o.Name)
			return nil
		}
		return err
	}
	return nil
}

// EnqueueMemcached asks Run's worker to reconcile the Memcached
// namespace/name. Repeated requests for one Memcached collapse into one.
func (h *Handler) EnqueueMemcached(namespace, name string) {
	h.queue.Add(namespace + "/" + name)
}

// Run reconciles what EnqueueMemcached asks for until ctx is done.
func (h *Handler) Run(ctx context.Context) {
	defer h.queue.ShutDown()
	go wait.Until(func() {
		for h.processNextItem() {
		}
	}, time.Second, ctx.Done())
	<-ctx.Done()
}

// processNextItem reconciles one queued Memcached and requeues it with
// backoff on failure. It returns false when the queue is shut down.
func (h *Handler) processNextItem() bool {
	item, shutdown := h.queue.Get()
	if shutdown {
		return false
	}
	defer h.queue.Done(item)
	key := item.(string)
	err := h.reconcileKey(key)
	switch {
	case err == nil:
		h.queue.Forget(item)
	case h.queue.NumRequeues(item) >= maxChildRetries:
		logrus.Warnf("dropping memcached %s out of the queue: %v", key, err)
		h.queue.Forget(item)
	case errors.Is(err, errStale):
		logrus.Debugf("retrying memcached %s: %v", key, err)
		h.queue.AddRateLimited(item)
	default:
		logrus.Errorf("error syncing memcached %s: %v", key, err)
		h.queue.AddRateLimited(item)
	}
	return true
}

// reconcileKey reconciles the Memcached with the namespace/name key.
func (h *Handler) reconcileKey(key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	m, err := h.client.GetMemcached(namespace, name)
	if apierrors.IsNotFound(err) {
		// No Memcached of that name: nothing here is ours to manage.
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get memcached %s: %v", key, err)
	}
	return h.reconcile(m)
}
