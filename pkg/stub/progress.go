package stub

import (
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
)

// progressReports limits how often the status of a Memcached is written
// while its pods are still starting, scaling or rolling. Each such step,
// a pod listed, scheduled or Ready, used to cost a status write, and every
// write costs the API server a validation, an etcd write and a watch event
// to every client of Memcached resources. A status that only says the pods
// have come further (see progressOnly) is written at most once an interval
// per Memcached, counted from its previous write or from the creation of its
// Deployment; a new Memcached whose pods are Ready within the interval thus
// gets a single write. Everything else is written at once: the end of the
// progress, a failure, a new generation, a condition that changes its
// status, the start of a roll.
type progressReports struct {
	interval time.Duration
	clock    func() time.Time

	mu sync.Mutex
	// since holds when the status of each Memcached in progress was last
	// written, or when its Deployment was created, by namespace/name.
	since map[string]time.Time
}

// newProgressReports returns progressReports that write at most one
// progress report an interval; an interval of 0 writes every one.
func newProgressReports(interval time.Duration) *progressReports {
	return &progressReports{interval: interval, clock: time.Now, since: map[string]time.Time{}}
}

// started records that key's Deployment was created now, with no status yet.
func (p *progressReports) started(key string) {
	if p.interval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since[key] = p.clock()
}

// hold returns how long the write of next over stored, key's current
// status, must wait; 0 means now.
func (p *progressReports) hold(key string, stored, next v1alpha1.MemcachedStatus) time.Duration {
	if p.interval <= 0 || !progressOnly(stored, next) {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.since[key]
	if !ok {
		return 0
	}
	return max(0, p.interval-p.clock().Sub(last))
}

// wrote records that next was written as key's status now.
func (p *progressReports) wrote(key string, next v1alpha1.MemcachedStatus) {
	if p.interval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if inProgress(next) {
		p.since[key] = p.clock()
		return
	}
	// A settled status is followed by a write that progressOnly lets
	// through at once anyway: a new generation, or pods that stop being
	// Ready and so change the Available condition.
	delete(p.since, key)
}

// forget drops what p knows of key, a Memcached that is gone.
func (p *progressReports) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key)
}

// progressOnly reports whether next, replacing stored, only tells that the
// pods have come further: next is still in progress (see inProgress), for
// the generation that stored reports, if any, no condition that stored
// holds changes its status, and no roll starts (see rollStarts). Pod names,
// counts, other reasons and messages may differ.
func progressOnly(stored, next v1alpha1.MemcachedStatus) bool {
	if !inProgress(next) || rollStarts(stored, next) {
		return false
	}
	if stored.ObservedGeneration != 0 && stored.ObservedGeneration != next.ObservedGeneration {
		return false
	}
	for _, c := range next.Conditions {
		if s := memcached.FindCondition(stored.Conditions, c.Type); s != nil && s.Status != c.Status {
			return false
		}
	}
	return true
}

// rollStarts reports whether next is the first status of a roll: its
// Progressing reason is RollingUpdate and stored's is not. The start of a
// roll is written at once, never held as progress. It tells the user, and
// whatever waits on the status, that the pods are being replaced from now
// on; a status that kept saying RollPending or Complete for up to an
// interval while pods are already being replaced would be wrong, not just
// late. A roll that the spec asks for starts with a new observedGeneration,
// which is written at once anyway; this covers a paced roll that gets its
// slot (RollPending to RollingUpdate within one generation). It costs at
// most one write per roll, and the steps of the roll after it are still
// held.
func rollStarts(stored, next v1alpha1.MemcachedStatus) bool {
	n := memcached.FindCondition(next.Conditions, v1alpha1.MemcachedProgressing)
	if n == nil || n.Reason != memcached.ReasonRollingUpdate {
		return false
	}
	s := memcached.FindCondition(stored.Conditions, v1alpha1.MemcachedProgressing)
	return s == nil || s.Reason != memcached.ReasonRollingUpdate
}

// inProgress reports whether status says the pods are still changing
// (Progressing is True) and nothing needs a change from outside (Degraded
// is not True).
func inProgress(status v1alpha1.MemcachedStatus) bool {
	progressing := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedProgressing)
	degraded := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded)
	return progressing != nil && progressing.Status == corev1.ConditionTrue &&
		(degraded == nil || degraded.Status != corev1.ConditionTrue)
}
