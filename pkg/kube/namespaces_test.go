package kube

import (
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// tenantSelector is the tests' --namespace-selector.
var tenantSelector = labels.SelectorFromSet(labels.Set{"tenant": "true"})

// namespaceWith returns the namespace name with labels, given as key,
// value pairs.
func namespaceWith(name string, kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(kv) > 0 {
		ns.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			ns.Labels[kv[i]] = kv[i+1]
		}
	}
	return ns
}

func TestNamespaceCacheServes(t *testing.T) {
	c := NewNamespaceCache(kubefake.NewSimpleClientset(), tenantSelector)
	for _, ns := range []*corev1.Namespace{
		namespaceWith("team-a", "tenant", "true", "tier", "gold"),
		// A namespace the watch delivered after it lost the labels.
		namespaceWith("team-b", "tenant", "false"),
		namespaceWith("team-c"),
	} {
		if err := c.informer.GetStore().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		namespace string
		want      bool
	}{
		{"team-a", true},
		{"team-b", false},
		{"team-c", false},
		{"team-d", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := c.Serves(tt.namespace); got != tt.want {
			t.Errorf("Serves(%q): got %v, want %v", tt.namespace, got, tt.want)
		}
	}
}

func TestNamespaceCacheReportsNamespacesThatBecomeServed(t *testing.T) {
	served := namespaceWith("team-a", "tenant", "true")
	unserved := namespaceWith("team-a", "tenant", "false")
	relabelled := namespaceWith("team-a", "tenant", "true", "tier", "gold")
	tests := []struct {
		name     string
		old, obj *corev1.Namespace // old nil: an add
		want     []string
	}{
		{name: "added with the labels", obj: served, want: []string{"team-a"}},
		{name: "added without them", obj: unserved},
		{name: "updated to the labels", old: unserved, obj: served, want: []string{"team-a"}},
		{name: "updated, still served", old: served, obj: relabelled},
		{name: "updated away from the labels", old: served, obj: unserved},
		{name: "updated, still unserved", old: unserved, obj: namespaceWith("team-a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewNamespaceCache(kubefake.NewSimpleClientset(), tenantSelector)
			var got []string
			h := c.handler(func(namespace string) { got = append(got, namespace) })
			if tt.old == nil {
				h.OnAdd(tt.obj)
			} else {
				h.OnUpdate(tt.old, tt.obj)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNamespaceCacheListsTheSelectedNamespaces: the cache asks the API
// server for the selected namespaces alone, serves them once started, and
// reports a namespace that gains the labels later.
func TestNamespaceCacheListsTheSelectedNamespaces(t *testing.T) {
	kube := kubefake.NewSimpleClientset(namespaceWith("team-a", "tenant", "true"), namespaceWith("team-b"))
	c := NewNamespaceCache(kube, tenantSelector)
	var mu sync.Mutex
	var reported []string
	c.OnServed(func(namespace string) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, namespace)
	})
	stop := make(chan struct{})
	defer close(stop)
	if err := c.Start(stop); err != nil {
		t.Fatal(err)
	}
	if !c.Serves("team-a") || c.Serves("team-b") {
		t.Errorf("after the start: Serves(team-a) %v, Serves(team-b) %v; want true, false", c.Serves("team-a"), c.Serves("team-b"))
	}
	asked := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			continue
		}
		asked++
		var selector labels.Selector
		switch a := a.(type) {
		case k8stesting.ListAction:
			selector = a.GetListRestrictions().Labels
		case k8stesting.WatchAction:
			selector = a.GetWatchRestrictions().Labels
		}
		if selector.String() != tenantSelector.String() {
			t.Errorf("%s namespaces with selector %q, want %q", a.GetVerb(), selector, tenantSelector)
		}
	}
	if asked == 0 {
		t.Error("the cache started without listing namespaces")
	}

	if _, err := kube.CoreV1().Namespaces().Update(namespaceWith("team-b", "tenant", "true")); err != nil {
		t.Fatal(err)
	}
	// The store takes an event before the handlers are told of it: wait
	// for the report, then the store holds the namespace.
	reports := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := append([]string(nil), reported...)
		sort.Strings(out)
		return out
	}
	want := []string{"team-a", "team-b"}
	err := wait.PollImmediate(5*time.Millisecond, 10*time.Second, func() (bool, error) {
		return reflect.DeepEqual(reports(), want), nil
	})
	if err != nil {
		t.Fatalf("reported %q in 10s, want %q", reports(), want)
	}
	if !c.Serves("team-b") {
		t.Error("team-b, labelled and reported, is not served")
	}
}
