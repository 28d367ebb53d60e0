package stub

import (
	"errors"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
)

// TestNoWriteLeavesAProcessThatMayNotWrite: while the gate refuses, a
// reconcile that has something to create, scale and report sends none of
// it, records no Event, and is retried quietly; once the gate allows, the
// same reconcile writes.
func TestNoWriteLeavesAProcessThatMayNotWrite(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	refuse := errors.New("the last renewal of the Lease was sent 7.1s ago")
	gate := refuse
	f.handler.client = GateWrites(f.client, func() error { return gate })

	err := f.handle(m, false)

	if !errors.Is(err, ErrWritesStopped) || !IsStale(err) {
		t.Fatalf("reconcile: got %v, want a quiet retry wrapping ErrWritesStopped", err)
	}
	for _, a := range f.client.actions {
		if !strings.HasPrefix(a, "get ") && !strings.HasPrefix(a, "list ") && !strings.HasPrefix(a, "read ") {
			t.Errorf("a write was sent while the gate refused: %s", a)
		}
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none while the gate refuses", got)
	}

	gate = nil
	f.client.actions = nil
	if err := f.handle(m, false); err != nil {
		t.Fatalf("reconcile once the gate allows: %v", err)
	}
	if !strings.Contains(strings.Join(f.client.actions, ","), "create deployment test/example") {
		t.Errorf("actions %q, want the deployment created once the gate allows", f.client.actions)
	}
}
