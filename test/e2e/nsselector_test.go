package e2e

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestNamespaceSelector: one operator process with WATCH_NAMESPACE="" (every
// namespace, deploy/cluster's ClusterRole) and --namespace-selector of a
// label that only this test's namespaces carry serves the two namespaces
// that carry it (create, scale) and leaves a Memcached in a third, created
// before the operator started, alone: no children and an empty status for
// untouchedWindow after the served ones converged. Once that namespace gets
// the label, its Memcached is served.
//
// It is also the suite's one test of the every-namespace scope on the
// cluster: an operator of every namespace without a selector would serve
// the Memcacheds of the tests that run beside it, so only the selector lets
// it run in parallel with them.
func TestNamespaceSelector(t *testing.T) {
	t.Parallel()
	prefix := slug(t.Name())
	op := newNamespace(t, prefix+"-op")
	a := newNamespace(t, prefix+"-a")
	b := newNamespace(t, prefix+"-b")
	later := newNamespace(t, prefix+"-later")
	// The operator's namespace has a random suffix: no other run's
	// namespace has this label.
	label := "e2e.cache.example.com/served-by=" + op.name
	a.label(label)
	b.label(label)
	later.createMemcached("cache", 1)
	op.serveAll()
	// No --leader-elect: a new Lease is taken only after a lease duration
	// (see leader.LeaseLock), which would double the test's time and prove
	// nothing of the selector; TestOneOperatorThreeNamespaces keeps its
	// Lease in its own namespace.
	op.startOperator("--namespace-selector=" + label)
	for _, ns := range []*namespace{a, b} {
		ns.createMemcached("cache", 2)
	}
	for _, ns := range []*namespace{a, b} {
		ns.waitConverged("cache", 2)
	}
	a.scale("cache", 3)
	a.waitConverged("cache", 3)

	// The operator's first reconciles, before any of a's and b's, took
	// every Memcached it knew, this one among them: had it served it, it
	// would have acted on it long since.
	err := framework.Consistently(context.Background(), untouchedWindow, "memcached "+later.name+"/cache left alone", func(ctx context.Context) error {
		o, err := framework.Observe(ctx, later.kubectl, "cache")
		if err != nil {
			return err
		}
		if o.Deployment != nil || len(o.Pods) > 0 || !reflect.DeepEqual(o.Memcached.Status, framework.Memcached{}.Status) {
			return fmt.Errorf("unlabelled namespace %s changed: deployment %v, %d pods, status %+v", later.name, o.Deployment != nil, len(o.Pods), o.Memcached.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if later.exists("service", "cache") {
		t.Errorf("unlabelled namespace %s got service cache", later.name)
	}

	later.label(label)
	later.waitConverged("cache", 1)
}
