package stub

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
)

// TestRunAgainReconcilesEveryMemcached: Run can be called again after its
// context ended, as for a leader's next term. Between two calls the handler
// keeps what the SDK delivers but queues nothing, and each call starts with
// a pass over every Memcached it knows, as they are now, and takes what
// Handle queues while it runs.
func TestRunAgainReconcilesEveryMemcached(t *testing.T) {
	a, b, c := memcachedtest.NewMemcached("a", 1), memcachedtest.NewMemcached("b", 1), memcachedtest.NewMemcached("c", 1)
	objects := append(append(inSync(a, 1), inSync(b, 1)...), inSync(c, 1)...)
	f := newFixture(t, objects...)
	// c is created during the second term: the SDK has not delivered it yet.
	f.handler.memcacheds.delete("test/c")
	reconciled := make(chan struct{}, 100)
	f.handler.ObserveReconciles(func(time.Duration, error) { reconciled <- struct{}{} })

	// term runs Run until it has reconciled n Memcacheds, more, if
	// given, being handled once it has started, then ends it and returns
	// what the client was asked meanwhile.
	term := func(n int, more ...*sdk.Event) []string {
		t.Helper()
		f.client.actions = nil
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.handler.Run(ctx, 1)
		}()
		for _, e := range more {
			if err := f.handler.Handle(ctx, *e); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			select {
			case <-reconciled:
			case <-time.After(5 * time.Second):
				cancel()
				<-done
				t.Fatalf("%d of %d reconciles within 5s; actions %v", i, n, f.client.actions)
			}
		}
		cancel()
		<-done
		return f.client.actions
	}
	reconciledKeys := func(actions []string) []string {
		var keys []string
		for _, a := range actions {
			if key, ok := strings.CutPrefix(a, "get deployment "); ok && !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		return keys
	}

	if got, want := reconciledKeys(term(2)), []string{"test/a", "test/b"}; !slices.Equal(got, want) {
		t.Errorf("first term reconciled %v, want %v", got, want)
	}

	// Between the terms, as while standing by: a change is kept, not queued.
	f.client.actions = nil
	bigger := a.DeepCopy()
	bigger.Spec.Size = 3
	bigger.ResourceVersion = "2"
	if err := f.handler.Handle(context.Background(), sdk.Event{Object: bigger}); err != nil {
		t.Fatal(err)
	}
	f.handler.EnqueueMemcached("test", "b")
	if n := f.handler.work().Len(); n != 0 {
		t.Errorf("%d keys queued between two terms, want none", n)
	}
	if len(f.client.actions) != 0 || len(reconciled) != 0 {
		t.Fatalf("reconciled between two terms: %v", f.client.actions)
	}

	actions := term(3, &sdk.Event{Object: c.DeepCopy()})
	if got, want := reconciledKeys(actions), []string{"test/a", "test/b", "test/c"}; !slices.Equal(got, want) {
		t.Errorf("second term reconciled %v, want %v", got, want)
	}
	if !slices.Contains(actions, "scale deployment test/a 3") {
		t.Errorf("second term's actions %v, want the change made between the terms applied", actions)
	}
	if n := f.handler.work().Len(); n != 0 {
		t.Errorf("%d keys left in the queue of a finished term, want none", n)
	}
}
