package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestTenantRoles applies deploy/tenant-roles.yaml and binds two users in a
// namespace to Kubernetes' built-in roles only: alice to edit, bob to view. Once
// kube-controller-manager has aggregated the roles, alice creates a Memcached and
// scales it through the scale subresource, and the operator serves the new size;
// bob reads it but is refused a change. Neither may write the status, which only
// the operator writes, and a user with no binding may not even read. Every
// refusal is the API server's answer to a real request. The operator, with
// --leader-elect, runs in a namespace of its own (POD_NAMESPACE) and watches
// the tenants': its Lease is there, out of alice's reach, and a Lease of the
// same name that alice, whom Kubernetes' edit role grants Leases, makes in her
// namespace leaves the operator leading and serving.
func TestTenantRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	op := newNamespace(t, slug(t.Name())+"-op")
	op.serve(ns)
	op.startOperator("--leader-elect")
	if _, err := cluster.Kubectl().Run(ctx, "apply", "-f", paths.Deploy("tenant-roles.yaml")); err != nil {
		t.Fatal(err)
	}
	ns.run("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")
	ns.run("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob")

	as := func(user string, args ...string) (string, error) {
		return ns.kubectl.Run(ctx, append([]string{"--as=" + user}, args...)...)
	}
	// can answers whether user may do verb on resource, as the API server's
	// authorizer says; `kubectl auth can-i` exits 1 for "no".
	can := func(ctx context.Context, user, verb, resource string) (bool, error) {
		out, err := ns.kubectl.Run(ctx, "--as="+user, "auth", "can-i", verb, resource)
		switch strings.TrimSpace(out) {
		case "yes":
			return true, nil
		case "no":
			return false, nil
		}
		return false, fmt.Errorf("kubectl auth can-i %s %s as %s: %q, %v", verb, resource, user, out, err)
	}
	ns.eventually("the built-in edit and view roles to aggregate the Memcached roles", func(ctx context.Context) error {
		for _, c := range []struct{ user, verb, resource string }{
			{"alice", "create", "memcacheds.cache.example.com"},
			{"alice", "update", "memcacheds.cache.example.com/scale"},
			{"bob", "list", "memcacheds.cache.example.com"},
		} {
			if ok, err := can(ctx, c.user, c.verb, c.resource); err != nil || !ok {
				return fmt.Errorf("%s may not %s %s yet (%v)", c.user, c.verb, c.resource, err)
			}
		}
		return nil
	})

	if _, err := ns.kubectl.RunWithInput(ctx, `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: tenant
spec:
  size: 1
`, "--as=alice", "create", "-f", "-"); err != nil {
		t.Fatalf("alice (edit) creates a Memcached: %v", err)
	}
	// edit grants Leases in alice's namespace: one named as the operator's,
	// held by her, is hers alone.
	if _, err := ns.kubectl.RunWithInput(ctx, `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: memcached-operator
spec:
  holderIdentity: alice
  leaseDurationSeconds: 3600
`, "--as=alice", "create", "-f", "-"); err != nil {
		t.Fatalf("alice (edit) creates a Lease in her namespace: %v", err)
	}
	if _, err := as("alice", "scale", "memcached/tenant", "--replicas=2"); err != nil {
		t.Fatalf("alice (edit) scales it: %v", err)
	}
	ns.waitConverged("tenant", 2)

	refused := func(user, what string, args ...string) {
		t.Helper()
		out, err := as(user, args...)
		if err == nil || !strings.Contains(out+err.Error(), "forbidden") {
			t.Errorf("%s %s: %q, %v; want Forbidden", user, what, out, err)
		}
	}
	if out, err := as("bob", "get", "memcached", "tenant", "-o", "name"); err != nil || strings.TrimSpace(out) != "memcached.cache.example.com/tenant" {
		t.Errorf("bob (view) reads the Memcached: %q, %v", out, err)
	}
	refused("bob", "(view) scales it", "scale", "memcached/tenant", "--replicas=3")
	refused("bob", "(view) deletes it", "delete", "memcached", "tenant", "--wait=false")
	for _, user := range []string{"alice", "bob"} {
		refused(user, "writes the status", "patch", "memcached", "tenant", "--subresource=status", "--type=merge", "-p", `{"status":{"nodes":["forged"]}}`)
	}
	refused("carol", "(no binding) reads the Memcached", "get", "memcached", "tenant")
	// The operator's Lease is in its own namespace, held by the operator,
	// and alice may neither change it nor make one there.
	if holder, err := op.kubectl.Run(ctx, "get", "lease", "memcached-operator", "-o", "jsonpath={.spec.holderIdentity}"); err != nil || holder == "" || holder == "alice" {
		t.Errorf("the operator's Lease in %s: holder %q, %v; want the operator", op.name, holder, err)
	}
	for _, verb := range []string{"get", "update", "create", "delete"} {
		if out, err := op.kubectl.Run(ctx, "--as=alice", "auth", "can-i", verb, "leases.coordination.k8s.io/memcached-operator"); strings.TrimSpace(out) != "no" {
			t.Errorf("alice (edit in %s) may %s the operator's Lease in %s: %q, %v; want no", ns.name, verb, op.name, out, err)
		}
	}
	if out, err := op.kubectl.Run(ctx, "--as=alice", "annotate", "lease", "memcached-operator", "taken=by-alice"); err == nil || !strings.Contains(out+err.Error(), "forbidden") {
		t.Errorf("alice annotates the operator's Lease: %q, %v; want Forbidden", out, err)
	}
	if o := ns.snapshot("tenant"); len(o.Memcached.Status.Nodes) != 2 {
		t.Errorf("status.nodes = %q after the refused writes, want the 2 pods", o.Memcached.Status.Nodes)
	}
}
