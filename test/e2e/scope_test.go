package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestOneOperatorThreeNamespaces: one operator process, in a namespace of its
// own with its Lease there, watches three namespaces (a WATCH_NAMESPACE list,
// each with deploy/rbac.yaml's Role alone) and serves them all: it creates each
// one's Memcached, scales one, restores replicas edited on another's
// Deployment, lets a deleted one's children go, and keeps serving the others
// when a namespace is deleted with its Memcached. A Memcached in a fourth
// namespace, which it does not watch, gets no children and no status.
func TestOneOperatorThreeNamespaces(t *testing.T) {
	t.Parallel()
	prefix := slug(t.Name())
	op := newNamespace(t, prefix+"-op")
	a := newNamespace(t, prefix+"-a")
	b := newNamespace(t, prefix+"-b")
	c := newNamespace(t, prefix+"-c")
	outside := newNamespace(t, prefix+"-out")
	op.serve(a, b, c)
	op.startOperator("--leader-elect")
	outside.createMemcached("cache", 1)
	for _, ns := range []*namespace{a, b, c} {
		ns.createMemcached("cache", 2)
	}
	before := map[string]framework.Observed{}
	for _, ns := range []*namespace{a, b, c} {
		before[ns.name] = ns.waitConverged("cache", 2)
	}
	op.eventually("the Lease in the operator's own namespace", func(ctx context.Context) error {
		holder, err := op.kubectl.Run(ctx, "get", "lease", "memcached-operator", "-o", "jsonpath={.spec.holderIdentity}")
		if err != nil || holder == "" {
			return fmt.Errorf("no holder of lease %s/memcached-operator: %q, %v", op.name, holder, err)
		}
		return nil
	})
	for _, ns := range []*namespace{a, b, c} {
		if ns.exists("lease", "memcached-operator") {
			t.Errorf("watched namespace %s holds a Lease memcached-operator; want it in %s alone", ns.name, op.name)
		}
	}

	ok := t.Run("scale, drift and delete in three namespaces", func(t *testing.T) {
		a, b, c := a.withT(t), b.withT(t), c.withT(t)
		a.scale("cache", 3)
		gen := before[b.name].Deployment.Metadata.Generation
		b.run("scale", "deployment/cache", "--replicas=5")
		c.run("delete", "memcached", "cache", "--wait=true")

		a.waitConverged("cache", 3)
		// The edit and the operator's restore each bump the Deployment's generation.
		b.eventually("the operator to restore replicas 2 after the edit to 5", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, b.kubectl, "cache")
			if err != nil {
				return err
			}
			if o.Deployment == nil || o.Deployment.Metadata.Generation < gen+2 {
				return fmt.Errorf("deployment generation is still below %d (edit and restore)", gen+2)
			}
			return framework.Converged(o, 2)
		})
		c.eventually("deployment cache to be collected in "+c.name, func(ctx context.Context) error {
			out, err := c.kubectl.Run(ctx, "get", "deployment", "cache", "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if out != "" {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
	})
	if !ok {
		return
	}
	ok = t.Run("a namespace deleted with its Memcached leaves the others served", func(t *testing.T) {
		a, b := a.withT(t), b.withT(t)
		b.run("delete", "memcached", "cache", "--wait=false")
		op.withT(t).eventually("namespace "+b.name+" to be deleted with its Memcached", func(ctx context.Context) error {
			if _, err := cluster.Kubectl().Run(ctx, "delete", "namespace", b.name, "--wait=false", "--ignore-not-found"); err != nil {
				return err
			}
			out, err := cluster.Kubectl().Run(ctx, "get", "namespace", b.name, "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if out != "" {
				return fmt.Errorf("namespace %s is still there", b.name)
			}
			return nil
		})
		a.scale("cache", 1)
		if o := a.waitConverged("cache", 1); o.Deployment.Metadata.UID != before[a.name].Deployment.Metadata.UID {
			t.Errorf("deployment %s/cache was replaced", a.name)
		}
		if !op.operator.Running() {
			t.Errorf("the operator exited after namespace %s was deleted", b.name)
		}
	})
	if !ok {
		return
	}
	t.Run("a Memcached outside the watched namespaces is left alone", func(t *testing.T) {
		// By now the operator has listed, created, scaled, restored and seen
		// deletions in the watched namespaces, all after this Memcached was
		// created: had it watched it, it would have acted on it long since.
		o := outside.withT(t).snapshot("cache")
		if o.Deployment != nil || len(o.Pods) > 0 || o.Memcached.Status.Nodes != nil || o.Memcached.Status.Conditions != nil {
			t.Errorf("unwatched namespace %s changed: deployment %v, %d pods, status %+v", outside.name, o.Deployment != nil, len(o.Pods), o.Memcached.Status)
		}
	})
}
