package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// LeaseResource is the API resource of the lock.
var LeaseResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// ReasonLeaderElection is the reason of the Normal Events that LeaseLock
// records on the Lease when its holder changes.
const ReasonLeaderElection = "LeaderElection"

// LeaseLock is a resourcelock.Interface on a coordination.k8s.io/v1 Lease.
//
// It talks to the API server through the dynamic client. client-go 1.11 has
// neither the coordination/v1 Go types nor a typed client for them (the API
// group's v1 is served since Kubernetes 1.14), and the dynamic client speaks
// JSON to any group and version while returning the API server's refusals as
// the typed clients do (NotFound, AlreadyExists, Conflict), which is what the
// elector tests for. A Lease is read into leaseSpec by a JSON round trip.
//
// The elector's record maps onto the Lease's spec field by field:
// holderIdentity, leaseDurationSeconds, acquireTime, renewTime (MicroTime:
// RFC 3339 in UTC with microseconds) and leaseTransitions. Fields of the
// spec that the record does not have are kept as they are.
//
// Writes are optimistic: Update sends the resourceVersion of the Lease as the
// last Get or Create returned it, so when two candidates both find a Lease
// expired and both try to take it, the API server accepts one write and
// refuses the other with a Conflict. A successful Update therefore means that
// nobody else wrote the Lease since this lock read it.
//
// Patience. client-go 1.11's elector takes a Lease at once when it finds none
// (it creates one) or finds its own identity as the holder, and otherwise
// only once it has seen the same record for LeaseDuration. Get shows it the
// Lease so that the patient rule is the only one that applies to anything
// this process did not write itself:
//   - no Lease reads as a record held by nobody, stamped with when this lock
//     first found it missing, so that a deleted Lease is taken (created
//     again) only after LeaseDuration, like an expired one. Reads a
//     RetryPeriod apart cannot see a Lease created and deleted between
//     them, say by a candidate that took it after a new installation's wait
//     and a `kubectl delete lease` a moment later; the stamp would then be
//     old and the Lease taken at once, while that leader has not noticed
//     the delete yet. So the stamp is renewed whenever the watch of
//     followChanges reported a change since, and while no watch is open;
//   - a Lease that names this candidate but that this lock did not write
//     reads as held by someone else, except at a new process's first read:
//     then it is taken to be the Lease of an earlier container of the same
//     pod, which the kubelet restarted after it died, and the elector resumes
//     it at once (a successor, after a loss, never does);
//   - a Lease its holder released (see Release) reads as missing, which makes
//     the elector Create it at once; Create then takes the released Lease
//     over with an Update of the version read, so only one candidate wins.
//
// An empty or foreign holder that someone wrote by hand needs no help: the
// elector waits LeaseDuration from when it sees any change of the record.
//
// Fencing. Once this lock holds the Lease (its own record is the last it
// wrote), a Get that finds no Lease, another holder, or a release it did not
// write, closes Lost: the leader must stop at once. After that, after
// Release, or once the Elector has reported the loss of the Lease, every
// Get, Create and Update fails, so this lock never takes the Lease again,
// however late a request of its elector, which cannot be stopped, comes. A
// process that stands by after a loss campaigns with a successor instead,
// which waits like any candidate (see successor).
//
// The elector calls Get, Create and Update from one goroutine; Release and
// the methods that report on the lock (Answered, RenewedAt, Lost) may be
// called from any.
type LeaseLock struct {
	client    dynamic.ResourceInterface
	watcher   dynamic.ResourceInterface
	namespace string
	name      string
	identity  string
	recorder  record.EventRecorder

	// ops serializes Get, Create, Update and Release, so that Release,
	// called by the Elector's goroutine, never races a renewal.
	ops sync.Mutex
	// lease is the Lease as the last Get, Create or Update returned it;
	// nil before the first read and while the Lease is missing.
	lease *unstructured.Unstructured
	// missingSince is when this lock found the Lease missing, while it is.
	missingSince time.Time
	// read is set once the API server has told this lock about the
	// Lease, and in a successor from the start.
	read bool
	// held is set while the last write of this lock is its own record and
	// no read showed otherwise.
	held bool
	// lost is closed when a read shows that a held Lease was taken away.
	lost chan struct{}

	mu sync.Mutex
	// answeredAt is when the API server last answered about the Lease,
	// and answerErr why the last attempt failed (nil when it did not).
	answeredAt time.Time
	answerErr  error
	// renewedAt is when the last successful write of this identity's
	// record was sent: the API server stored it at this time or later.
	renewedAt time.Time
	// lostReason says why lost was closed.
	lostReason string
	// watching is set while a watch on the Lease is open (see
	// followChanges), and changedAt is when it last reported a change, or
	// opened or closed.
	watching  bool
	changedAt time.Time
	// closed, once set, fails every later Get, Create and Update. It is
	// guarded by mu, not ops, so that closing never waits for a request
	// that hangs.
	closed error
}

// NewLeaseLock returns a lock on the Lease namespace/name for the candidate
// identity, through client (a dynamic client whose own rate limit keeps the
// renewals from queueing behind other requests) and, for its watch,
// watcher: a client without a request timeout, since client-go 1.11 ends a
// watch at the timeout, and a watch that ends every few seconds would keep
// a missing Lease from ever being taken (see followChanges). recorder, if
// not nil, records an Event on the Lease when this candidate becomes or
// stops being the leader.
func NewLeaseLock(client, watcher dynamic.Interface, namespace, name, identity string, recorder record.EventRecorder) *LeaseLock {
	return &LeaseLock{
		client:    client.Resource(LeaseResource).Namespace(namespace),
		watcher:   watcher.Resource(LeaseResource).Namespace(namespace),
		namespace: namespace,
		name:      name,
		identity:  identity,
		recorder:  recorder,
		lost:      make(chan struct{}),
	}
}

// successor returns a lock on the same Lease for the same candidate, for
// the term that follows l's: it shares none of l's state, so that l's
// elector, still running, can never write through it, but the API server's
// last answer, which readiness reads (see Elector.Check). Unlike a new
// process's lock, it never resumes the Lease at its first read: after a
// loss, the Lease may still name this candidate while another, which saw
// that record for a lease duration, is about to take it.
func (l *LeaseLock) successor() *LeaseLock {
	n := &LeaseLock{
		client:    l.client,
		watcher:   l.watcher,
		namespace: l.namespace,
		name:      l.name,
		identity:  l.identity,
		recorder:  l.recorder,
		read:      true,
		lost:      make(chan struct{}),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n.answeredAt, n.answerErr = l.answeredAt, l.answerErr
	return n
}

// leaseSpec is the part of a coordination.k8s.io/v1 LeaseSpec that the
// elector's record maps to.
type leaseSpec struct {
	HolderIdentity       *string           `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds *int32            `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          *metav1.MicroTime `json:"acquireTime,omitempty"`
	RenewTime            *metav1.MicroTime `json:"renewTime,omitempty"`
	LeaseTransitions     *int32            `json:"leaseTransitions,omitempty"`
}

// releasedDurationSeconds is the leaseDurationSeconds of a released Lease:
// with an empty holder it marks a release by the holder, as client-go 1.14
// and later write one, apart from a holder emptied by hand, which keeps the
// candidates' lease duration.
const releasedDurationSeconds = 1

// released reports whether rec is a Lease that its holder gave up.
func released(rec *resourcelock.LeaderElectionRecord) bool {
	return rec.HolderIdentity == "" && rec.LeaseDurationSeconds == releasedDurationSeconds
}

// notWrittenHere is what Get shows as the holder of a Lease that names this
// candidate but that this process did not write.
func notWrittenHere(identity string) string {
	return identity + " (not written by this process)"
}

// Get returns the record the elector is to act on (see the type's
// Patience): the Lease's record, a record held by nobody when the Lease is
// missing, a NotFound error when its holder released it.
func (l *LeaseLock) Get() (*resourcelock.LeaderElectionRecord, error) {
	l.ops.Lock()
	defer l.ops.Unlock()
	if err := l.closedErr(); err != nil {
		return nil, err
	}
	lease, err := l.client.Get(l.name, metav1.GetOptions{})
	l.answered(err)
	if apierrors.IsNotFound(err) {
		if l.held {
			l.lose("the lease was deleted")
		}
		l.lease, l.read = nil, true
		if l.missingSince.IsZero() || l.changedSince(l.missingSince) {
			l.missingSince = time.Now()
		}
		return &resourcelock.LeaderElectionRecord{RenewTime: metav1.NewTime(l.missingSince)}, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := recordOf(lease)
	if err != nil {
		return nil, fmt.Errorf("failed to read lease %s: %v", l.Describe(), err)
	}
	first := !l.read
	l.lease, l.missingSince, l.read = lease, time.Time{}, true
	switch {
	case l.held && released(rec):
		l.lose("someone else released the lease")
	case l.held && rec.HolderIdentity != l.identity:
		l.lose(fmt.Sprintf("the lease names %q as its holder", rec.HolderIdentity))
	}
	switch {
	case released(rec):
		return nil, apierrors.NewNotFound(LeaseResource.GroupResource(), l.name)
	case rec.HolderIdentity == l.identity && !l.held && !first:
		rec.HolderIdentity = notWrittenHere(l.identity)
	}
	return rec, nil
}

// Create creates the Lease holding rec, or takes over the released Lease
// that Get reported as missing. An AlreadyExists or Conflict error means
// another candidate was first.
func (l *LeaseLock) Create(rec resourcelock.LeaderElectionRecord) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	if err := l.closedErr(); err != nil {
		return err
	}
	if l.lease != nil {
		old, err := recordOf(l.lease)
		if err != nil {
			return err
		}
		rec.LeaderTransitions = old.LeaderTransitions + 1
		return l.update(rec)
	}
	return l.create(rec)
}

// Update writes rec into the Lease as the last Get or Create returned it,
// or creates the Lease if the last Get found none. A Conflict (or
// AlreadyExists) error means someone wrote the Lease since.
func (l *LeaseLock) Update(rec resourcelock.LeaderElectionRecord) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	if err := l.closedErr(); err != nil {
		return err
	}
	switch {
	case l.lease != nil:
		return l.update(rec)
	case !l.missingSince.IsZero():
		// The elector counted a transition from the holder nobody;
		// a new Lease has had none.
		rec.LeaderTransitions = 0
		return l.create(rec)
	}
	return errors.New("lease not yet read: Get or Create it first")
}

func (l *LeaseLock) create(rec resourcelock.LeaderElectionRecord) error {
	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion(LeaseResource.GroupVersion().String())
	lease.SetKind("Lease")
	lease.SetNamespace(l.namespace)
	lease.SetName(l.name)
	if err := setRecord(lease, rec); err != nil {
		return err
	}
	sent := time.Now()
	created, err := l.client.Create(lease)
	l.answered(err)
	if err != nil {
		return err
	}
	l.lease, l.missingSince = created, time.Time{}
	l.wrote(rec, sent)
	return nil
}

func (l *LeaseLock) update(rec resourcelock.LeaderElectionRecord) error {
	lease := l.lease.DeepCopy()
	if err := setRecord(lease, rec); err != nil {
		return err
	}
	sent := time.Now()
	updated, err := l.client.Update(lease)
	l.answered(err)
	if err != nil {
		return err
	}
	l.lease = updated
	l.wrote(rec, sent)
	return nil
}

// Release gives the Lease up, if this lock holds it, with an Update of the
// version it last wrote that empties the holder and sets leaseDurationSeconds
// to 1: candidates of this package take such a Lease at once (see the type's
// Patience). Afterwards every Get, Create and Update fails, so that this
// process never takes the Lease again. Call it once the leader has stopped
// writing. A Lease that someone else wrote since this lock's last write is
// not this lock's to release; Release then leaves it alone and returns nil.
func (l *LeaseLock) Release() error {
	l.ops.Lock()
	defer l.ops.Unlock()
	if l.closedErr() != nil {
		return nil
	}
	l.close(fmt.Errorf("lease %s released by this process", l.Describe()))
	if !l.held {
		return nil
	}
	l.held = false
	old, err := recordOf(l.lease)
	if err != nil {
		return err
	}
	now := metav1.Now()
	rec := resourcelock.LeaderElectionRecord{
		LeaseDurationSeconds: releasedDurationSeconds,
		AcquireTime:          now,
		RenewTime:            now,
		LeaderTransitions:    old.LeaderTransitions,
	}
	lease := l.lease.DeepCopy()
	if err := setRecord(lease, rec); err != nil {
		return err
	}
	_, err = l.client.Update(lease)
	l.answered(err)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to release lease %s: %v", l.Describe(), err)
	}
	return nil
}

// lose notes that a Lease this lock held was taken away, for the reason
// why, and closes Lost. The caller holds ops.
func (l *LeaseLock) lose(why string) {
	l.held = false
	l.close(fmt.Errorf("lease %s lost: %s", l.Describe(), why))
	l.mu.Lock()
	l.lostReason = why
	l.mu.Unlock()
	close(l.lost)
}

// close makes every later Get, Create and Update fail with err, unless the
// lock is closed already. It does not wait for a request in flight.
func (l *LeaseLock) close(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed == nil {
		l.closed = err
	}
}

func (l *LeaseLock) closedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Lost is closed once a read shows that the Lease this lock held was
// deleted, released by someone else or given to another holder.
func (l *LeaseLock) Lost() <-chan struct{} {
	return l.lost
}

// LostReason says why Lost was closed; empty while it is not.
func (l *LeaseLock) LostReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostReason
}

// RecordEvent records event ("became leader", "stopped leading") on the
// Lease as a Normal Event, prefixed with this candidate's identity.
func (l *LeaseLock) RecordEvent(event string) {
	if l.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{
		APIVersion: LeaseResource.GroupVersion().String(),
		Kind:       "Lease",
		Namespace:  l.namespace,
		Name:       l.name,
	}
	if l.lease != nil {
		ref.UID = l.lease.GetUID()
		ref.ResourceVersion = l.lease.GetResourceVersion()
	}
	l.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonLeaderElection, "%s %s", l.identity, event)
}

// Identity returns the candidate's identity, the holderIdentity it writes.
func (l *LeaseLock) Identity() string {
	return l.identity
}

// Describe names the Lease, for logs.
func (l *LeaseLock) Describe() string {
	return l.namespace + "/" + l.name
}

// answered notes the outcome of a request about the Lease. NotFound,
// AlreadyExists and Conflict are answers too: the API server is there and
// this candidate may read and write the Lease; other errors, including
// Forbidden, mean it cannot take part in the election.
func (l *LeaseLock) answered(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		l.answeredAt, l.answerErr = time.Now(), nil
		return
	}
	l.answerErr = err
}

// wrote notes a successful write of rec that was sent at sent; the
// caller holds ops.
func (l *LeaseLock) wrote(rec resourcelock.LeaderElectionRecord, sent time.Time) {
	l.held = rec.HolderIdentity == l.identity
	if !l.held {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewedAt = sent
}

// Answered returns when the API server last answered about the Lease (zero
// if never), and the error of the last attempt if it failed.
func (l *LeaseLock) Answered() (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answeredAt, l.answerErr
}

// RenewedAt returns when the last successful write of this candidate's own
// record was sent (zero if never). The API server stored it no earlier, so
// no other candidate can consider the Lease expired before RenewedAt plus
// the lease duration.
func (l *LeaseLock) RenewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewedAt
}

// recordOf returns the elector's record that lease holds.
func recordOf(lease *unstructured.Unstructured) (*resourcelock.LeaderElectionRecord, error) {
	var spec leaseSpec
	if raw, ok := lease.Object["spec"]; ok {
		data, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &spec); err != nil {
			return nil, fmt.Errorf("invalid spec: %v", err)
		}
	}
	rec := &resourcelock.LeaderElectionRecord{}
	if spec.HolderIdentity != nil {
		rec.HolderIdentity = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		rec.LeaseDurationSeconds = int(*spec.LeaseDurationSeconds)
	}
	if spec.AcquireTime != nil {
		rec.AcquireTime = metav1.NewTime(spec.AcquireTime.Time)
	}
	if spec.RenewTime != nil {
		rec.RenewTime = metav1.NewTime(spec.RenewTime.Time)
	}
	if spec.LeaseTransitions != nil {
		rec.LeaderTransitions = int(*spec.LeaseTransitions)
	}
	return rec, nil
}

// setRecord writes rec into lease's spec, keeping the spec's other fields.
func setRecord(lease *unstructured.Unstructured, rec resourcelock.LeaderElectionRecord) error {
	duration := int32(rec.LeaseDurationSeconds)
	transitions := int32(rec.LeaderTransitions)
	spec := leaseSpec{
		HolderIdentity:       &rec.HolderIdentity,
		LeaseDurationSeconds: &duration,
		LeaseTransitions:     &transitions,
	}
	if !rec.AcquireTime.IsZero() {
		spec.AcquireTime = &metav1.MicroTime{Time: rec.AcquireTime.Time}
	}
	if !rec.RenewTime.IsZero() {
		spec.RenewTime = &metav1.MicroTime{Time: rec.RenewTime.Time}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var fields map[string]interface{}
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	merged, _, err := unstructured.NestedMap(lease.Object, "spec")
	if err != nil {
		return fmt.Errorf("invalid spec in lease %s/%s: %v", lease.GetNamespace(), lease.GetName(), err)
	}
	if merged == nil {
		merged = map[string]interface{}{}
	}
	for _, f := range []string{"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"} {
		delete(merged, f)
	}
	for k, v := range fields {
		merged[k] = v
	}
	return unstructured.SetNestedMap(lease.Object, merged, "spec")
}

// watchRetry is how long followChanges waits before it opens a watch again
// after one failed or ended.
const watchRetry = time.Second

// followChanges keeps a watch open on the Lease until ctx is done, noting
// when it reports a change (see changedSince). The API server ends watches
// every few minutes; a new one is opened at once, and after a failure, such
// as an API server outage, after watchRetry.
func (l *LeaseLock) followChanges(ctx context.Context) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", l.name).String()}
	failing := false
	for ctx.Err() == nil {
		w, err := l.watcher.Watch(opts)
		if err == nil {
			failing = false
			l.noteChange(true)
			l.drain(ctx, w)
			l.noteChange(false)
			continue
		}
		if !failing {
			// Logged, not returned: nobody waits for this loop. Until a
			// watch opens, a missing Lease is never taken.
			logrus.Warnf("cannot watch lease %s (retrying every %v; until then a missing lease is not taken): %v", l.Describe(), watchRetry, err)
			failing = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchRetry):
		}
	}
}

// drain notes every event of w until w ends or ctx is done.
func (l *LeaseLock) drain(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
			l.noteChange(true)
		}
	}
}

func (l *LeaseLock) noteChange(watching bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watching, l.changedAt = watching, time.Now()
}

// changedSince reports whether the Lease may have changed since t: a watch
// reported a change, or opened or closed, at t or later, or no watch is
// open, so that nothing would have been reported.
func (l *LeaseLock) changedSince(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.watching || !l.changedAt.Before(t)
}
