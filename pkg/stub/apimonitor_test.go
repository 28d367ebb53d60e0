package stub

import (
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
)

func TestAPIMonitorAsksNothingWithoutDeletions(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, m)

	if err := f.handle(m, false); err != nil {
		t.Fatal(err)
	}

	for _, a := range f.client.actions {
		if a == "discover memcached api" {
			t.Errorf("actions %q ask discovery for a change, want only for deletions", f.client.actions)
		}
	}
}
