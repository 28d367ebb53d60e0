package kube

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
)

// Scope is the set of namespaces the operator serves: every namespace, or
// the namespaces of a list. The zero Scope is every namespace.
type Scope struct {
	// namespaces is nil for every namespace, else sorted and without
	// duplicates.
	namespaces []string
}

// AllNamespaces is the Scope of every namespace.
var AllNamespaces = Scope{}

// ParseScope returns the Scope that WATCH_NAMESPACE's value s names: every
// namespace for an empty s; else the namespaces of the comma-separated
// list s, blanks around them, duplicates and empty items left out. A name
// that is not a namespace's name is refused with the reason, as is a list
// with no name at all (such as ","), which would otherwise quietly mean
// every namespace.
func ParseScope(s string) (Scope, error) {
	if s == "" {
		return AllNamespaces, nil
	}
	var namespaces []string
	for _, item := range strings.Split(s, ",") {
		name := strings.TrimSpace(item)
		if name == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return Scope{}, fmt.Errorf("%q is not a namespace's name: %s", name, strings.Join(errs, "; "))
		}
		namespaces = append(namespaces, name)
	}
	if len(namespaces) == 0 {
		return Scope{}, fmt.Errorf("%q names no namespace: set it to \"\" for every namespace, or to a comma-separated list of namespaces", s)
	}
	return NewScope(namespaces...), nil
}

// NewScope returns the Scope of namespaces, which must be valid names,
// sorted and without duplicates, so that the log and the watches follow one
// order however WATCH_NAMESPACE lists them; none is every namespace.
func NewScope(namespaces ...string) Scope {
	if len(namespaces) == 0 {
		return AllNamespaces
	}
	return Scope{namespaces: slices.Compact(slices.Sorted(slices.Values(namespaces)))}
}

// All reports whether s is every namespace.
func (s Scope) All() bool { return s.namespaces == nil }

// Namespaces returns the namespaces to watch, one watch each: "" alone,
// which the API server reads as every namespace, for AllNamespaces.
func (s Scope) Namespaces() []string {
	if s.All() {
		return []string{""}
	}
	return append([]string(nil), s.namespaces...)
}

// Single returns the one namespace of s and true, or "" and false when s
// is every namespace or more than one.
func (s Scope) Single() (string, bool) {
	if len(s.namespaces) == 1 {
		return s.namespaces[0], true
	}
	return "", false
}

// String names s for the log: "all namespaces", "namespace a" or
// "namespaces a,b".
func (s Scope) String() string {
	switch len(s.namespaces) {
	case 0:
		return "all namespaces"
	case 1:
		return "namespace " + s.namespaces[0]
	}
	return "namespaces " + strings.Join(s.namespaces, ",")
}

// scoped is one kind's cache over a Scope: one informer on every namespace
// for AllNamespaces, and one informer per namespace for a list. A list
// never lists or watches across namespaces, so it needs no right beyond
// each namespace's Role (deploy/rbac.yaml applied in each); one filtered
// cluster-wide informer would need a ClusterRole to list every namespace's
// objects, and would hold them all in memory before the filter.
type scoped struct {
	// informers holds the informers by namespace; "" is every namespace.
	informers map[string]cache.SharedIndexInformer
	order     []string
}

// newScoped returns the cache of scope, made of one informer that
// newInformer returns for each of scope's Namespaces.
func newScoped(scope Scope, newInformer func(namespace string) cache.SharedIndexInformer) *scoped {
	s := &scoped{informers: map[string]cache.SharedIndexInformer{}}
	for _, ns := range scope.Namespaces() {
		s.informers[ns] = newInformer(ns)
		s.order = append(s.order, ns)
	}
	return s
}

// indexer returns the store that holds namespace's objects, nil for a
// namespace outside the scope.
func (s *scoped) indexer(namespace string) cache.Indexer {
	if i, ok := s.informers[""]; ok {
		return i.GetIndexer()
	}
	if i, ok := s.informers[namespace]; ok {
		return i.GetIndexer()
	}
	return nil
}

// getByKey returns the object of the namespace/name key.
func (s *scoped) getByKey(key string) (interface{}, bool, error) {
	namespace, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	i := s.indexer(namespace)
	if i == nil {
		return nil, false, nil
	}
	return i.GetByKey(key)
}

// byIndex returns the objects that index maps to value, in every
// namespace.
func (s *scoped) byIndex(index, value string) ([]interface{}, error) {
	if len(s.order) == 1 {
		return s.informers[s.order[0]].GetIndexer().ByIndex(index, value)
	}
	var out []interface{}
	for _, ns := range s.order {
		objs, err := s.informers[ns].GetIndexer().ByIndex(index, value)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// list returns every cached object.
func (s *scoped) list() []interface{} {
	if len(s.order) == 1 {
		return s.informers[s.order[0]].GetStore().List()
	}
	var out []interface{}
	for _, ns := range s.order {
		out = append(out, s.informers[ns].GetStore().List()...)
	}
	return out
}

// AddEventHandler adds h to every informer.
func (s *scoped) AddEventHandler(h cache.ResourceEventHandler) {
	for _, ns := range s.order {
		s.informers[ns].AddEventHandler(h)
	}
}

// run runs every informer until stop is closed and returns whether each
// has synced.
func (s *scoped) run(stop <-chan struct{}) []cache.InformerSynced {
	synced := make([]cache.InformerSynced, 0, len(s.order))
	for _, ns := range s.order {
		i := s.informers[ns]
		go i.Run(stop)
		synced = append(synced, i.HasSynced)
	}
	return synced
}
