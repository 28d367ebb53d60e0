package leader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
)

// ErrLeaseLost is returned by Run when this process stops being the leader.
var ErrLeaseLost = errors.New("lost the leader lease")

// Config are an Elector's lock and timings.
//
// A standby takes over at most about LeaseDuration + 2×2.2×RetryPeriod after
// the leader's last renewal: it waits LeaseDuration from when it saw the
// last renewal, and it looks every RetryPeriod with client-go's jitter of up
// to 1.2 periods more. The leader gives up RenewDeadline after its last
// successful renewal, which must leave it time to stop before LeaseDuration
// runs out.
type Config struct {
	// Lock is the Lease the candidates compete for.
	Lock *LeaseLock
	// LeaseDuration is how long a standby waits, after it saw the last
	// renewal, before it takes the Lease.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leading. It must be shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to take the Lease and the
	// leader renews it.
	RetryPeriod time.Duration
}

// Elector runs the operator's work in the one replica that holds the Lease.
type Elector struct {
	cfg     Config
	leading atomic.Bool
}

// New returns an Elector for cfg, or the reason cfg cannot work.
func New(cfg Config) (*Elector, error) {
	if cfg.Lock == nil {
		return nil, errors.New("leader election needs a lock")
	}
	// client-go checks the timings the same way, but only once Run has
	// started; check them here, where the caller can report them.
	if _, err := leaderelection.NewLeaderElector(cfg.electionConfig(leaderelection.LeaderCallbacks{})); err != nil {
		return nil, fmt.Errorf("invalid leader election timings: %v", err)
	}
	return &Elector{cfg: cfg}, nil
}

func (c Config) electionConfig(callbacks leaderelection.LeaderCallbacks) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:          c.Lock,
		LeaseDuration: c.LeaseDuration,
		RenewDeadline: c.RenewDeadline,
		RetryPeriod:   c.RetryPeriod,
		Callbacks:     callbacks,
	}
}

// Run takes part in the election until ctx is done, and runs lead once this
// process holds the Lease. It returns nil when ctx is done, lead's error if
// lead returns while ctx is not done, and an error wrapping ErrLeaseLost as
// soon as this process may no longer be the leader.
//
// When Run returns ErrLeaseLost, the caller must end the process at once,
// without waiting for lead: the operator-sdk's informers and workers cannot
// be stopped any other way, and another replica may take the Lease as soon as
// LeaseDuration has passed since the last renewal. Run reports the loss no
// later than RenewDeadline plus RetryPeriod/4 after the last successful
// renewal was sent, even when a request to the API server hangs: besides
// client-go's elector, which notices only between requests, a watchdog
// checks the time of the last renewal. The process then has at least
// LeaseDuration - RenewDeadline - RetryPeriod/4 to exit.
//
// A standby that is asked to stop leaves client-go 1.11's elector running,
// since it has no way to stop; call Run once per process.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	done := make(chan error, 3)
	lock := e.cfg.Lock
	elector, err := leaderelection.NewLeaderElector(e.cfg.electionConfig(leaderelection.LeaderCallbacks{
		OnStartedLeading: func(<-chan struct{}) {
			e.leading.Store(true)
			logrus.Infof("leading: this process (%s) holds lease %s", lock.Identity(), lock.Describe())
			go e.watch(ctx, done)
			done <- lead(ctx)
		},
		OnStoppedLeading: func() {
			e.leading.Store(false)
			done <- fmt.Errorf("%w %s: not renewed within %v", ErrLeaseLost, lock.Describe(), e.cfg.RenewDeadline)
		},
		OnNewLeader: func(identity string) {
			if identity != lock.Identity() {
				logrus.Infof("standing by: %s holds lease %s", identity, lock.Describe())
			}
		},
	}))
	if err != nil {
		return fmt.Errorf("invalid leader election timings: %v", err)
	}
	logrus.Infof("waiting for lease %s as %s", lock.Describe(), lock.Identity())
	go elector.Run()
	select {
	case <-ctx.Done():
		return nil
	case err := <-done:
		if errors.Is(err, ErrLeaseLost) {
			e.leading.Store(false)
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("the operator stopped while leading")
		}
		return err
	}
}

// watch reports ErrLeaseLost on done when the leader has not renewed for
// longer than RenewDeadline, until ctx is done.
func (e *Elector) watch(ctx context.Context, done chan<- error) {
	tick := time.NewTicker(e.cfg.RetryPeriod / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if since := time.Since(e.cfg.Lock.RenewedAt()); since > e.cfg.RenewDeadline {
				e.leading.Store(false)
				done <- fmt.Errorf("%w %s: last renewal sent %v ago, renew deadline %v", ErrLeaseLost, e.cfg.Lock.Describe(), since.Round(time.Millisecond), e.cfg.RenewDeadline)
				return
			}
		}
	}
}

// Leading reports whether this process holds the Lease.
func (e *Elector) Leading() bool {
	return e.leading.Load()
}

// Check is the readiness of a candidate: nil while the API server answers
// about the Lease, so that this replica is leading or is a standby that can
// take over; an error once it has not answered for LeaseDuration, or has
// never answered. The error names no address or object content.
func (e *Elector) Check() error {
	at, err := e.cfg.Lock.Answered()
	since := time.Since(at)
	switch {
	case at.IsZero() && err != nil:
		return fmt.Errorf("cannot read lease %s yet (%s)", e.cfg.Lock.Describe(), reason(err))
	case at.IsZero():
		return fmt.Errorf("lease %s not read yet", e.cfg.Lock.Describe())
	case since > e.cfg.LeaseDuration && err != nil:
		return fmt.Errorf("no answer about lease %s for %v (%s)", e.cfg.Lock.Describe(), since.Round(time.Second), reason(err))
	case since > e.cfg.LeaseDuration:
		return fmt.Errorf("no answer about lease %s for %v", e.cfg.Lock.Describe(), since.Round(time.Second))
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
