package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestOwnerReferencesPermissionEnforcement shows that the local cluster runs
// the OwnerReferencesPermissionEnforcement admission plugin, as OpenShift
// does, so that no suite can pass without it, and that deploy/rbac.yaml
// grants what the plugin asks of the operator's children. The same Service,
// with a controller reference to a Memcached that blocks its deletion, is
// created by two ServiceAccounts that may both create Services:
//   - one that may not update memcacheds/finalizers is refused by the plugin,
//     and is allowed the Service once the reference does not block deletion,
//     so the refusal is the plugin's and not RBAC's on Services;
//   - the operator's, bound by deploy/rbac.yaml, is allowed.
func TestOwnerReferencesPermissionEnforcement(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "admission")
	ctx := context.Background()
	ns.createMemcached("owner", 1)
	var uid string
	ns.eventually("memcached owner to have a UID", func(ctx context.Context) error {
		out, err := ns.kubectl.Run(ctx, "get", "memcached", "owner", "-o", "jsonpath={.metadata.uid}")
		if err != nil || out == "" {
			return fmt.Errorf("no UID yet (%v)", err)
		}
		uid = out
		return nil
	})

	// A ServiceAccount that may create Services, and nothing else.
	ns.apply(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: services-only
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: services-only
rules:
  - apiGroups: [""]
    resources: [services]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: services-only
subjects:
  - kind: ServiceAccount
    name: services-only
roleRef:
  kind: Role
  name: services-only
  apiGroup: rbac.authorization.k8s.io
`)
	as := func(sa string) framework.Kubectl {
		kubeconfig := filepath.Join(ns.dir, sa+".kubeconfig")
		if err := cluster.ServiceAccountKubeconfig(ctx, ns.name, sa, kubeconfig, time.Hour); err != nil {
			t.Fatal(err)
		}
		k := cluster.Kubectl().WithNamespace(ns.name)
		k.Kubeconfig = kubeconfig
		return k
	}
	service := func(name string, block bool) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  ownerReferences:
    - apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: owner
      uid: %s
      controller: true
      blockOwnerDeletion: %t
spec:
  clusterIP: None
  ports:
    - port: 11211
`, name, uid, block)
	}
	create := func(k framework.Kubectl, manifest string) error {
		_, err := k.RunWithInput(ctx, manifest, "create", "-f", "-")
		return err
	}

	servicesOnly := as("services-only")
	// RBAC grants are cached briefly; wait until the plain create is allowed.
	ns.eventually("services-only to create a Service whose owner reference does not block deletion", func(ctx context.Context) error {
		return create(servicesOnly, service("not-blocking", false))
	})
	err := create(servicesOnly, service("blocking", true))
	const refusal = "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("creating a Service whose owner reference blocks deletion, without update on memcacheds/finalizers: got %v, want a refusal that says %q (is OwnerReferencesPermissionEnforcement on? see test/scripts/cluster.sh)", err, refusal)
	}
	if err := create(as(operatorSA), service("blocking", true)); err != nil {
		t.Fatalf("the operator's ServiceAccount (deploy/rbac.yaml) could not create a Service whose owner reference blocks deletion: %v", err)
	}
}
