package stub

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

// newTestCachedClient returns a CachedClient whose caches hold cached and
// whose API server, a client-go fake, holds live. Nothing is started: the
// test fills the indexers directly, as sample-controller's tests do.
func newTestCachedClient(t *testing.T, cached []runtime.Object, live ...runtime.Object) (*CachedClient, *kubefake.Clientset) {
	t.Helper()
	kube := kubefake.NewSimpleClientset(live...)
	c := NewCachedClient(kube, nil, kube.Discovery(), "test")
	for _, obj := range cached {
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			err = c.pods.GetIndexer().Add(o)
		default:
			err = c.deployments.GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, kube
}

func TestCachedClientGetDeploymentNeverAsksTheAPI(t *testing.T) {
	m := newMemcached("example", 1)
	d := ownedDeployment(m, 1)
	tests := []struct {
		name      string
		cached    []runtime.Object
		created   *appsv1.Deployment
		wantFound bool
	}{
		{name: "cache hit", cached: []runtime.Object{d}, wantFound: true},
		{name: "created, not yet in the cache", created: d, wantFound: true},
		{name: "neither is NotFound", wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The API server holds it in every case: only the cache counts.
			c, kube := newTestCachedClient(t, tt.cached, d)
			if tt.created != nil {
				c.created.add("test/example", tt.created)
			}

			got, err := c.GetDeployment("test", "example")

			if tt.wantFound && (err != nil || got.Name != "example") {
				t.Errorf("got %v, %v; want the deployment", got, err)
			}
			if !tt.wantFound && !apierrors.IsNotFound(err) {
				t.Errorf("got error %v, want NotFound", err)
			}
			if n := len(kube.Actions()); n != 0 {
				t.Errorf("API actions: got %v, want none", kube.Actions())
			}
		})
	}
}

func TestCachedClientReadDeploymentAsksTheAPI(t *testing.T) {
	m := newMemcached("example", 1)
	c, kube := newTestCachedClient(t, nil, ownedDeployment(m, 1))

	got, err := c.ReadDeployment("test", "example")

	if err != nil || got.Name != "example" {
		t.Errorf("got %v, %v; want the deployment", got, err)
	}
	if n := len(kube.Actions()); n != 1 {
		t.Errorf("API actions: got %v, want one get", kube.Actions())
	}
}

func TestCachedClientScaleDeploymentPatchesOnlyReplicas(t *testing.T) {
	m := newMemcached("example", 1)
	c, kube := newTestCachedClient(t, nil, ownedDeployment(m, 1))

	if err := c.ScaleDeployment("test", "example", 4); err != nil {
		t.Fatalf("ScaleDeployment: %v", err)
	}

	actions := kube.Actions()
	if len(actions) != 1 {
		t.Fatalf("actions: got %v, want one patch", actions)
	}
	patch, ok := actions[0].(core.PatchAction)
	if !ok || patch.GetResource().Resource != "deployments" || patch.GetName() != "example" {
		t.Fatalf("action: got %#v, want a patch of deployment example", actions[0])
	}
	if got, want := string(patch.GetPatch()), `{"spec":{"replicas":4}}`; got != want {
		t.Errorf("patch: got %s, want %s", got, want)
	}
}

func TestCachedClientReadsPodsFromCache(t *testing.T) {
	m := newMemcached("example", 2)
	mine := newPod(m, "example-a", corev1.PodRunning, true)
	other := newPod(newMemcached("other", 1), "other-a", corev1.PodRunning, true)
	c, kube := newTestCachedClient(t, []runtime.Object{mine, other})

	pods, err := c.ListPods("test", "example")

	if err != nil || len(pods) != 1 || pods[0].Name != "example-a" {
		t.Errorf("ListPods: got %v, %v; want example-a alone", pods, err)
	}
	if n := len(kube.Actions()); n != 0 {
		t.Errorf("API actions: got %v, want none", kube.Actions())
	}
}
