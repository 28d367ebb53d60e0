package stub

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// TestPhantomChildIsCreatedAnew: the client remembers creating a
// Deployment for an earlier Memcached of the same name, which was deleted,
// with the Deployment, before the cache saw either. The new Memcached gets
// a Deployment of its own, not a DeploymentNotOwned about one that does not
// exist.
func TestPhantomChildIsCreatedAnew(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	earlier := m.DeepCopy()
	earlier.UID = "uid-of-a-deleted-memcached"
	phantom := memcachedtest.OwnedDeployment(earlier, 1)
	api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
		switch {
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/deployments") && strings.Contains(r.Body, string(earlier.UID)):
			return phantom
		case r.Method == "PATCH" && strings.HasSuffix(r.Path, "/deployments/example") && r.ContentType == "application/apply-patch+yaml":
			return kubetest.Created{Object: memcachedtest.OwnedDeployment(m, 1)}
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/services"):
			return memcachedtest.OwnedService(m)
		}
		return nil // the phantom is gone: 404
	})
	clients, err := kube.NewClients(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewCachedClient(clients, kube.NewScope("test"), Kinds()...)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier Memcached's create, which the cache never showed.
	manifest, err := memcached.ToManifest(phantom)
	if err == nil {
		_, err = c.Create(kube.DeploymentKind, manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := len(api.Got())
	h := NewHandler(c, record.NewFakeRecorder(10), memcachedtest.Image)

	if err := h.reconcile(m); err != nil {
		t.Fatalf("reconcile: got %v, want the deployment created", err)
	}

	var got []string
	for _, r := range api.Got()[before:] {
		got = append(got, r.Method+" "+r.Path)
	}
	checkActions(t, got, []string{
		"GET /apis/apps/v1/namespaces/test/deployments/example",
		"PATCH /apis/apps/v1/namespaces/test/deployments/example",
		"POST /api/v1/namespaces/test/services",
	})
	if d, err := c.Get(kube.DeploymentKind, "test", "example"); err != nil || !metav1.IsControlledBy(d, m) {
		t.Errorf("Get after the reconcile: got %v, %v; want the new memcached's deployment", d, err)
	}
}
