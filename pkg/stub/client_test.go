package stub

import (
	"io"
	"reflect"
	"testing"

	"github.com/sirupsen/logrus"
	logrustest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

// newTestCachedClient returns a CachedClient whose caches hold cached and
// whose API server, a client-go fake, holds live. Nothing is started: the
// test fills the indexers directly, as sample-controller's tests do.
func newTestCachedClient(t *testing.T, cached []runtime.Object, live ...runtime.Object) (*CachedClient, *kubefake.Clientset) {
	t.Helper()
	kube := kubefake.NewSimpleClientset(live...)
	c := NewCachedClient(kube, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), "test")
	for _, obj := range cached {
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			err = c.pods.GetIndexer().Add(o)
		case *unstructured.Unstructured:
			err = c.memcacheds.GetIndexer().Add(o)
		default:
			err = c.deployments.GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, kube
}

func TestCachedClientGetDeployment(t *testing.T) {
	m := newMemcached("example", 1)
	d := ownedDeployment(m, 1)
	tests := []struct {
		name        string
		cached      []runtime.Object
		live        []runtime.Object
		wantFound   bool
		wantActions int
	}{
		{name: "cache hit asks the API nothing", cached: []runtime.Object{d}, live: []runtime.Object{d}, wantFound: true},
		{name: "cache miss reads the API", live: []runtime.Object{d}, wantFound: true, wantActions: 1},
		{name: "absent everywhere is NotFound", wantActions: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, kube := newTestCachedClient(t, tt.cached, tt.live...)

			got, err := c.GetDeployment("test", "example")

			if tt.wantFound && (err != nil || got.Name != "example") {
				t.Errorf("got %v, %v; want the deployment", got, err)
			}
			if !tt.wantFound && !apierrors.IsNotFound(err) {
				t.Errorf("got error %v, want NotFound", err)
			}
			if n := len(kube.Actions()); n != tt.wantActions {
				t.Errorf("API actions: got %d (%v), want %d", n, kube.Actions(), tt.wantActions)
			}
		})
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

func TestCachedClientReadsMemcachedAndPodsFromCache(t *testing.T) {
	m := newMemcached("example", 2)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	mine := newPod(m, "example-a", corev1.PodRunning, true)
	other := newPod(newMemcached("other", 1), "other-a", corev1.PodRunning, true)
	c, kube := newTestCachedClient(t, []runtime.Object{&unstructured.Unstructured{Object: content}, mine, other})

	got, err := c.GetMemcached("test", "example")
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("GetMemcached: got %+v, %v; want %+v", got, err, m)
	}
	if _, err := c.GetMemcached("test", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("GetMemcached of a missing memcached: got %v, want NotFound", err)
	}
	pods, err := c.ListPods("test", selectorForMemcached("example"))
	if err != nil || len(pods) != 1 || pods[0].Name != "example-a" {
		t.Errorf("ListPods: got %v, %v; want example-a alone", pods, err)
	}
	if n := len(kube.Actions()); n != 0 {
		t.Errorf("API actions: got %v, want none", kube.Actions())
	}
}

func TestAPIServedLogsWhenTheMemcachedAPIGoesAndComesBack(t *testing.T) {
	logger := logrus.StandardLogger()
	hook := logrustest.NewLocal(logger)
	out := logger.Out
	logger.SetOutput(io.Discard)
	defer func() {
		logger.ReplaceHooks(make(logrus.LevelHooks))
		logger.SetOutput(out)
	}()
	notFound := apierrors.NewNotFound(schema.GroupResource{}, "")
	unavailable := apierrors.NewServiceUnavailable("etcd is away")

	var a apiServed
	for _, err := range []error{nil, notFound, notFound, unavailable, notFound, nil, nil, notFound} {
		a.observe(err)
	}

	var got []logrus.Level
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level)
	}
	want := []logrus.Level{logrus.ErrorLevel, logrus.InfoLevel, logrus.ErrorLevel}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log levels: got %v, want %v (once when the API goes, once when it is back)", got, want)
	}
}
