package stub

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// TestServesTwoNamespacesThroughOneClient: one handler, over one cached
// client of two namespaces, reconciles a Memcached of the same name in each
// into children of its own namespace, each owned by its own Memcached.
func TestServesTwoNamespacesThroughOneClient(t *testing.T) {
	memcacheds := map[string]*v1alpha1.Memcached{}
	for _, ns := range []string{"alpha", "beta"} {
		m := memcachedtest.NewMemcached("example", 1)
		m.Namespace, m.UID = ns, types.UID("uid-"+ns)
		memcacheds[ns] = m
	}
	namespaceOf := func(path string) string {
		rest := path[strings.Index(path, "/namespaces/")+len("/namespaces/"):]
		return rest[:strings.Index(rest, "/")]
	}
	api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
		m := memcacheds[namespaceOf(r.Path)]
		switch {
		case m == nil:
			return nil
		case r.Method == "PATCH" && strings.HasSuffix(r.Path, "/deployments/example"):
			return kubetest.Created{Object: memcachedtest.OwnedDeployment(m, 1)}
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/services"):
			return memcachedtest.OwnedService(m)
		}
		return nil
	})
	clients, err := kube.NewClients(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewCachedClient(clients, kube.NewScope("alpha", "beta"), Kinds()...)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(c, record.NewFakeRecorder(10), memcachedtest.Image)

	for _, ns := range []string{"alpha", "beta"} {
		if err := h.reconcile(memcacheds[ns]); err != nil {
			t.Fatalf("reconcile %s/example: %v", ns, err)
		}
	}

	var got []string
	for _, r := range api.Got() {
		got = append(got, r.Method+" "+r.Path)
	}
	checkActions(t, got, []string{
		"PATCH /apis/apps/v1/namespaces/alpha/deployments/example",
		"POST /api/v1/namespaces/alpha/services",
		"PATCH /apis/apps/v1/namespaces/beta/deployments/example",
		"POST /api/v1/namespaces/beta/services",
	})
	for ns, m := range memcacheds {
		if d, err := c.Get(kube.DeploymentKind, ns, "example"); err != nil || !metav1.IsControlledBy(d, m) {
			t.Errorf("Get %s/example: got %v, %v; want the deployment of %s's Memcached", ns, d, err, ns)
		}
	}
}

// TestLeavesUnservedNamespaceAlone: a Memcached whose namespace the
// handler does not serve (ServeNamespaces) gets no write at all, whether
// its own event or a child's change queues it, though its Deployment is
// off its size and its status stale; once its namespace is served,
// EnqueueNamespace queues it, and it alone of the known Memcacheds, and it
// is reconciled.
func TestLeavesUnservedNamespaceAlone(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	elsewhere := memcachedtest.NewMemcached("example", 1)
	elsewhere.Namespace, elsewhere.UID = "other", "uid-other"
	f := newFixture(t, append(inSync(m, 1), elsewhere)...)
	served := map[string]bool{}
	f.handler.ServeNamespaces(func(namespace string) bool { return served[namespace] })

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	f.handler.EnqueueMemcached(m.Namespace, m.Name)
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("the reconcile of a child's change: %v", err)
	}
	checkActions(t, f.client.actions, nil)
	if len(f.client.created) > 0 || len(f.client.statuses) > 0 {
		t.Errorf("created %d objects and wrote %d statuses in an unserved namespace, want none", len(f.client.created), len(f.client.statuses))
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none in an unserved namespace", got)
	}

	served[m.Namespace] = true
	f.handler.EnqueueNamespace(m.Namespace)
	if got := f.handler.queue.Len(); got != 1 {
		t.Fatalf("queued %d reconciles for the namespace that became served, want 1: its one Memcached", got)
	}
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("the reconcile once served: %v", err)
	}
	checkActions(t, f.client.actions, writesDeployment("scale deployment test/example 3"))
}
