package kube

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseScope(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // Namespaces()
		all     bool
		wantErr string
	}{
		{name: "empty is every namespace", in: "", want: []string{""}, all: true},
		{name: "one namespace, as the guide sets it", in: "default", want: []string{"default"}},
		{name: "a list", in: "team-b,team-a", want: []string{"team-a", "team-b"}},
		{name: "blanks, duplicates and empty items are left out", in: " team-b , team-a,,team-b, ", want: []string{"team-a", "team-b"}},
		{name: "only separators name nothing", in: " , ,", wantErr: "names no namespace"},
		{name: "only blanks name nothing", in: "  ", wantErr: "names no namespace"},
		{name: "upper case is refused", in: "Team-A", wantErr: `"Team-A" is not a namespace's name: a DNS-1123 label must consist of lower case`},
		{name: "a dot is refused", in: "team-a,team.b", wantErr: `"team.b" is not a namespace's name`},
		{name: "a leading dash is refused", in: "-team", wantErr: `"-team" is not a namespace's name`},
		{name: "longer than 63 characters is refused", in: strings.Repeat("a", 64), wantErr: "must be no more than 63 characters"},
		{name: "an inner blank is refused", in: "team a", wantErr: `"team a" is not a namespace's name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseScope(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
			if !reflect.DeepEqual(got.Namespaces(), tt.want) || got.All() != tt.all {
				t.Errorf("got %v (all %t), want %v (all %t)", got.Namespaces(), got.All(), tt.want, tt.all)
			}
		})
	}
}

func TestScopeSingle(t *testing.T) {
	tests := []struct {
		scope Scope
		want  string
		ok    bool
	}{
		{scope: AllNamespaces},
		{scope: NewScope("a"), want: "a", ok: true},
		{scope: NewScope("a", "a"), want: "a", ok: true},
		{scope: NewScope("b", "a"), ok: false},
	}
	for _, tt := range tests {
		if got, ok := tt.scope.Single(); got != tt.want || ok != tt.ok {
			t.Errorf("%s: Single() = %q, %t; want %q, %t", tt.scope, got, ok, tt.want, tt.ok)
		}
	}
}

// inNamespace returns obj, a copy of a memcachedtest object, in namespace,
// with a UID of its own.
func inNamespace[T interface {
	runtime.Object
	SetNamespace(string)
	SetUID(types.UID)
	GetName() string
}](obj T, namespace string) T {
	obj.SetNamespace(namespace)
	obj.SetUID(types.UID("uid-" + namespace + "-" + obj.GetName()))
	return obj
}

// TestCachedClientServesTwoNamespaces: one client over two namespaces
// reads each namespace's children and pods from the cache of that
// namespace, same names apart, and knows nothing of a third, without a
// request.
func TestCachedClientServesTwoNamespaces(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	var cached []runtime.Object
	for _, ns := range []string{"alpha", "beta"} {
		cached = append(cached,
			inNamespace(memcachedtest.OwnedDeployment(m, 1), ns),
			inNamespace(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), ns))
	}
	c, api := newScopedTestCachedClient(t, NewScope("alpha", "beta"), cached, nil)

	for _, ns := range []string{"alpha", "beta"} {
		d, err := c.Get(DeploymentKind, ns, "example")
		if err != nil || d.GetNamespace() != ns || d.GetUID() != types.UID("uid-"+ns+"-example") {
			t.Errorf("Get %s/example: got %v, %v; want the deployment of %s", ns, d, err, ns)
		}
		pods, err := c.ListPods(ns, "example")
		if err != nil || len(pods) != 1 || pods[0].Namespace != ns {
			t.Errorf("ListPods %s/example: got %v, %v; want example-a of %s alone", ns, pods, err, ns)
		}
	}
	if d, err := c.Get(DeploymentKind, "gamma", "example"); !apierrors.IsNotFound(err) {
		t.Errorf("Get gamma/example, outside the scope: got %v, %v; want NotFound", d, err)
	}
	deployments, err := c.ListDeployments()
	if err != nil || len(deployments) != 2 {
		t.Errorf("ListDeployments: got %d, %v; want the 2 of both namespaces", len(deployments), err)
	}
	if reqs := api.Got(); len(reqs) != 0 {
		t.Errorf("API requests: got %v, want none", reqs)
	}
}

// TestCachedClientListsEachNamespaceOfItsScope: the caches of a list of
// namespaces list and watch each namespace, never across namespaces, so
// that a Role in each is all the RBAC they need; those of every namespace
// list and watch once, across the cluster.
func TestCachedClientListsEachNamespaceOfItsScope(t *testing.T) {
	resources := []string{"/api/v1/%spods", "/api/v1/%sevents", "/apis/apps/v1/%sdeployments", "/api/v1/%sservices", "/apis/policy/v1/%spoddisruptionbudgets"}
	expand := func(namespaces ...string) []string {
		var paths []string
		for _, r := range resources {
			for _, ns := range namespaces {
				prefix := ""
				if ns != "" {
					prefix = "namespaces/" + ns + "/"
				}
				paths = append(paths, strings.Replace(r, "%s", prefix, 1))
			}
		}
		sort.Strings(paths)
		return paths
	}
	tests := []struct {
		name  string
		scope Scope
		want  []string
	}{
		{name: "a list", scope: NewScope("alpha", "beta"), want: expand("alpha", "beta")},
		{name: "every namespace", scope: AllNamespaces, want: expand("")},
		{name: "one namespace", scope: NewScope("alpha"), want: expand("alpha")},
	}
	lists := map[string][2]string{
		"pods":                 {"v1", "PodList"},
		"events":               {"v1", "EventList"},
		"services":             {"v1", "ServiceList"},
		"deployments":          {"apps/v1", "DeploymentList"},
		"poddisruptionbudgets": {"policy/v1", "PodDisruptionBudgetList"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each watch is held open until the test ends, as the API
			// server holds one while nothing changes.
			stop := make(chan struct{})
			api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
				if strings.Contains(r.Query, "watch=true") {
					<-stop
					return nil
				}
				l, ok := lists[r.Path[strings.LastIndex(r.Path, "/")+1:]]
				if !ok {
					return nil
				}
				return map[string]interface{}{"apiVersion": l[0], "kind": l[1], "metadata": map[string]interface{}{"resourceVersion": "1"}, "items": []interface{}{}}
			})
			clients, err := NewClients(cfg, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewCachedClient(clients, tt.scope, DeploymentKind, serviceKind, pdbKind, serviceMonitorKind)
			if err != nil {
				t.Fatal(err)
			}
			defer close(stop)

			if err := c.Start(stop); err != nil {
				t.Fatal(err)
			}

			seen := map[string]bool{}
			var got []string
			for _, r := range api.Got() {
				if !seen[r.Path] {
					seen[r.Path] = true
					got = append(got, r.Path)
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("paths listed and watched:\ngot  %v\nwant %v", got, tt.want)
			}
		})
	}
}
