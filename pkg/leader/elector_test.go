package leader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Short timings keep the tests fast; their ratios are the operator's
// defaults (12s, 8s, 1s) scaled down.
const (
	testLeaseDuration = 600 * time.Millisecond
	testRenewDeadline = 400 * time.Millisecond
	testRetryPeriod   = 50 * time.Millisecond
)

// testStopTime is the stop time the tests' timings leave room for.
const testStopTime = 100 * time.Millisecond

// candidate is one replica taking part in an election in a test.
type candidate struct {
	name    string
	elector *Elector
	// stop cancels Run's context, as SIGTERM does.
	stop context.CancelFunc
	// led receives the time lead was called, once per term.
	led chan time.Time
	// lost receives the cause and the time of the end of a term's context
	// that ended in the loss of the Lease.
	lost chan result
	// drained receives the time lead returned after its context was done.
	drained chan time.Time
	// ended receives Run's error and the time it returned.
	ended chan result
}

// terms is how many terms a candidate's channels hold without a reader.
const terms = 16

type result struct {
	err error
	at  time.Time
}

// drainTime is how long lead takes to return once its context is done,
// as workers finishing their last writes do.
const drainTime = 100 * time.Millisecond

// start runs an election for identity through f until the test ends.
func start(t *testing.T, f *front, identity string) *candidate {
	t.Helper()
	e, err := New(Config{
		Lock:          f.lock(t, identity),
		LeaseDuration: testLeaseDuration,
		RenewDeadline: testRenewDeadline,
		RetryPeriod:   testRetryPeriod,
		StopTime:      testStopTime,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &candidate{name: identity, elector: e, stop: cancel, led: make(chan time.Time, terms), lost: make(chan result, terms), drained: make(chan time.Time, terms), ended: make(chan result, 1)}
	go func() {
		err := e.Run(ctx, func(ctx context.Context) error {
			c.led <- time.Now()
			<-ctx.Done()
			if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
				c.lost <- result{cause, time.Now()}
			}
			<-time.After(drainTime)
			c.drained <- time.Now()
			return nil
		})
		c.ended <- result{err, time.Now()}
	}()
	return c
}

// waitLead returns when c starts leading, or fails after timeout.
func (c *candidate) waitLead(t *testing.T, timeout time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-c.led:
		return at
	case r := <-c.ended:
		t.Fatalf("%s: Run returned %v before leading", c.name, r.err)
	case <-time.After(timeout):
		t.Fatalf("%s: not leading after %v", c.name, timeout)
	}
	return time.Time{}
}

// waitLoss returns the cause and the time of the end of c's term when it
// lost the Lease, or fails after timeout, or if Run returns: a process that
// loses the Lease stays up.
func (c *candidate) waitLoss(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case r := <-c.lost:
		return r
	case r := <-c.ended:
		t.Fatalf("%s: Run returned %v, want it to stand by after the loss", c.name, r.err)
	case <-time.After(timeout):
		t.Fatalf("%s: still leading after %v", c.name, timeout)
	}
	return result{}
}

// requireRunning fails if c's Run has returned.
func (c *candidate) requireRunning(t *testing.T) {
	t.Helper()
	select {
	case r := <-c.ended:
		t.Fatalf("%s: Run returned %v, want it still taking part", c.name, r.err)
	default:
	}
}

// waitAnyLead returns the first of cs to start leading and when, or fails
// after timeout.
func waitAnyLead(t *testing.T, timeout time.Duration, cs ...*candidate) (*candidate, time.Time) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		for _, c := range cs {
			select {
			case at := <-c.led:
				return c, at
			case r := <-c.ended:
				t.Fatalf("%s: Run returned %v before leading", c.name, r.err)
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatalf("nobody leads after %v", timeout)
		case <-time.After(testRetryPeriod / 10):
		}
	}
}

// waitEnd returns Run's result, or fails after timeout.
func (c *candidate) waitEnd(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case r := <-c.ended:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s: Run still running after %v", c.name, timeout)
	}
	return result{}
}

// waitRead returns once c's lock has had an answer from the API server, so
// that c has seen the Lease as it is.
func (c *candidate) waitRead(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if at, _ := c.elector.cfg.Lock.Answered(); !at.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer about the lease within 5s", c.name)
		}
		<-time.After(testRetryPeriod / 5)
	}
}

// overlapWatch samples Leading() of candidates every millisecond until
// stopped, and fails the test if two ever report it at once.
func overlapWatch(t *testing.T, cs ...*candidate) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var leading []string
			for _, c := range cs {
				if c.elector.Leading() {
					leading = append(leading, c.name)
				}
			}
			if len(leading) > 1 {
				t.Errorf("%v all report Leading at %v", leading, time.Now().Format("15:04:05.000"))
				return
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// leaseSpec returns the spec of the stored Lease, failing if there is none.
func storedSpec(t *testing.T, api *fakeAPI) map[string]interface{} {
	t.Helper()
	l := api.lease(testLease)
	if l == nil {
		t.Fatal("no lease stored")
	}
	return l["spec"].(map[string]interface{})
}

// TestOneLeaderThenFailover: of two candidates only the first leads while it
// renews. When its requests to the API server stall for longer than the
// renew deadline, it reports the loss of the Lease before the other can take
// it, the other takes it, and the stalled requests, delivered late, change
// nothing.
func TestOneLeaderThenFailover(t *testing.T) {
	api := newFakeAPI()
	fa, fb := newFront(t, api), newFront(t, api)
	a := start(t, fa, "pod-a")
	a.waitLead(t, 5*time.Second)
	b := start(t, fb, "pod-b")
	defer overlapWatch(t, a, b)()

	// b stands by for several lease durations while a renews.
	select {
	case <-b.led:
		t.Fatal("pod-b leads while pod-a renews the lease")
	case r := <-a.ended:
		t.Fatalf("pod-a stopped leading: %v", r.err)
	case <-time.After(3 * testLeaseDuration):
	}
	if !a.elector.Leading() || b.elector.Leading() {
		t.Fatalf("Leading: pod-a %t, pod-b %t; want true, false", a.elector.Leading(), b.elector.Leading())
	}

	fa.pause() // pod-a's requests now stall, as in a partition or a paused process
	lost := a.waitLoss(t, 5*time.Second)
	if !errors.Is(lost.err, ErrLeaseLost) {
		t.Fatalf("pod-a's term ended with %v, want ErrLeaseLost", lost.err)
	}
	renewed := a.elector.cfg.Lock.RenewedAt()
	// The watchdog reports within the renew deadline plus a tick; the
	// property that matters is that it is before the lease can expire.
	if late := lost.at.Sub(renewed); late < testRenewDeadline || late >= testLeaseDuration-testStopTime {
		t.Errorf("pod-a reported the loss %v after its last renewal, want between the renew deadline %v and the lease duration %v less the stop time %v", late, testRenewDeadline, testLeaseDuration, testStopTime)
	}
	bLed := b.waitLead(t, 5*time.Second)
	if !lost.at.Before(bLed) {
		t.Errorf("pod-b led at %v, before pod-a gave up at %v", bLed, lost.at)
	}
	if gap := bLed.Sub(renewed); gap < testLeaseDuration {
		t.Errorf("pod-b took the lease %v after pod-a's last renewal, before the lease duration %v", gap, testLeaseDuration)
	}
	if a.elector.Leading() {
		t.Error("pod-a still reports Leading")
	}

	fa.resume() // the stalled requests reach the API server late
	for range 3 {
		b.waitRenewal(t, api)
	}
	spec := storedSpec(t, api)
	if spec["holderIdentity"] != "pod-b" || spec["leaseTransitions"] != float64(1) {
		t.Errorf("lease spec %v, want holder pod-b after 1 transition", spec)
	}
	a.requireRunning(t)
}

// waitRenewal returns once the stored Lease has changed with c as its
// holder, or fails after a lease duration.
func (c *candidate) waitRenewal(t *testing.T, api *fakeAPI) {
	t.Helper()
	before := storedSpec(t, api)["renewTime"]
	deadline := time.Now().Add(testLeaseDuration)
	for {
		spec := storedSpec(t, api)
		if spec["renewTime"] != before {
			if spec["holderIdentity"] != c.name {
				t.Fatalf("lease spec %v, want holder %s", spec, c.name)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not renew the lease within %v", c.name, testLeaseDuration)
		}
		<-time.After(testRetryPeriod / 5)
	}
}

// TestOutsideChangeFencesTheLeader: when someone deletes the Lease or writes
// its holder, the leader stops at its next renewal and stands by, and a
// candidate, the standby or the old leader, takes the Lease only a lease
// duration after the change, as after an expiry, even when the new holder
// is its own name. Never do both lead at once.
func TestOutsideChangeFencesTheLeader(t *testing.T) {
	tests := []struct {
		name   string
		change func(api *fakeAPI)
	}{
		{"lease deleted", func(api *fakeAPI) { api.remove(testLease) }},
		{"holder emptied", func(api *fakeAPI) { api.setHolder(testLease, "") }},
		{"holder set to a third name", func(api *fakeAPI) { api.setHolder(testLease, "pod-x") }},
		{"holder set to the standby", func(api *fakeAPI) { api.setHolder(testLease, "pod-b") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			a := start(t, newFront(t, api), "pod-a")
			a.waitLead(t, 5*time.Second)
			b := start(t, newFront(t, api), "pod-b")
			b.waitRead(t)
			defer overlapWatch(t, a, b)()

			tt.change(api)
			changed := time.Now()

			lost := a.waitLoss(t, 5*time.Second)
			if !errors.Is(lost.err, ErrLeaseLost) {
				t.Fatalf("pod-a's term ended with %v, want ErrLeaseLost", lost.err)
			}
			// The next renewal sees it: within a retry period and a
			// request, well before the renew deadline.
			if took := lost.at.Sub(changed); took > testRenewDeadline/2 {
				t.Errorf("pod-a stopped %v after the change, want within %v", took, testRenewDeadline/2)
			}
			next, led := waitAnyLead(t, 5*time.Second, a, b)
			if waited := led.Sub(changed); waited < testLeaseDuration {
				t.Errorf("%s led %v after the change, before the lease duration %v", next.name, waited, testLeaseDuration)
			}
			next.waitRenewal(t, api)
			other := a
			if next == a {
				other = b
			}
			if other.elector.Leading() {
				t.Errorf("%s reports Leading too", other.name)
			}
			a.requireRunning(t)
		})
	}
}

// TestHandOverOnStop: a leader asked to stop waits for lead to return, then
// releases the Lease, and the standby takes it at once instead of after a
// lease duration. The stopped candidate never takes the Lease again.
func TestHandOverOnStop(t *testing.T) {
	api := newFakeAPI()
	a := start(t, newFront(t, api), "pod-a")
	a.waitLead(t, 5*time.Second)
	b := start(t, newFront(t, api), "pod-b")
	b.waitRead(t)
	defer overlapWatch(t, a, b)()

	a.stop()
	stopped := time.Now()
	end := a.waitEnd(t, 5*time.Second)
	if end.err != nil {
		t.Fatalf("pod-a Run returned %v, want nil", end.err)
	}
	var drained time.Time
	select {
	case drained = <-a.drained:
	default:
		t.Fatal("pod-a's Run returned before its lead did")
	}
	bLed := b.waitLead(t, 5*time.Second)
	if !bLed.After(drained) {
		t.Errorf("pod-b led at %v, before pod-a's lead returned at %v", bLed, drained)
	}
	// At once: at the standby's next try, at most 2.2 retry periods.
	if gap := bLed.Sub(end.at); gap > testLeaseDuration/2 {
		t.Errorf("pod-b led %v after pod-a released the lease, want within %v", gap, testLeaseDuration/2)
	}
	t.Logf("pod-a stopped, drained for %v and released; pod-b led %v after the release, %v after the stop", drained.Sub(stopped).Round(time.Millisecond), bLed.Sub(end.at).Round(time.Millisecond), bLed.Sub(stopped).Round(time.Millisecond))
	for range 3 * int(testLeaseDuration/testRetryPeriod) / 2 {
		b.waitRenewal(t, api)
	}
	if spec := storedSpec(t, api); spec["leaseTransitions"] != float64(1) {
		t.Errorf("lease spec %v, want 1 transition", spec)
	}
}

// TestStandbyTakesAReleasedLeaseAtOnce, but not a Lease whose holder was
// emptied by hand.
func TestStandbyTakesAReleasedLeaseAtOnce(t *testing.T) {
	tests := []struct {
		name         string
		durationSecs float64
		wantPatience bool
	}{
		{"released by its holder", releasedDurationSeconds, false},
		{"holder emptied by hand", 12, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			api.put(testLease, map[string]interface{}{
				"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
				"metadata": map[string]interface{}{"name": testLease, "namespace": testNamespace},
				"spec":     map[string]interface{}{"holderIdentity": "", "leaseDurationSeconds": tt.durationSecs, "renewTime": "2026-11-29T12:00:00.000000Z", "leaseTransitions": float64(4)},
			})
			began := time.Now()
			c := start(t, newFront(t, api), "pod-b")
			waited := c.waitLead(t, 5*time.Second).Sub(began)
			if tt.wantPatience && waited < testLeaseDuration || !tt.wantPatience && waited >= testLeaseDuration/2 {
				t.Errorf("took the lease after %v; lease duration %v, patience wanted: %t", waited, testLeaseDuration, tt.wantPatience)
			}
			if spec := storedSpec(t, api); spec["holderIdentity"] != "pod-b" || spec["leaseTransitions"] != float64(5) {
				t.Errorf("lease spec %v, want holder pod-b after 5 transitions", spec)
			}
		})
	}
}

// TestRestartedLeaderResumesItsLease: a new process with the identity of
// the holder, as a container the kubelet restarts in the same pod, leads at
// once instead of waiting for the lease to expire.
func TestRestartedLeaderResumesItsLease(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	f.createLease(t, "pod-a", time.Now(), 0)
	c := start(t, f, "pod-a")
	c.waitLead(t, testLeaseDuration/2)
}

// TestMissingLeaseIsCreatedAfterALeaseDuration: a first candidate, finding
// no Lease, cannot tell a new installation from a deleted Lease whose leader
// has not noticed yet, so it waits as after a deletion.
func TestMissingLeaseIsCreatedAfterALeaseDuration(t *testing.T) {
	api := newFakeAPI()
	began := time.Now()
	c := start(t, newFront(t, api), "pod-a")
	if waited := c.waitLead(t, 5*time.Second).Sub(began); waited < testLeaseDuration {
		t.Errorf("created the lease after %v, before the lease duration %v", waited, testLeaseDuration)
	}
	if spec := storedSpec(t, api); spec["holderIdentity"] != "pod-a" {
		t.Errorf("lease spec %v, want holder pod-a", spec)
	}
}

func TestStandbyWaitsForAnUnexpiredLease(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	f.createLease(t, "pod-gone", time.Now(), 0)
	began := time.Now()
	c := start(t, f, "pod-b")
	if led := c.waitLead(t, 5*time.Second); led.Sub(began) < testLeaseDuration {
		t.Errorf("took the lease of another holder after %v, before the lease duration %v", led.Sub(began), testLeaseDuration)
	}
}

func TestCheck(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	lock := f.lock(t, "pod-a")
	e, err := New(Config{Lock: lock, LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Check(); err == nil || !strings.Contains(err.Error(), "not read yet") {
		t.Errorf("before any request: got %v, want not read yet", err)
	}
	f.forbid.Store(true)
	if _, err := lock.Get(); err == nil {
		t.Fatal("Get succeeded through a front that forbids it")
	}
	if err := e.Check(); err == nil || !strings.Contains(err.Error(), "Forbidden") || strings.Contains(err.Error(), "serviceaccount") {
		t.Errorf("forbidden: got %v, want an error that says Forbidden and nothing of the API's message", err)
	}
	f.forbid.Store(false)
	if rec, err := lock.Get(); err != nil || rec.HolderIdentity != "" {
		t.Fatalf("Get of a missing lease: got %+v, %v; want a record held by nobody", rec, err)
	}
	if err := e.Check(); err != nil {
		t.Errorf("after a NotFound answer: got %v, want ready", err)
	}
	lock.mu.Lock()
	lock.answeredAt = time.Now().Add(-2 * testLeaseDuration)
	lock.mu.Unlock()
	if err := e.Check(); err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("after a lease duration without an answer: got %v, want no answer", err)
	}
}

func TestNewRejectsTimings(t *testing.T) {
	lock := newFront(t, newFakeAPI()).lock(t, "pod-a")
	tests := []struct {
		name                      string
		lease, renew, retry, stop time.Duration
		wantErr                   string
	}{
		{"renew deadline not shorter than the lease", 10 * time.Second, 10 * time.Second, time.Second, 0, "leaseDuration must be greater than renewDeadline"},
		{"retry period too long for the deadline", 10 * time.Second, 2 * time.Second, 2 * time.Second, 0, "renewDeadline must be greater than retryPeriod*JitterFactor"},
		{"no time to stop after the deadline", 12 * time.Second, 11 * time.Second, time.Second, time.Second, "leaves 750ms after the renew deadline 11s"},
		{"ok", 12 * time.Second, 8 * time.Second, time.Second, time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Lock: lock, LeaseDuration: tt.lease, RenewDeadline: tt.renew, RetryPeriod: tt.retry, StopTime: tt.stop})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestLeadReturningReleasesTheLease: when lead gives up by itself, nothing
// writes any more, so Run releases the Lease before it returns lead's error.
func TestLeadReturningReleasesTheLease(t *testing.T) {
	api := newFakeAPI()
	newFront(t, api).createLease(t, "pod-a", time.Now(), 0)
	e, err := New(Config{Lock: newFront(t, api).lock(t, "pod-a"), LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod, StopTime: testStopTime})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("caches never synced")

	err = e.Run(context.Background(), func(context.Context) error { return boom })

	if !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want %v", err, boom)
	}
	if spec := storedSpec(t, api); spec["holderIdentity"] != "" || spec["leaseDurationSeconds"] != float64(releasedDurationSeconds) {
		t.Errorf("lease spec %v, want released", spec)
	}
}

// TestMayWriteStopsBeforeAnotherCanLead: while the leader's renewals stall,
// MayWrite refuses from RenewDeadline less RetryPeriod after its last
// renewal on, so no write leaves it after its own deadline, and none is
// allowed once the standby can lead.
func TestMayWriteStopsBeforeAnotherCanLead(t *testing.T) {
	api := newFakeAPI()
	fa, fb := newFront(t, api), newFront(t, api)
	a := start(t, fa, "pod-a")
	a.waitLead(t, 5*time.Second)
	if err := a.elector.MayWrite(); err != nil {
		t.Fatalf("MayWrite while leading: %v", err)
	}
	b := start(t, fb, "pod-b")
	defer overlapWatch(t, a, b)()

	// Ask as a worker would before each write, until b leads.
	var lastAllowed time.Time
	stop := make(chan struct{})
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		for {
			select {
			case <-stop:
				return
			default:
			}
			at := time.Now() // before the call: MayWrite's own clock is later
			if a.elector.MayWrite() == nil {
				lastAllowed = at
			}
			time.Sleep(time.Millisecond) // the pace of the asking, not a wait for a result
		}
	}()
	fa.pause()
	a.waitLoss(t, 5*time.Second)
	bLed := b.waitLead(t, 5*time.Second)
	close(stop)
	<-asked

	renewed := a.elector.cfg.Lock.RenewedAt()
	if err := a.elector.MayWrite(); !errors.Is(err, ErrMayNotWrite) {
		t.Errorf("MayWrite after the loss: got %v, want ErrMayNotWrite", err)
	}
	if limit := testRenewDeadline - testRetryPeriod; lastAllowed.Sub(renewed) > limit {
		t.Errorf("a write was allowed %v after the last renewal, want at most %v", lastAllowed.Sub(renewed), limit)
	}
	if !lastAllowed.Before(bLed) {
		t.Errorf("a write was allowed at %v, after pod-b led at %v", lastAllowed, bLed)
	}
}

// TestLeadsAgainAfterALoss: a leader whose requests stall past its renew
// deadline stops leading but stays up as a standby; the other candidate
// takes over, and when it hands over, the first leads again, with writes
// allowed again. Never do both lead at once.
func TestLeadsAgainAfterALoss(t *testing.T) {
	api := newFakeAPI()
	fa := newFront(t, api)
	a := start(t, fa, "pod-a")
	a.waitLead(t, 5*time.Second)
	b := start(t, newFront(t, api), "pod-b")
	b.waitRead(t)
	defer overlapWatch(t, a, b)()

	fa.pause()
	a.waitLoss(t, 5*time.Second)
	b.waitLead(t, 5*time.Second)
	fa.resume()
	// pod-a stands by while pod-b renews, for several lease durations.
	for range 3 * int(testLeaseDuration/testRetryPeriod) {
		b.waitRenewal(t, api)
	}
	select {
	case <-a.led:
		t.Fatal("pod-a leads again while pod-b renews the lease")
	default:
	}
	a.requireRunning(t)
	if err := a.elector.MayWrite(); !errors.Is(err, ErrMayNotWrite) {
		t.Errorf("MayWrite of the standby pod-a: got %v, want ErrMayNotWrite", err)
	}

	b.stop() // pod-b hands over: it releases the Lease, which pod-a takes at once
	released := b.waitEnd(t, 5*time.Second)
	if released.err != nil {
		t.Fatalf("pod-b Run returned %v, want nil", released.err)
	}
	again := a.waitLead(t, 5*time.Second)
	if gap := again.Sub(released.at); gap > testLeaseDuration/2 {
		t.Errorf("pod-a led again %v after pod-b released the lease, want at once", gap)
	}
	a.waitRenewal(t, api)
	if !a.elector.Leading() {
		t.Error("pod-a does not report Leading once it leads again")
	}
	if err := a.elector.MayWrite(); err != nil {
		t.Errorf("MayWrite once pod-a leads again: %v", err)
	}
	if spec := storedSpec(t, api); spec["holderIdentity"] != "pod-a" || spec["leaseTransitions"] != float64(2) {
		t.Errorf("lease spec %v, want holder pod-a after 2 transitions", spec)
	}
}

// TestNoResumeAfterALoss: a process that lost the Lease does not take it
// back at once when it reads its own name on it, as a restarted container
// does on its first read (TestRestartedLeaderResumesItsLease): another
// candidate may have waited a lease duration on that record and be about to
// take it. It waits a lease duration from when it can read the Lease again.
func TestNoResumeAfterALoss(t *testing.T) {
	api := newFakeAPI()
	fa := newFront(t, api)
	a := start(t, fa, "pod-a")
	a.waitLead(t, 5*time.Second)

	fa.pause()
	a.waitLoss(t, 5*time.Second)
	resumed := time.Now()
	fa.resume()
	if spec := storedSpec(t, api); spec["holderIdentity"] != "pod-a" {
		t.Fatalf("lease spec %v, want it still naming pod-a", spec)
	}
	again := a.waitLead(t, 5*time.Second)
	if waited := again.Sub(resumed); waited < testLeaseDuration {
		t.Errorf("pod-a led again %v after it could read its own lease again, before the lease duration %v", waited, testLeaseDuration)
	}
	a.requireRunning(t)
}
