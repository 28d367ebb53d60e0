package stub

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
)

func TestPolledPodsAreThoseOfServedMemcacheds(t *testing.T) {
	a := memcachedtest.NewMemcached("a", 2)
	elsewhere := memcachedtest.NewMemcached("a", 1)
	elsewhere.Namespace = "unserved"
	pod := func(m, owner string, namespace, name string) *corev1.Pod {
		p := memcachedtest.NewPod(memcachedtest.NewMemcached(m, 1), name, corev1.PodRunning, true)
		p.Namespace = namespace
		p.OwnerReferences[0].Name = owner + "-" + memcachedtest.PodTemplateHash
		return p
	}
	var objs []*corev1.Pod
	// Four pods of a's ReplicaSet: spec.size+1 of them are asked.
	for i := range 4 {
		objs = append(objs, pod("a", "a", "test", fmt.Sprintf("a-%d", i)))
	}
	objs = append(objs,
		// a's labels, but another ReplicaSet: not one of a's pods.
		pod("a", "tenant", "test", "a-tenant"),
		// The labels of a Memcached that does not exist.
		pod("ghost", "ghost", "test", "ghost-0"),
		// A Memcached the handler knows, in a namespace it does not serve.
		pod("a", "a", "unserved", "a-unserved"),
	)
	f := newFixture(t, a)
	f.client.pods = objs
	f.handler.memcacheds.store("unserved/a", elsewhere)
	f.handler.ServeNamespaces(func(namespace string) bool { return namespace == "test" })

	var got []string
	for _, p := range f.handler.PolledPods() {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	sort.Strings(got)
	if want := []string{"test/a-0", "test/a-1", "test/a-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("PolledPods: got %v, want %v", got, want)
	}
}
