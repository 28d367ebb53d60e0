package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/kube"
)

func TestWatchScope(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    []string
		wantErr string
	}{
		{name: "unset is refused, with what to set", env: map[string]string{}, wantErr: `WATCH_NAMESPACE must be set: to the namespace to manage (the downward API's metadata.namespace in a pod), to a comma-separated list of namespaces, or to "" for every namespace`},
		{name: "empty is every namespace", env: map[string]string{"WATCH_NAMESPACE": ""}, want: []string{""}},
		{name: "one namespace", env: map[string]string{"WATCH_NAMESPACE": "default"}, want: []string{"default"}},
		{name: "a list", env: map[string]string{"WATCH_NAMESPACE": "b, a,b,"}, want: []string{"a", "b"}},
		{name: "an invalid name says which and why", env: map[string]string{"WATCH_NAMESPACE": "a,B"}, wantErr: `WATCH_NAMESPACE: "B" is not a namespace's name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := watchScope(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Namespaces(), tt.want) {
				t.Errorf("got %v, %v; want %v", got.Namespaces(), err, tt.want)
			}
		})
	}
}

func TestOwnNamespace(t *testing.T) {
	tests := []struct {
		name         string
		podNamespace string
		scope        kube.Scope
		want         string
		wantErr      string
	}{
		{name: "POD_NAMESPACE, whatever is watched", podNamespace: "operators", scope: kube.AllNamespaces, want: "operators"},
		{name: "POD_NAMESPACE outside the watched one", podNamespace: "operators", scope: kube.NewScope("team-a"), want: "operators"},
		{name: "out of a cluster, the single watched namespace", scope: kube.NewScope("team-a"), want: "team-a"},
		{name: "every namespace needs POD_NAMESPACE", scope: kube.AllNamespaces, wantErr: "--leader-elect keeps its Lease in the operator's own namespace: set POD_NAMESPACE"},
		{name: "a list needs POD_NAMESPACE", scope: kube.NewScope("team-a", "team-b"), wantErr: "set POD_NAMESPACE"},
		{name: "an invalid POD_NAMESPACE", podNamespace: "Operators", scope: kube.NewScope("team-a"), wantErr: `POD_NAMESPACE="Operators" is not a namespace's name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == podNamespaceEnv {
					return tt.podNamespace
				}
				return ""
			}
			got, err := ownNamespace(getenv, tt.scope)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestNamespaceSelectorScope: --namespace-selector narrows every namespace,
// and is refused, with what to do instead, beside a WATCH_NAMESPACE that
// names its namespaces.
func TestNamespaceSelectorScope(t *testing.T) {
	tests := []struct {
		name     string
		watch    string
		selector string
		wantErr  string
	}{
		{name: "every namespace", watch: ""},
		{name: "every namespace narrowed by a selector", watch: "", selector: "memcached.example.com/tenant=true"},
		{name: "one namespace", watch: "team-a"},
		{name: "a list", watch: "team-a,team-b"},
		{name: "a selector beside one namespace is refused", watch: "team-a", selector: "tenant=true",
			wantErr: `--namespace-selector="tenant=true" applies only with WATCH_NAMESPACE="" (every namespace), not with namespace team-a: list the namespaces instead`},
		{name: "a selector beside a list is refused", watch: "team-b,team-a", selector: "tenant",
			wantErr: `--namespace-selector="tenant" applies only with WATCH_NAMESPACE="" (every namespace), not with namespaces team-a,team-b: list the namespaces instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"WATCH_NAMESPACE": tt.watch, "NAMESPACE_SELECTOR": tt.selector}
			opts, err := parseOptions(nil, func(k string) string { return env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			scope, err := watchScope(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			err = checkNamespaceSelector(scope, opts.namespaces)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}
