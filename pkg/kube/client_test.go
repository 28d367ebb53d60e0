package kube

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// The kinds of the handler's other children, as package stub declares
// them, without what the requests do not depend on.
var (
	serviceKind = &Kind{
		Resource: corev1.SchemeGroupVersion.WithResource("services"),
		New:      func() Object { return &corev1.Service{} },
		NewList:  func() runtime.Object { return &corev1.ServiceList{} },
	}
	pdbKind = &Kind{
		Resource: memcached.PolicyV1.WithResource("poddisruptionbudgets"),
		New:      func() Object { return &policyv1beta1.PodDisruptionBudget{} },
		NewList:  func() runtime.Object { return &policyv1beta1.PodDisruptionBudgetList{} },
		Trim: TrimOf(func(p *policyv1beta1.PodDisruptionBudget) {
			p.Status = policyv1beta1.PodDisruptionBudgetStatus{}
		}),
	}
	serviceMonitorKind = &Kind{
		Resource: memcached.ServiceMonitorGVR,
		New:      func() Object { return &unstructured.Unstructured{} },
		Optional: true,
	}
)

// newTestCachedClient returns a CachedClient, with the operator's clients,
// that talks over HTTP to a test API server, and whose caches hold cached.
// Nothing is started: the test fills the indexers directly, as
// sample-controller's tests do.
func newTestCachedClient(t *testing.T, cached []runtime.Object, respond func(r kubetest.Request) interface{}) (*CachedClient, *kubetest.APIServer) {
	t.Helper()
	return newScopedTestCachedClient(t, NewScope("test"), cached, respond)
}

// newScopedTestCachedClient is newTestCachedClient for the namespaces of
// scope: each cached object goes into the cache of its namespace.
func newScopedTestCachedClient(t *testing.T, scope Scope, cached []runtime.Object, respond func(r kubetest.Request) interface{}) (*CachedClient, *kubetest.APIServer) {
	t.Helper()
	api, cfg := kubetest.NewAPIServer(t, respond)
	clients, err := NewClients(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCachedClient(clients, scope, DeploymentKind, serviceKind, pdbKind, serviceMonitorKind)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range cached {
		o := obj.(metav1.Object)
		var s *scoped
		switch obj.(type) {
		case *corev1.Pod:
			s = c.pods
		case *corev1.Service:
			s = c.kinds[serviceKind.Resource].informer
		case *corev1.Event:
			s = c.mountEvents
		default:
			s = c.kinds[DeploymentKind.Resource].informer
		}
		i := s.indexer(o.GetNamespace())
		if i == nil {
			t.Fatalf("cached %s/%s is outside the scope %s", o.GetNamespace(), o.GetName(), scope)
		}
		if err := i.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return c, api
}

func TestCachedClientGetDeploymentNeverAsksTheAPI(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	d := memcachedtest.OwnedDeployment(m, 1)
	tests := []struct {
		name      string
		cached    []runtime.Object
		created   *appsv1.Deployment
		age       time.Duration
		wantFound bool
	}{
		{name: "cache hit", cached: []runtime.Object{d}, wantFound: true},
		{name: "created, not yet in the cache", created: d, wantFound: true},
		{name: "created a minute ago and never shown by the cache is NotFound", created: d, age: createdTTL, wantFound: false},
		{name: "neither is NotFound", wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The API server holds it in every case: only the cache counts.
			c, api := newTestCachedClient(t, tt.cached, func(kubetest.Request) interface{} { return d })
			if tt.created != nil {
				ch := c.kinds[DeploymentKind.Resource]
				now := time.Now()
				ch.now = func() time.Time { return now }
				ch.created["test/example"] = createdObject{obj: tt.created, at: now.Add(-tt.age)}
			}

			got, err := c.Get(DeploymentKind, "test", "example")

			if tt.wantFound && (err != nil || got.GetName() != "example") {
				t.Errorf("got %v, %v; want the deployment", got, err)
			}
			if !tt.wantFound && !apierrors.IsNotFound(err) {
				t.Errorf("got error %v, want NotFound", err)
			}
			if reqs := api.Got(); len(reqs) != 0 {
				t.Errorf("API requests: got %v, want none", reqs)
			}
		})
	}
}

func TestCachedClientRequests(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	d := memcachedtest.OwnedDeployment(m, 1)
	svc := memcached.NewService(m)
	pdb := memcached.NewPodDisruptionBudget(m)
	sm, err := memcached.NewServiceMonitor(m)
	if err != nil {
		t.Fatal(err)
	}
	smJSON, err := sm.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func(c *CachedClient) error
		want kubetest.Request
	}{
		{
			name: "read deployment",
			call: func(c *CachedClient) error { _, err := c.Read(DeploymentKind, "test", "example"); return err },
			want: kubetest.Request{Method: "GET", Path: "/apis/apps/v1/namespaces/test/deployments/example"},
		},
		{
			name: "scale patches only replicas, of the deployment with the UID",
			call: func(c *CachedClient) error { return c.ScaleDeployment("test", "example", "uid-1", 4) },
			want: kubetest.Request{Method: "PATCH", Path: "/apis/apps/v1/namespaces/test/deployments/example",
				ContentType: "application/json-patch+json",
				Body:        `[{"op":"test","path":"/metadata/uid","value":"uid-1"},{"op":"add","path":"/spec/replicas","value":4}]`},
		},
		{
			name: "deployment template patch is a JSON patch",
			call: func(c *CachedClient) error { return c.Patch(DeploymentKind, "test", "example", "uid-1", []byte(`[]`)) },
			want: kubetest.Request{Method: "PATCH", Path: "/apis/apps/v1/namespaces/test/deployments/example",
				ContentType: "application/json-patch+json", Body: `[]`},
		},
		{
			name: "service delete carries the UID precondition",
			call: func(c *CachedClient) error { return c.Delete(serviceKind, "test", "example", "uid-1") },
			want: kubetest.Request{Method: "DELETE", Path: "/api/v1/namespaces/test/services/example",
				ContentType: "application/json",
				Body:        `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","preconditions":{"uid":"uid-1"}}`},
		},
		{
			name: "budget read speaks policy/v1",
			call: func(c *CachedClient) error { _, err := c.Read(pdbKind, "test", "example"); return err },
			want: kubetest.Request{Method: "GET", Path: "/apis/policy/v1/namespaces/test/poddisruptionbudgets/example"},
		},
		{
			name: "servicemonitor read speaks monitoring.coreos.com/v1",
			call: func(c *CachedClient) error { _, err := c.Read(serviceMonitorKind, "test", "example"); return err },
			want: kubetest.Request{Method: "GET", Path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example"},
		},
		{
			name: "servicemonitor create sends the manifest as JSON",
			call: func(c *CachedClient) error {
				created, err := c.Create(serviceMonitorKind, sm)
				if err == nil && created.GetName() != "example" {
					err = fmt.Errorf("created %v, want the servicemonitor example", created)
				}
				return err
			},
			want: kubetest.Request{Method: "POST", Path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors",
				ContentType: "application/json", Body: strings.TrimSpace(string(smJSON))},
		},
		{
			name: "servicemonitor patch is a JSON patch",
			call: func(c *CachedClient) error {
				return c.Patch(serviceMonitorKind, "test", "example", "uid-1", []byte(`[]`))
			},
			want: kubetest.Request{Method: "PATCH", Path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example",
				ContentType: "application/json-patch+json", Body: `[]`},
		},
		{
			name: "servicemonitor delete carries the UID precondition",
			call: func(c *CachedClient) error { return c.Delete(serviceMonitorKind, "test", "example", "uid-1") },
			want: kubetest.Request{Method: "DELETE", Path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example",
				ContentType: "application/json",
				Body:        `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","preconditions":{"uid":"uid-1"}}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r kubetest.Request) interface{} {
				switch {
				case strings.Contains(r.Path, "/servicemonitors/"):
					return sm.Object
				case strings.Contains(r.Path, "/deployments/"):
					return d
				case strings.Contains(r.Path, "/poddisruptionbudgets/"):
					return pdb
				}
				return svc
			})

			if err := tt.call(c); err != nil {
				t.Fatalf("got %v, want no error", err)
			}

			reqs := api.Got()
			if len(reqs) != 1 {
				t.Fatalf("API requests: got %v, want one", reqs)
			}
			got := reqs[0]
			if tt.want.Method == "GET" {
				got.ContentType = ""
			}
			got.Body = strings.TrimSpace(got.Body)
			if got != tt.want {
				t.Errorf("request:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCachedClientCreateRemembersTheCreated(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	pdb := memcached.NewPodDisruptionBudget(m)
	pdb.UID = "uid-pdb"
	pdb.Status.CurrentHealthy = 3
	c, api := newTestCachedClient(t, nil, func(kubetest.Request) interface{} { return pdb })
	manifest, err := memcached.ToManifest(memcached.NewPodDisruptionBudget(m))
	if err != nil {
		t.Fatal(err)
	}

	obj, err := c.Create(pdbKind, manifest)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	created := obj.(*policyv1beta1.PodDisruptionBudget)

	reqs := api.Got()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/apis/policy/v1/namespaces/test/poddisruptionbudgets" ||
		!strings.Contains(reqs[0].Body, `"apiVersion":"policy/v1"`) {
		t.Fatalf("API requests: got %+v, want one POST of a policy/v1 budget", reqs)
	}
	if created.UID != "uid-pdb" || created.Status.CurrentHealthy != 0 {
		t.Errorf("created: got UID %q, status %+v; want the stored budget, trimmed", created.UID, created.Status)
	}
	got, err := c.Get(pdbKind, "test", "example")
	if err != nil || got.GetUID() != "uid-pdb" {
		t.Errorf("Get after the create: got %v, %v; want the created budget", got, err)
	}
	if len(api.Got()) != 1 {
		t.Errorf("API requests: got %v, want only the create", api.Got())
	}
}

func TestCachedClientReadsPodsFromCache(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	mine := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	other := memcachedtest.NewPod(memcachedtest.NewMemcached("other", 1), "other-a", corev1.PodRunning, true)
	c, api := newTestCachedClient(t, []runtime.Object{mine, other}, nil)

	pods, err := c.ListPods("test", "example")

	if err != nil || len(pods) != 1 || pods[0].Name != "example-a" {
		t.Errorf("ListPods: got %v, %v; want example-a alone", pods, err)
	}
	if reqs := api.Got(); len(reqs) != 0 {
		t.Errorf("API requests: got %v, want none", reqs)
	}
}

// TestCachedClientForgetsAChildTheCacheSawGo: when the cache shows an
// event for a name while its create is on the way, such as the created
// object's deletion by the garbage collector, the client does not remember
// the object: the cache knows better.
func TestCachedClientForgetsAChildTheCacheSawGo(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	var c *CachedClient
	c, _ = newTestCachedClient(t, nil, func(r kubetest.Request) interface{} {
		if r.Method != "POST" {
			return nil
		}
		// The watch delivers the Deployment's creation and deletion
		// before the create's response arrives.
		c.kinds[DeploymentKind.Resource].forget("test/example")
		return memcachedtest.OwnedDeployment(m, 1)
	})
	manifest, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.Create(DeploymentKind, manifest); err != nil {
		t.Fatalf("Create: %v", err)
	}

	if d, err := c.Get(DeploymentKind, "test", "example"); !apierrors.IsNotFound(err) {
		t.Errorf("Get: got %v, %v; want NotFound, as the cache has it", d, err)
	}
	if n := len(c.kinds[DeploymentKind.Resource].created) + len(c.kinds[DeploymentKind.Resource].creating); n != 0 {
		t.Errorf("the client holds %d entries for the deployment, want none", n)
	}
}

// TestCachedClientPatchTellsAReplacedChild checks how a patch refused as
// invalid is reported: the API server refuses a failed test of the UID so,
// and a patch that breaks validation too. Only then the client reads the
// object, and only an object with another UID, or none, is ErrReplaced.
func TestCachedClientPatchTellsAReplacedChild(t *testing.T) {
	invalid := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Code: 422,
		Message: "the server rejected our request due to an error in our request",
	}
	conflict := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: 409,
	}
	withUID := func(uid string) *appsv1.Deployment {
		d := memcachedtest.OwnedDeployment(memcachedtest.NewMemcached("example", 1), 1)
		d.UID = types.UID(uid)
		return d
	}
	tests := []struct {
		name         string
		patch        interface{}
		current      interface{} // what a GET returns; nil is 404
		wantReplaced bool
		wantInvalid  bool
		wantChanged  bool
		wantRequests []string
	}{
		{name: "accepted", patch: withUID("uid-1"), current: withUID("uid-1"), wantRequests: []string{"PATCH"}},
		{name: "another object of that name", patch: invalid, current: withUID("uid-2"), wantReplaced: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "gone", patch: invalid, current: nil, wantReplaced: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "the same object, an invalid patch", patch: invalid, current: withUID("uid-1"), wantInvalid: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "a conflict, of a patch that sets the resourceVersion, is a change and not read about", patch: conflict, current: withUID("uid-2"), wantChanged: true, wantRequests: []string{"PATCH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r kubetest.Request) interface{} {
				if r.Method == "PATCH" {
					return tt.patch
				}
				return tt.current
			})

			err := c.ScaleDeployment("test", "example", "uid-1", 2)

			if got := errors.Is(err, ErrReplaced); got != tt.wantReplaced {
				t.Errorf("errors.Is(%v, errReplaced): got %v, want %v", err, got, tt.wantReplaced)
			}
			if got := apierrors.IsInvalid(err); got != tt.wantInvalid {
				t.Errorf("IsInvalid(%v): got %v, want %v", err, got, tt.wantInvalid)
			}
			if got := errors.Is(err, ErrChanged); got != tt.wantChanged {
				t.Errorf("errors.Is(%v, ErrChanged): got %v, want %v", err, got, tt.wantChanged)
			}
			var methods []string
			for _, r := range api.Got() {
				methods = append(methods, r.Method)
			}
			if !reflect.DeepEqual(methods, tt.wantRequests) {
				t.Errorf("requests: got %v, want %v", methods, tt.wantRequests)
			}
		})
	}
}
func TestEnqueueOwner(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	pod := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	tests := []struct {
		name string
		obj  interface{}
		want []string
	}{
		{name: "pod", obj: pod, want: []string{"test/example"}},
		{name: "deployment", obj: memcachedtest.OwnedDeployment(m, 1), want: []string{"test/example"}},
		{name: "tombstone of a deleted pod", obj: cache.DeletedFinalStateUnknown{Key: "test/example-a", Obj: pod}, want: []string{"test/example"}},
		{name: "without memcached_cr label", obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "test", Labels: map[string]string{memcached.AppLabel: memcached.AppLabelValue}}}},
		{name: "not an object", obj: "garbage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string

			enqueueOwner(tt.obj, func(namespace, name string) { got = append(got, namespace+"/"+name) })

			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
func TestIndexByMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	tests := []struct {
		name string
		obj  interface{}
		want []string
	}{
		{name: "pod of a memcached", obj: memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), want: []string{"test/example"}},
		{name: "pod without the label", obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "test"}}},
		{name: "not an object", obj: "garbage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := indexByMemcached(tt.obj)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
