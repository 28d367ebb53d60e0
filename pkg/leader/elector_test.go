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

// candidate is one replica taking part in an election in a test.
type candidate struct {
	elector *Elector
	// led receives the time lead was called.
	led chan time.Time
	// ended receives Run's error and the time it returned.
	ended chan result
}

type result struct {
	err error
	at  time.Time
}

// start runs an election for identity through f until the test ends.
func start(t *testing.T, f *front, identity string) *candidate {
	t.Helper()
	e, err := New(Config{
		Lock:          f.lock(t, identity),
		LeaseDuration: testLeaseDuration,
		RenewDeadline: testRenewDeadline,
		RetryPeriod:   testRetryPeriod,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{elector: e, led: make(chan time.Time, 1), ended: make(chan result, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		err := e.Run(ctx, func(ctx context.Context) error {
			c.led <- time.Now()
			<-ctx.Done()
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
		t.Fatalf("Run returned %v before leading", r.err)
	case <-time.After(timeout):
		t.Fatalf("not leading after %v", timeout)
	}
	return time.Time{}
}

// TestOneLeaderThenFailover: of two candidates only the first leads while it
// renews. When its requests to the API server hang, it reports the loss of
// the Lease before the other can take it, and the other takes it.
func TestOneLeaderThenFailover(t *testing.T) {
	api := newFakeAPI()
	fa, fb := newFront(t, api), newFront(t, api)
	a := start(t, fa, "pod-a")
	a.waitLead(t, 5*time.Second)
	b := start(t, fb, "pod-b")

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

	fa.cut.Store(true) // pod-a's requests now hang, as in a partition
	var lost result
	select {
	case lost = <-a.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("pod-a did not report the loss of the lease")
	}
	if !errors.Is(lost.err, ErrLeaseLost) {
		t.Fatalf("pod-a Run returned %v, want ErrLeaseLost", lost.err)
	}
	renewed := a.elector.cfg.Lock.RenewedAt()
	// The watchdog reports within the renew deadline plus a tick; the
	// property that matters is that it is before the lease can expire.
	if late := lost.at.Sub(renewed); late < testRenewDeadline || late >= testLeaseDuration {
		t.Errorf("pod-a reported the loss %v after its last renewal, want between the renew deadline %v and the lease duration %v", late, testRenewDeadline, testLeaseDuration)
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
	spec := api.lease(testLease)["spec"].(map[string]interface{})
	if spec["holderIdentity"] != "pod-b" || spec["leaseTransitions"] != float64(1) {
		t.Errorf("lease spec %v, want holder pod-b after 1 transition", spec)
	}
}

// TestRestartedLeaderResumesItsLease: a new process with the identity of
// the holder, as a container the kubelet restarts in the same pod, leads at
// once instead of waiting for the lease to expire.
func TestRestartedLeaderResumesItsLease(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	if err := f.lock(t, "pod-a").Create(electionRecord("pod-a", time.Now(), 0)); err != nil {
		t.Fatal(err)
	}
	c := start(t, f, "pod-a")
	c.waitLead(t, testLeaseDuration/2)
}

func TestStandbyWaitsForAnUnexpiredLease(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	if err := f.lock(t, "pod-gone").Create(electionRecord("pod-gone", time.Now(), 0)); err != nil {
		t.Fatal(err)
	}
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
	if _, err := lock.Get(); err == nil {
		t.Fatal("Get of a missing lease succeeded")
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
		name                string
		lease, renew, retry time.Duration
		wantErr             string
	}{
		{"renew deadline not shorter than the lease", 10 * time.Second, 10 * time.Second, time.Second, "leaseDuration must be greater than renewDeadline"},
		{"retry period too long for the deadline", 10 * time.Second, 2 * time.Second, 2 * time.Second, "renewDeadline must be greater than retryPeriod*JitterFactor"},
		{"ok", 12 * time.Second, 8 * time.Second, time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Lock: lock, LeaseDuration: tt.lease, RenewDeadline: tt.renew, RetryPeriod: tt.retry})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}
