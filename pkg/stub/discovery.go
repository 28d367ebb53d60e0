package stub

import (
	"fmt"
	"sync"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// ReasonDiscoveryCreated, ReasonDiscoveryUpdated and
	// ReasonDiscoveryDeleted are the reasons of the Normal Events recorded
	// when the operator creates a Memcached's discovery ConfigMap, writes a
	// new membership into it, or deletes it once discovery is off.
	ReasonDiscoveryCreated = "DiscoveryCreated"
	ReasonDiscoveryUpdated = "DiscoveryUpdated"
	ReasonDiscoveryDeleted = "DiscoveryDeleted"
)

// discoveryChild is the ConfigMap of a Memcached with discovery: the Ready
// pods, as the sidecars serve them to ElastiCache clients, and the version
// of that membership (see memcached.NextCluster). It is written only when
// the Ready pods change, or when someone changed what it holds, and then
// always with a version one above both the one it held and the status's
// DiscoveryVersion, so that clients see every change as newer. It is
// deleted once discovery is off; only a Memcached whose status records a
// version may have one, so the others cost no read.
//
// How long a change takes to reach clients: the reconcile follows a pod's
// readiness within --child-updates-batch-period; the kubelet writes the
// ConfigMap's new content into each pod's volume at its next sync of the
// pod, within its --sync-frequency (1m by default) plus its ConfigMap
// cache's TTL; the sidecar reads the file at every request, so it serves
// what the kubelet wrote at once; and a client sees it at its next poll.
var discoveryChild = &ownedChild[*corev1.ConfigMap]{
	childKind: childKind{
		kind:         "configmap",
		readFailed:   memcached.ReasonConfigMapReadFailed,
		createFailed: memcached.ReasonConfigMapCreateFailed,
		notOwned:     memcached.ReasonConfigMapNotOwned,
		updateFailed: memcached.ReasonConfigMapUpdateFailed,
		deleteFailed: memcached.ReasonConfigMapDeleteFailed,
	},
	api:    configMapKind,
	wanted: memcached.Discovered,
	// Only a Memcached that had discovery has a version in its status.
	removeUnwanted: func(m *v1alpha1.Memcached) bool { return m.Status.DiscoveryVersion > 0 },
	want:           wantDiscovery,
	holds: func(got, want *corev1.ConfigMap) bool {
		return got.Data[memcached.DiscoveryKey] == want.Data[memcached.DiscoveryKey]
	},
	// The resourceVersion is the write's precondition: a ConfigMap that
	// changed since the cache showed it may hold a version as high as the
	// one computed from the cache, and the API server refuses the patch
	// (kube.ErrChanged) instead of letting a stale cache write an equal or
	// lower version than clients have seen.
	restore: func(got, want *corev1.ConfigMap) map[string]interface{} {
		return map[string]interface{}{"/data": want.Data, "/metadata/resourceVersion": got.ResourceVersion}
	},
	wrote: func(h *Handler, m *v1alpha1.Memcached, written *corev1.ConfigMap) {
		if c, ok := memcached.DiscoveryCluster(written); ok {
			h.written.put(m.Namespace+"/"+m.Name, m.UID, c)
		}
	},
	restoreFailed: "failed to write the membership into configmap %s/%s: %w",
	created:       event{ReasonDiscoveryCreated, "Created configmap %s, the membership that the discovery endpoint serves"},
	restored:      event{ReasonDiscoveryUpdated, "Wrote a new membership into configmap %s"},
	deleted:       event{ReasonDiscoveryDeleted, "Deleted configmap %s: discovery is off"},
}

// configMapKind is the kind of the discovery ConfigMap.
var configMapKind = &kube.Kind{
	Resource: corev1.SchemeGroupVersion.WithResource(memcached.ConfigMapResource.Resource),
	New:      func() kube.Object { return &corev1.ConfigMap{} },
	NewList:  func() runtime.Object { return &corev1.ConfigMapList{} },
	Trim:     kube.TrimOf(trimConfigMap),
}

// wantDiscovery returns the discovery ConfigMap of m: the membership of
// m's Ready pods as the client's cache shows them, at the version that
// memcached.NextCluster gives against the ConfigMap that the cache holds,
// if it is m's own, above the floor of discoveryFloor. What this process
// last wrote counts as what the ConfigMap holds when it is newer than the
// cache's: the cache shows a write of the operator's own a moment after
// it, and a reconcile in that moment whose pods changed again must still
// go one version above the write, not reuse its version for another
// membership. A ConfigMap that the cache does not show is written again
// above every version known, never at one of them: its clients have seen
// the last one. The write itself carries the resourceVersion of what the
// cache showed (see discoveryChild's restore), so that a cache further
// behind than this process's memory never writes a version that is not
// above the ConfigMap's.
func wantDiscovery(h *Handler, m *v1alpha1.Memcached) (*corev1.ConfigMap, error) {
	pods, err := h.client.ListPods(m.Namespace, m.Name)
	if err != nil {
		return nil, fmt.Errorf("failed to list the pods of memcached %s/%s: %v", m.Namespace, m.Name, err)
	}
	got, err := typed[*corev1.ConfigMap]{h.client, configMapKind}.get(m.Namespace, m.Name)
	if err != nil && !isGone(err) {
		return nil, fmt.Errorf("failed to get configmap %s/%s: %v", m.Namespace, m.Name, err)
	}
	if err != nil {
		got = nil
	}
	var stored sidecar.Cluster
	ok := false
	if got != nil && got.GetDeletionTimestamp() == nil && metav1.IsControlledBy(got, m) {
		stored, ok = memcached.DiscoveryCluster(got)
	}
	if w, found := h.written.get(m.Namespace+"/"+m.Name, m.UID); found && ok && w.Version > stored.Version {
		stored = w
	}
	next := memcached.NextCluster(h.discoveryFloor(m, got), stored, ok, memcached.ReadyNodes(memcached.OwnPods(m.Name, pods)))
	return memcached.NewDiscoveryConfigMap(m, next), nil
}

// trimConfigMap keeps what discoveryChild compares: the ConfigMap's
// metadata without annotations, and its data.
func trimConfigMap(cm *corev1.ConfigMap) {
	cm.Annotations = nil
	cm.BinaryData = nil
}

// discoveryVersion returns the version of the membership that m's status
// should record: discoveryFloor, and the version that m's own discovery
// ConfigMap holds, as the cache shows it. It is recorded whether or not
// discovery is on, so that turning discovery off and on again, even
// across an operator restart, goes on above every version written. Only
// a Memcached with discovery, or whose status records a version, may have
// a ConfigMap, so the others cost no read.
func (h *Handler) discoveryVersion(m *v1alpha1.Memcached) int64 {
	if !memcached.Discovered(m) && m.Status.DiscoveryVersion == 0 {
		return h.discoveryFloor(m, nil)
	}
	got, err := typed[*corev1.ConfigMap]{h.client, configMapKind}.get(m.Namespace, m.Name)
	if err != nil {
		got = nil
	}
	v := h.discoveryFloor(m, got)
	if got == nil || !metav1.IsControlledBy(got, m) {
		return v
	}
	if c, ok := memcached.DiscoveryCluster(got); ok && c.Version > v {
		v = c.Version
	}
	return v
}

// discoveryFloor returns the highest version of m's membership that its
// clients may have seen besides what m's own ConfigMap holds: the status's
// DiscoveryVersion, what this process last wrote for m, and what got, the
// ConfigMap of m's name as the cache shows it (nil for none), holds when
// it is the child of an earlier Memcached of m's name (see
// memcached.FormerChild): m's new pods may mount it before the garbage
// collector removes it, and its clients keep its version. The status
// records the floor (see discoveryVersion), so that a fresh operator,
// which knows nothing of the earlier ConfigMap once it is gone, still goes
// on above it.
func (h *Handler) discoveryFloor(m *v1alpha1.Memcached, got *corev1.ConfigMap) int64 {
	v := m.Status.DiscoveryVersion
	if w, ok := h.written.get(m.Namespace+"/"+m.Name, m.UID); ok && w.Version > v {
		v = w.Version
	}
	if got == nil || !memcached.FormerChild(got, m) {
		return v
	}
	if c, ok := memcached.DiscoveryCluster(got); ok && c.Version > v {
		v = c.Version
	}
	return v
}

// writtenClusters remembers the membership last written into each
// Memcached's discovery ConfigMap, by namespace/name, for the Memcached's
// UID. Safe for concurrent use.
type writtenClusters struct {
	mu    sync.Mutex
	items map[string]writtenCluster
}

type writtenCluster struct {
	uid     types.UID
	cluster sidecar.Cluster
}

func newWrittenClusters() *writtenClusters {
	return &writtenClusters{items: map[string]writtenCluster{}}
}

func (w *writtenClusters) get(key string, uid types.UID) (sidecar.Cluster, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.items[key]
	if !ok || e.uid != uid {
		return sidecar.Cluster{}, false
	}
	return e.cluster, true
}

func (w *writtenClusters) put(key string, uid types.UID, c sidecar.Cluster) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.items[key] = writtenCluster{uid: uid, cluster: c}
}

func (w *writtenClusters) delete(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.items, key)
}
