package kube

import (
	"context"
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

const (
	// apiCheckInterval is how often the APIMonitor asks discovery whether the
	// Memcached API is served while it checks.
	apiCheckInterval = 2 * time.Second
	// apiCheckGrace is how long after the last Memcached deletion the
	// APIMonitor keeps checking. Deleting the CustomResourceDefinition
	// deletes every Memcached first; the API goes a moment after the last.
	apiCheckGrace = 10 * time.Second
)

// APIMonitor says in the log when the Memcached API stops being served,
// typically because its CustomResourceDefinition was deleted, and when it is
// served again. Without it the only trace is client-go's reflector in the
// SDK, which logs "Failed to list *unstructured.Unstructured: the server
// could not find the requested resource" every second, naming neither.
//
// It costs no request while nothing is deleted: Memcached deletions start
// it, and it asks discovery every apiCheckInterval until apiCheckGrace after
// the last one, or, once the API is gone, until it is back.
type APIMonitor struct {
	served   func() error
	interval time.Duration
	grace    time.Duration

	mu          sync.Mutex
	running     bool
	lastDeleted time.Time
}

// NewAPIMonitor returns an APIMonitor that asks served whether the
// Memcached API is served: nil when it is, a NotFound error when it is gone.
// The handler makes one and tells it of every Memcached deletion.
func NewAPIMonitor(served func() error) *APIMonitor {
	return &APIMonitor{served: served, interval: apiCheckInterval, grace: apiCheckGrace}
}

// MemcachedDeleted tells m that a Memcached was deleted.
func (m *APIMonitor) MemcachedDeleted(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastDeleted = time.Now()
	if m.running {
		return
	}
	m.running = true
	go m.check(ctx)
}

// check asks discovery until the grace period after the last deletion ends
// with the API served, or until ctx is done.
func (m *APIMonitor) check(ctx context.Context) {
	ticker := time.NewTicker(m.interval)
	defer ticker.Stop()
	gone := false
	for {
		select {
		case <-ctx.Done():
			m.stop()
			return
		case <-ticker.C:
		}
		err := m.served()
		switch {
		case apierrors.IsNotFound(err) && !gone:
			gone = true
			crd := v1alpha1.SchemeGroupVersionResource.GroupResource()
			logrus.Errorf("the Memcached API %s is not served (is the CustomResourceDefinition %s deleted?): no Memcached can be read or reconciled until it is back",
				v1alpha1.APIVersion(), crd.String())
		case err == nil && gone:
			gone = false
			logrus.Infof("the Memcached API %s is served again", v1alpha1.APIVersion())
		}
		if !gone && m.quiet() {
			return
		}
	}
}

// quiet reports whether the grace period after the last deletion is over,
// and if so marks m stopped, under the same lock as MemcachedDeleted.
func (m *APIMonitor) quiet() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.lastDeleted) < m.grace {
		return false
	}
	m.running = false
	return true
}

func (m *APIMonitor) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = false
}

// DefaultServiceMonitorCheckInterval is how long the operator trusts
// discovery's answer on whether ServiceMonitors are served, unless
// CachedClient.CheckServedEvery says otherwise. A
// CustomResourceDefinition installed later is noticed by the first
// reconcile after that, so a Memcached with monitoring gets its
// ServiceMonitor by its next change or resync (--resync); the check costs
// one discovery request per interval, and none while no Memcached has
// monitoring.
const DefaultServiceMonitorCheckInterval = time.Minute

// servedCheck tells whether the API server serves an optional resource,
// such as one of a CustomResourceDefinition that may be installed or
// removed at any time, asking discovery at most once per interval.
type servedCheck struct {
	discovery discovery.ServerResourcesInterface
	resource  schema.GroupVersionResource
	interval  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	checked  time.Time
	isServed bool
}

func newServedCheck(d discovery.ServerResourcesInterface, resource schema.GroupVersionResource, interval time.Duration) *servedCheck {
	return &servedCheck{discovery: d, resource: resource, interval: interval, now: time.Now}
}

// served returns discovery's last answer, asking again once it is interval
// old. A discovery error other than NotFound, which says the group version
// is not served, keeps the last answer until the next check: a timeout
// says nothing about the resource.
func (c *servedCheck) served() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.checked.IsZero() && now.Sub(c.checked) < c.interval {
		return c.isServed
	}
	c.checked = now
	gv := c.resource.GroupVersion().String()
	list, err := c.discovery.ServerResourcesForGroupVersion(gv)
	served := false
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		logrus.Warnf("failed to discover whether %s %s are served, keeping the last answer (%t) for %v: %v", gv, c.resource.Resource, c.isServed, c.interval, err)
		return c.isServed
	default:
		for _, r := range list.APIResources {
			if r.Name == c.resource.Resource {
				served = true
			}
		}
	}
	if served != c.isServed {
		logrus.Infof("%s %s served: %t", gv, c.resource.Resource, served)
	}
	c.isServed = served
	return served
}

// expire makes the next served ask discovery.
func (c *servedCheck) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = time.Time{}
}
