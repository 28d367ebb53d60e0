package framework

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PollInterval is how often Eventually and Consistently check.
var PollInterval = 500 * time.Millisecond

// permanentError stops Eventually early.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks a check error as final: Eventually returns it at once instead of
// polling on.
func Permanent(err error) error { return permanentError{err} }

// Eventually calls check until it returns nil, returns a Permanent error, or timeout
// passes. A check reports "not yet" by returning an error that says what it saw, so
// a timeout reports the last observation, not just that time ran out.
func Eventually(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	return EventuallyEvery(ctx, timeout, PollInterval, what, check)
}

// EventuallyEvery is Eventually with its own poll interval, for a test that must
// catch a short-lived state.
func EventuallyEvery(ctx context.Context, timeout, interval time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	start := time.Now()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("%s: %w", what, perm.err)
		}
		// A check cut short by the deadline says nothing new; keep the one before.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last observation: %v", time.Since(start).Round(time.Second), what, last)
		case <-ticker.C:
		}
	}
}

// Consistently calls check for the whole window and fails on the first error. Use it
// for negative assertions ("nothing happens in the unwatched namespace"), with a
// window longer than the operator takes to act on a watch event, instead of a bare
// sleep.
func Consistently(ctx context.Context, window time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		if err := check(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // the window closed during the check
			}
			return fmt.Errorf("%s stopped holding: %v", what, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
