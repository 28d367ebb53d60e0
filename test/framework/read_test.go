package framework

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func TestParseGet(t *testing.T) {
	pods := readResources["pods"]
	for _, tc := range []struct {
		args []string
		want getRequest
		ok   bool
	}{
		{args: []string{"pod", "cache-0"}, want: getRequest{resource: pods, name: "cache-0"}, ok: true},
		{args: []string{"pods", "-l", "app=memcached"}, want: getRequest{resource: pods, labels: "app=memcached"}, ok: true},
		{args: []string{"po", "--selector=a=b,c=d"}, want: getRequest{resource: pods, labels: "a=b,c=d"}, ok: true},
		{args: []string{"pods", "--field-selector", "spec.nodeName=n", "-A"}, want: getRequest{resource: pods, fields: "spec.nodeName=n", allNamespaces: true}, ok: true},
		{args: []string{"nodes"}, want: getRequest{resource: readResources["nodes"]}, ok: true},
		{args: []string{"poddisruptionbudgets.v1.policy", "cache"}, want: getRequest{resource: readResources["pdb"], name: "cache"}, ok: true},
		// Forms that only kubectl knows.
		{args: nil},
		{args: []string{"deployments,services", "-l", "app=memcached"}},
		{args: []string{"deployment/cache"}},
		{args: []string{"widgets", "cache"}},
		{args: []string{"pod", "a", "b"}},
		{args: []string{"pod", "a", "-l", "x=y"}},
		{args: []string{"pods", "-l"}},
		{args: []string{"pods", "-l", "a=b", "-l", "c=d"}},
		{args: []string{"pods", "--sort-by=.metadata.name"}},
		{args: []string{"pods", "-A=true"}},
	} {
		got, ok := parseGet(tc.args)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseGet(%q) = %+v, %v; want %+v, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCommand(t *testing.T) {
	for args, want := range map[*[]string]string{
		{"get", "pods", "-l", "a=b"}:          "get pods",
		{"--as=alice", "get", "memcached"}:    "get memcached",
		{"apply", "-f", "-"}:                  "apply",
		{"delete", "pod", "cache-0", "--now"}: "delete",
	} {
		if got := command(*args); got != want {
			t.Errorf("command(%q) = %q, want %q", *args, got, want)
		}
	}
}

// TestGetJSONInProcess checks that GetJSON reads a list and an object from the
// API server itself, in the shape `kubectl get -o json` prints, that a
// missing object is NotFound, and that a path the server does not serve is not.
func TestGetJSONInProcess(t *testing.T) {
	var (
		mu      sync.Mutex
		queries []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/team-a/pods":
			w.Write([]byte(`{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"cache-0"}}]}`))
		case "/apis/apps/v1/namespaces/ctx-ns/deployments/cache":
			w.Write([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"cache"}}`))
		case "/apis/cache.example.com/v1alpha1/namespaces/ctx-ns/memcacheds/gone":
			// The API server's answer for a missing object names it.
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,` +
				`"message":"memcacheds.cache.example.com \"gone\" not found","details":{"name":"gone","group":"cache.example.com","kind":"memcacheds"}}`))
		default:
			// A path it does not serve: its Status names nothing.
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"the server could not find the requested resource"}`))
		}
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ctx-ns}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	k := Kubectl{Binary: "/nonexistent/kubectl", Kubeconfig: kubeconfig}

	var list map[string]any
	if err := k.WithNamespace("team-a").GetJSON(context.Background(), &list, "pods", "-l", "app=memcached"); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""},
		"items": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "cache-0"}}},
	}
	if !reflect.DeepEqual(list, want) {
		t.Errorf("list = %v, want %v", list, want)
	}

	var d struct{ Kind, APIVersion string }
	if err := k.GetJSON(context.Background(), &d, "deploy", "cache"); err != nil {
		t.Fatal(err)
	}
	if d.Kind != "Deployment" {
		t.Errorf("object kind = %q, want Deployment", d.Kind)
	}

	err := k.GetJSON(context.Background(), &d, "memcached", "gone")
	if !IsNotFound(err) {
		t.Errorf("GetJSON of a missing object: %v, want NotFound", err)
	}

	// An object of a kind the server does not serve, or a list of one, is
	// not "gone": a poll for a deleted object must not pass on it.
	for _, args := range [][]string{{"servicemonitor", "cache"}, {"servicemonitors"}} {
		err := k.GetJSON(context.Background(), &d, args...)
		if err == nil || IsNotFound(err) {
			t.Errorf("GetJSON(%q) of a path the server does not serve: %v, want an error that is not NotFound", args, err)
		}
	}

	wantQueries := []string{
		"/api/v1/namespaces/team-a/pods?labelSelector=app%3Dmemcached",
		"/apis/apps/v1/namespaces/ctx-ns/deployments/cache?",
		"/apis/cache.example.com/v1alpha1/namespaces/ctx-ns/memcacheds/gone?",
		"/apis/monitoring.coreos.com/v1/namespaces/ctx-ns/servicemonitors/cache?",
		"/apis/monitoring.coreos.com/v1/namespaces/ctx-ns/servicemonitors?",
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(queries, wantQueries) {
		t.Errorf("requests = %q, want %q", queries, wantQueries)
	}
}
