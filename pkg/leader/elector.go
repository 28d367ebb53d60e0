package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
)

// ErrLeaseLost is the cause (context.Cause) of the end of a lead's context
// when this process may no longer be the leader.
var ErrLeaseLost = errors.New("lost the leader lease")

// Config are an Elector's lock and timings.
//
// A standby takes over at most about LeaseDuration + 2×2.2×RetryPeriod after
// the leader's last renewal: it waits LeaseDuration from when it saw the
// last renewal, and it looks every RetryPeriod with client-go's jitter of up
// to 1.2 periods more. The leader gives up RenewDeadline after its last
// successful renewal, and its watchdog notices within RetryPeriod/4; New
// requires that to leave StopTime before LeaseDuration runs out.
type Config struct {
	// Lock is the Lease the candidates compete for.
	Lock *LeaseLock
	// LeaseDuration is how long a standby waits, after it saw the last
	// change of the Lease (or saw it missing), before it takes the Lease.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leading. It must be shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to take the Lease and the
	// leader renews it.
	RetryPeriod time.Duration
	// StopTime is how long the process needs to stop writing once Run
	// has reported the loss of the Lease (see Run).
	StopTime time.Duration
}

// Elector runs the operator's work in the one replica that holds the Lease.
type Elector struct {
	cfg Config
	// term is the current term (see Run); nil before Run.
	term atomic.Pointer[term]
}

// term is one candidacy of this process: from waiting for the Lease to
// losing it, or to the end of Run. Each has a lock of its own, so that the
// elector of an earlier term, which client-go 1.11 cannot stop, never
// writes the Lease again.
type term struct {
	lock    *LeaseLock
	leading atomic.Bool
}

// current returns the current term, or a term of Config.Lock that does not
// lead before Run.
func (e *Elector) current() *term {
	if t := e.term.Load(); t != nil {
		return t
	}
	return &term{lock: e.cfg.Lock}
}

// New returns an Elector for cfg, or the reason cfg cannot work.
func New(cfg Config) (*Elector, error) {
	if cfg.Lock == nil {
		return nil, errors.New("leader election needs a lock")
	}
	// client-go checks the timings the same way, but only once Run has
	// started; check them here, where the caller can report them.
	if _, err := leaderelection.NewLeaderElector(cfg.electionConfig(cfg.Lock, leaderelection.LeaderCallbacks{})); err != nil {
		return nil, fmt.Errorf("invalid leader election timings: %v", err)
	}
	if margin := cfg.LeaseDuration - cfg.RenewDeadline - cfg.RetryPeriod/4; margin < cfg.StopTime {
		return nil, fmt.Errorf("invalid leader election timings: the lease duration %v leaves %v after the renew deadline %v and a quarter of the retry period %v, less than the stop time %v", cfg.LeaseDuration, margin, cfg.RenewDeadline, cfg.RetryPeriod, cfg.StopTime)
	}
	return &Elector{cfg: cfg}, nil
}

// electionConfig is client-go's configuration of an elector on lock.
func (c Config) electionConfig(lock *LeaseLock, callbacks leaderelection.LeaderCallbacks) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: c.LeaseDuration,
		RenewDeadline: c.RenewDeadline,
		RetryPeriod:   c.RetryPeriod,
		Callbacks:     callbacks,
	}
}

// Run takes part in the election until ctx is done, and runs lead each
// time this process holds the Lease: a term. It returns nil when ctx is
// done, and lead's error if lead returns while ctx is not done.
//
// A process that loses the Lease stands by and campaigns again; it does not
// exit, which would leave it to the kubelet's restart backoff. Run ends the
// term's context, with a cause that wraps ErrLeaseLost, as soon as this
// process may no longer be the leader, waits for lead to return (lead must
// stop its workers and wait for them, whose writes MayWrite already
// refuses), then waits for the Lease like any candidate. Run reports the
// loss
//   - at the first renewal that reads the Lease deleted, released by someone
//     else or held by another: within about RetryPeriod of the change;
//   - in any case no later than RenewDeadline plus RetryPeriod/4 after the
//     last successful renewal was sent, even when a request to the API server
//     hangs: besides client-go's elector, which notices only between
//     requests, a watchdog checks the time of the last renewal.
//
// Guarantee: two processes never lead at once, as long as a process stops
// writing within StopTime of the loss and clocks run at the same rate. A
// standby takes the Lease only after it has seen the same record (or no
// Lease) for LeaseDuration on its own clock (see LeaseLock), and every
// record it sees was written after the leader's last successful renewal was
// sent or is that renewal; New checks that LeaseDuration exceeds
// RenewDeadline + RetryPeriod/4 + StopTime. There are two exceptions. A
// Lease its holder released is taken at once: Run releases only after lead
// has returned. A process whose first read finds its own name on the Lease
// resumes it at once: that is a container the kubelet restarted in the pod
// of a leader that died. Only the first term of a process does: a later one
// reads its own name as another's and waits a lease duration, since the
// Lease it lost may be about to pass to a standby that has waited that long
// (TestNoResumeAfterALoss). What this does not cover: a release written by
// hand (an empty holder with leaseDurationSeconds 1), an edit by hand that
// names a process just as it starts, and changes that come and go between
// two reads of a candidate; until the old leader's next renewal, two could
// lead.
//
// When ctx is done, a leader hands over: Run waits for lead to return (lead
// must stop its workers and wait for their writes), then releases the Lease
// so that a standby takes it at once; so it does when lead returns by
// itself. A standby releases nothing but never takes the Lease afterwards.
// The electors of client-go 1.11 go on running, since they have no way to
// stop, but a term's lock refuses every request once the term is over; call
// Run once per process, and end it soon after Run returns.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	lock := e.cfg.Lock
	for {
		t := &term{lock: lock}
		e.term.Store(t)
		err := e.runTerm(ctx, t, lead)
		if !errors.Is(err, ErrLeaseLost) {
			return err
		}
		if ctx.Err() != nil {
			// Lost while handing over: lead has returned, nothing is left
			// to release.
			return nil
		}
		logrus.Infof("standing by: the workers have stopped; campaigning for lease %s again", lock.Describe())
		lock = lock.successor()
	}
}

// runTerm is one term of Run on t's lock: it returns nil when ctx is done,
// lead's error if lead returned by itself, or, once lead has returned, an
// error wrapping ErrLeaseLost when the Lease was lost.
func (e *Elector) runTerm(ctx context.Context, t *term, lead func(ctx context.Context) error) error {
	lock := t.lock
	// lost receives ErrLeaseLost from the watchdog and client-go's
	// elector; led receives lead's error. Both are buffered so that
	// nothing blocks once the term is over.
	lost := make(chan error, 2)
	led := make(chan error, 1)
	leadCtx, endLead := context.WithCancelCause(ctx)
	defer endLead(nil)
	watching, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	go lock.followChanges(watching)
	// stopping, once set, keeps a Lease acquired after the term ended from
	// starting lead; started says whether lead was started.
	var mu sync.Mutex
	stopping, started := false, false
	elector, err := leaderelection.NewLeaderElector(e.cfg.electionConfig(lock, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(<-chan struct{}) {
			mu.Lock()
			if stopping {
				mu.Unlock()
				return
			}
			started = true
			t.leading.Store(true)
			mu.Unlock()
			logrus.Infof("leading: this process (%s) holds lease %s", lock.Identity(), lock.Describe())
			go e.watch(watching, t, lost)
			led <- lead(leadCtx)
		},
		OnStoppedLeading: func() {
			t.leading.Store(false)
			lost <- fmt.Errorf("%w %s: not renewed within %v", ErrLeaseLost, lock.Describe(), e.cfg.RenewDeadline)
		},
		OnNewLeader: func(identity string) {
			switch identity {
			case lock.Identity():
			case "":
				logrus.Infof("standing by: lease %s has no holder", lock.Describe())
			default:
				logrus.Infof("standing by: %s holds lease %s", identity, lock.Describe())
			}
		},
	}))
	if err != nil {
		return fmt.Errorf("invalid leader election timings: %v", err)
	}
	// lose ends leading with err, keeps this term's lock from writing the
	// Lease again, without waiting for a request that may hang, ends
	// lead's context and waits for lead to return.
	lose := func(err error) error {
		t.leading.Store(false)
		lock.close(err)
		mu.Lock()
		stopping = true
		wait := started
		mu.Unlock()
		logrus.Warnf("%v; stopping the workers, then standing by", err)
		endLead(err)
		if wait {
			<-led
		}
		return err
	}
	fenced := func() error {
		return lose(fmt.Errorf("%w %s: %s", ErrLeaseLost, lock.Describe(), lock.LostReason()))
	}
	logrus.Infof("waiting for lease %s as %s", lock.Describe(), lock.Identity())
	go elector.Run()
	select {
	case <-ctx.Done():
	case <-lock.Lost():
		return fenced()
	case err := <-lost:
		return lose(err)
	case err := <-led:
		if ctx.Err() == nil {
			t.leading.Store(false)
			if err == nil {
				err = errors.New("the operator stopped while leading")
			}
			// lead has returned, so nothing writes any more: hand the
			// Lease over. Should that fail, the standby takes it after a
			// lease duration, and err is what the caller must see.
			_ = lock.Release()
			return err
		}
		led <- err
	}

	mu.Lock()
	stopping = true
	leading := started
	mu.Unlock()
	if leading {
		logrus.Infof("stopping: waiting for the workers, then releasing lease %s", lock.Describe())
		select {
		case <-led:
		case <-lock.Lost():
			return fenced()
		case err := <-lost:
			return lose(err)
		}
	}
	t.leading.Store(false)
	if err := lock.Release(); err != nil {
		return err
	}
	if leading {
		logrus.Infof("released lease %s", lock.Describe())
	}
	return nil
}

// watch reports ErrLeaseLost on done when t's leader has not renewed for
// longer than RenewDeadline, until ctx is done.
func (e *Elector) watch(ctx context.Context, t *term, done chan<- error) {
	tick := time.NewTicker(e.cfg.RetryPeriod / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if since := time.Since(t.lock.RenewedAt()); since > e.cfg.RenewDeadline {
				t.leading.Store(false)
				done <- fmt.Errorf("%w %s: last renewal sent %v ago, renew deadline %v", ErrLeaseLost, t.lock.Describe(), since.Round(time.Millisecond), e.cfg.RenewDeadline)
				return
			}
		}
	}
}

// Leading reports whether this process holds the Lease.
func (e *Elector) Leading() bool {
	return e.current().leading.Load()
}

// ErrMayNotWrite is wrapped by MayWrite's refusals.
var ErrMayNotWrite = errors.New("this process may not write as the leader")

// MayWrite returns nil while this process leads and its last renewal of
// the Lease was sent less than RenewDeadline less RetryPeriod ago; else an
// error that wraps ErrMayNotWrite. A standby takes the Lease no earlier
// than LeaseDuration after the leader's last renewal, and the leader gives
// up leading at RenewDeadline (see watch): a write that a reconcile starts
// after asking, a RetryPeriod before that, reaches the API server before
// another leader can write, while one that a stalled renewal would leave
// to an old leader is never sent.
func (e *Elector) MayWrite() error {
	t := e.current()
	if !t.leading.Load() {
		return fmt.Errorf("%w: it does not hold lease %s", ErrMayNotWrite, t.lock.Describe())
	}
	since := time.Since(t.lock.RenewedAt())
	if limit := e.cfg.RenewDeadline - e.cfg.RetryPeriod; since > limit {
		return fmt.Errorf("%w: its last renewal of lease %s was sent %v ago, more than %v", ErrMayNotWrite, t.lock.Describe(), since.Round(time.Millisecond), limit)
	}
	return nil
}

// Check is the readiness of a candidate: nil while the API server answers
// about the Lease, so that this replica is leading or is a standby that can
// take over; an error once it has not answered for LeaseDuration, or has
// never answered. The error names no address or object content.
func (e *Elector) Check() error {
	lock := e.current().lock
	at, err := lock.Answered()
	since := time.Since(at)
	switch {
	case at.IsZero() && err != nil:
		return fmt.Errorf("cannot read lease %s yet (%s)", lock.Describe(), reason(err))
	case at.IsZero():
		return fmt.Errorf("lease %s not read yet", lock.Describe())
	case since > e.cfg.LeaseDuration && err != nil:
		return fmt.Errorf("no answer about lease %s for %v (%s)", lock.Describe(), since.Round(time.Second), reason(err))
	case since > e.cfg.LeaseDuration:
		return fmt.Errorf("no answer about lease %s for %v", lock.Describe(), since.Round(time.Second))
	}
	return nil
}

// reason sums err up for /readyz: the API server's reason (Forbidden,
// ServiceUnavailable...), its status code, or "no response". The full error,
// which may hold the API server's address, goes to the log only.
func reason(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Code != 0 {
		return fmt.Sprintf("HTTP %d", status.Status().Code)
	}
	return "no response"
}
