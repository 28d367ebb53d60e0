package stub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// apiRequest is one request the test API server received.
type apiRequest struct {
	method, path, contentType, body string
}

// testAPIServer records the requests of a CachedClient and answers each
// with the JSON of respond's object, or 404 without one; a *metav1.Status
// goes with its code.
type testAPIServer struct {
	mu       sync.Mutex
	requests []apiRequest
	respond  func(r apiRequest) interface{}
}

func (s *testAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := apiRequest{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"), body: string(body)}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	var obj interface{}
	if s.respond != nil {
		obj = s.respond(req)
	}
	w.Header().Set("Content-Type", "application/json")
	if status, ok := obj.(*metav1.Status); ok {
		w.WriteHeader(int(status.Code))
	}
	if obj == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *testAPIServer) got() []apiRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiRequest(nil), s.requests...)
}

// newTestCachedClient returns a CachedClient that talks JSON over HTTP to a
// test API server, as the operator does, and whose caches hold cached.
// Nothing is started: the test fills the indexers directly, as
// sample-controller's tests do.
func newTestCachedClient(t *testing.T, cached []runtime.Object, respond func(r apiRequest) interface{}) (*CachedClient, *testAPIServer) {
	t.Helper()
	api := &testAPIServer{respond: respond}
	server := httptest.NewServer(api)
	t.Cleanup(server.Close)
	cfg := &rest.Config{Host: server.URL}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pdbs, err := NewPodDisruptionBudgetRESTClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sms, err := NewServiceMonitorRESTClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCachedClient(Clients{
		Kube: kube, CacheKube: kube,
		PodDisruptionBudgets: pdbs, CachePodDisruptionBudgets: pdbs,
		Discovery:       kube.Discovery(),
		ServiceMonitors: sms,
	}, "test")
	for _, obj := range cached {
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			err = c.pods.GetIndexer().Add(o)
		case *corev1.Service:
			err = c.services.informer.GetIndexer().Add(o)
		default:
			err = c.deployments.informer.GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, api
}

func TestCachedClientGetDeploymentNeverAsksTheAPI(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
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
			c, api := newTestCachedClient(t, tt.cached, func(apiRequest) interface{} { return d })
			if tt.created != nil {
				c.deployments.created["test/example"] = tt.created
			}

			got, err := c.GetDeployment("test", "example")

			if tt.wantFound && (err != nil || got.Name != "example") {
				t.Errorf("got %v, %v; want the deployment", got, err)
			}
			if !tt.wantFound && !apierrors.IsNotFound(err) {
				t.Errorf("got error %v, want NotFound", err)
			}
			if reqs := api.got(); len(reqs) != 0 {
				t.Errorf("API requests: got %v, want none", reqs)
			}
		})
	}
}

func TestCachedClientRequests(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	d := ownedDeployment(m, 1)
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
		want apiRequest
	}{
		{
			name: "read deployment",
			call: func(c *CachedClient) error { _, err := c.ReadDeployment("test", "example"); return err },
			want: apiRequest{method: "GET", path: "/apis/apps/v1/namespaces/test/deployments/example"},
		},
		{
			name: "scale patches only replicas, of the deployment with the UID",
			call: func(c *CachedClient) error { return c.ScaleDeployment("test", "example", "uid-1", 4) },
			want: apiRequest{method: "PATCH", path: "/apis/apps/v1/namespaces/test/deployments/example",
				contentType: "application/json-patch+json",
				body:        `[{"op":"test","path":"/metadata/uid","value":"uid-1"},{"op":"add","path":"/spec/replicas","value":4}]`},
		},
		{
			name: "deployment template patch is a JSON patch",
			call: func(c *CachedClient) error { return c.PatchDeployment("test", "example", "uid-1", []byte(`[]`)) },
			want: apiRequest{method: "PATCH", path: "/apis/apps/v1/namespaces/test/deployments/example",
				contentType: "application/json-patch+json", body: `[]`},
		},
		{
			name: "service delete carries the UID precondition",
			call: func(c *CachedClient) error { return c.DeleteService("test", "example", "uid-1") },
			want: apiRequest{method: "DELETE", path: "/api/v1/namespaces/test/services/example",
				contentType: "application/json",
				body:        `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","preconditions":{"uid":"uid-1"}}`},
		},
		{
			name: "budget read speaks policy/v1",
			call: func(c *CachedClient) error { _, err := c.ReadPodDisruptionBudget("test", "example"); return err },
			want: apiRequest{method: "GET", path: "/apis/policy/v1/namespaces/test/poddisruptionbudgets/example"},
		},
		{
			name: "servicemonitor read speaks monitoring.coreos.com/v1",
			call: func(c *CachedClient) error { _, err := c.ReadServiceMonitor("test", "example"); return err },
			want: apiRequest{method: "GET", path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example"},
		},
		{
			name: "servicemonitor create sends the manifest as JSON",
			call: func(c *CachedClient) error {
				created, err := c.CreateServiceMonitor(sm)
				if err == nil && created.GetName() != "example" {
					err = fmt.Errorf("created %v, want the servicemonitor example", created.Object)
				}
				return err
			},
			want: apiRequest{method: "POST", path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors",
				contentType: "application/json", body: strings.TrimSpace(string(smJSON))},
		},
		{
			name: "servicemonitor patch is a JSON patch",
			call: func(c *CachedClient) error { return c.PatchServiceMonitor("test", "example", "uid-1", []byte(`[]`)) },
			want: apiRequest{method: "PATCH", path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example",
				contentType: "application/json-patch+json", body: `[]`},
		},
		{
			name: "servicemonitor delete carries the UID precondition",
			call: func(c *CachedClient) error { return c.DeleteServiceMonitor("test", "example", "uid-1") },
			want: apiRequest{method: "DELETE", path: "/apis/monitoring.coreos.com/v1/namespaces/test/servicemonitors/example",
				contentType: "application/json",
				body:        `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","preconditions":{"uid":"uid-1"}}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r apiRequest) interface{} {
				switch {
				case strings.Contains(r.path, "/servicemonitors/"):
					return sm.Object
				case strings.Contains(r.path, "/deployments/"):
					return d
				case strings.Contains(r.path, "/poddisruptionbudgets/"):
					return pdb
				}
				return svc
			})

			if err := tt.call(c); err != nil {
				t.Fatalf("got %v, want no error", err)
			}

			reqs := api.got()
			if len(reqs) != 1 {
				t.Fatalf("API requests: got %v, want one", reqs)
			}
			got := reqs[0]
			if tt.want.method == "GET" {
				got.contentType = ""
			}
			got.body = strings.TrimSpace(got.body)
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
	c, api := newTestCachedClient(t, nil, func(apiRequest) interface{} { return pdb })
	manifest, err := memcached.ToManifest(memcached.NewPodDisruptionBudget(m))
	if err != nil {
		t.Fatal(err)
	}

	created, err := c.CreatePodDisruptionBudget(manifest)
	if err != nil {
		t.Fatalf("CreatePodDisruptionBudget: %v", err)
	}

	reqs := api.got()
	if len(reqs) != 1 || reqs[0].method != "POST" || reqs[0].path != "/apis/policy/v1/namespaces/test/poddisruptionbudgets" ||
		!strings.Contains(reqs[0].body, `"apiVersion":"policy/v1"`) {
		t.Fatalf("API requests: got %+v, want one POST of a policy/v1 budget", reqs)
	}
	if created.UID != "uid-pdb" || created.Status.CurrentHealthy != 0 {
		t.Errorf("created: got UID %q, status %+v; want the stored budget, trimmed", created.UID, created.Status)
	}
	got, err := c.GetPodDisruptionBudget("test", "example")
	if err != nil || got.UID != "uid-pdb" {
		t.Errorf("GetPodDisruptionBudget after the create: got %v, %v; want the created budget", got, err)
	}
	if len(api.got()) != 1 {
		t.Errorf("API requests: got %v, want only the create", api.got())
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
	if reqs := api.got(); len(reqs) != 0 {
		t.Errorf("API requests: got %v, want none", reqs)
	}
}

// TestPhantomChildIsCreatedAnew: the client remembers creating a
// Deployment for an earlier Memcached of the same name, which was deleted,
// with the Deployment, before the cache saw either. The new Memcached gets
// a Deployment of its own, not a DeploymentNotOwned about one that does not
// exist.
func TestPhantomChildIsCreatedAnew(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	earlier := m.DeepCopy()
	earlier.UID = "uid-of-a-deleted-memcached"
	phantom := ownedDeployment(earlier, 1)
	c, api := newTestCachedClient(t, nil, func(r apiRequest) interface{} {
		switch {
		case r.method == "POST" && strings.HasSuffix(r.path, "/deployments"):
			return ownedDeployment(m, 1)
		case r.method == "POST" && strings.HasSuffix(r.path, "/services"):
			return ownedService(m)
		}
		return nil // the phantom is gone: 404
	})
	c.deployments.created["test/example"] = phantom
	h := NewHandler(c, record.NewFakeRecorder(10), memcachedtest.Image)

	if err := h.reconcile(m); err != nil {
		t.Fatalf("reconcile: got %v, want the deployment created", err)
	}

	var got []string
	for _, r := range api.got() {
		got = append(got, r.method+" "+r.path)
	}
	checkActions(t, got, []string{
		"GET /apis/apps/v1/namespaces/test/deployments/example",
		"POST /apis/apps/v1/namespaces/test/deployments",
		"POST /api/v1/namespaces/test/services",
	})
	if d, err := c.GetDeployment("test", "example"); err != nil || !metav1.IsControlledBy(d, m) {
		t.Errorf("GetDeployment after the reconcile: got %v, %v; want the new memcached's deployment", d, err)
	}
}

// TestCachedClientForgetsAChildTheCacheSawGo: when the cache shows an
// event for a name while its create is on the way, such as the created
// object's deletion by the garbage collector, the client does not remember
// the object: the cache knows better.
func TestCachedClientForgetsAChildTheCacheSawGo(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	var c *CachedClient
	c, _ = newTestCachedClient(t, nil, func(r apiRequest) interface{} {
		if r.method != "POST" {
			return nil
		}
		// The watch delivers the Deployment's creation and deletion
		// before the create's response arrives.
		c.deployments.forget("test/example")
		return ownedDeployment(m, 1)
	})
	manifest, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.CreateDeployment(manifest); err != nil {
		t.Fatalf("CreateDeployment: %v", err)
	}

	if d, err := c.GetDeployment("test", "example"); !apierrors.IsNotFound(err) {
		t.Errorf("GetDeployment: got %v, %v; want NotFound, as the cache has it", d, err)
	}
	if n := len(c.deployments.created) + len(c.deployments.creating); n != 0 {
		t.Errorf("the client holds %d entries for the deployment, want none", n)
	}
}

// TestCachedClientPatchTellsAReplacedChild checks how a patch refused as
// invalid is reported: the API server refuses a failed test of the UID so,
// and a patch that breaks validation too. Only then the client reads the
// object, and only an object with another UID, or none, is errReplaced.
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
		d := ownedDeployment(memcachedtest.NewMemcached("example", 1), 1)
		d.UID = types.UID(uid)
		return d
	}
	tests := []struct {
		name         string
		patch        interface{}
		current      interface{} // what a GET returns; nil is 404
		wantReplaced bool
		wantInvalid  bool
		wantRequests []string
	}{
		{name: "accepted", patch: withUID("uid-1"), current: withUID("uid-1"), wantRequests: []string{"PATCH"}},
		{name: "another object of that name", patch: invalid, current: withUID("uid-2"), wantReplaced: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "gone", patch: invalid, current: nil, wantReplaced: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "the same object, an invalid patch", patch: invalid, current: withUID("uid-1"), wantInvalid: true, wantRequests: []string{"PATCH", "GET"}},
		{name: "other errors are not read about", patch: conflict, current: withUID("uid-2"), wantRequests: []string{"PATCH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r apiRequest) interface{} {
				if r.method == "PATCH" {
					return tt.patch
				}
				return tt.current
			})

			err := c.ScaleDeployment("test", "example", "uid-1", 2)

			if got := errors.Is(err, errReplaced); got != tt.wantReplaced {
				t.Errorf("errors.Is(%v, errReplaced): got %v, want %v", err, got, tt.wantReplaced)
			}
			if got := apierrors.IsInvalid(err); got != tt.wantInvalid {
				t.Errorf("IsInvalid(%v): got %v, want %v", err, got, tt.wantInvalid)
			}
			var methods []string
			for _, r := range api.got() {
				methods = append(methods, r.method)
			}
			if !reflect.DeepEqual(methods, tt.wantRequests) {
				t.Errorf("requests: got %v, want %v", methods, tt.wantRequests)
			}
		})
	}
}
