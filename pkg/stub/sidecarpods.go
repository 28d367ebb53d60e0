package stub

import (
	"sort"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
)

// PolledPods returns the pods whose sidecars the operator may ask for their
// report (package sidecarpoll): those of the Memcacheds that the handler
// knows in the namespaces it serves, as their status counts them (the
// pods of the Memcached's own ReplicaSets, memcached.OwnPods), and at most
// spec.size+1 of each, the most that a roll of one surge pod runs, first by
// name. The pod cache holds every pod with the operator's labels, which
// anyone who may create pods can give a pod, in any namespace; such a pod
// of no served Memcached is never asked, and one that claims a Memcached's
// ReplicaSet is asked for that Memcached alone, so that whatever it answers
// shows on that Memcached's status and costs no other one a report. The
// caller must not modify the pods.
func (h *Handler) PolledPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, m := range h.memcacheds.sizes() {
		if h.serves != nil && !h.serves(m.namespace) {
			continue
		}
		pods, err := h.client.ListPods(m.namespace, m.name)
		if err != nil {
			// A cache read: it fails only for a client without a pod
			// cache, whose pods are never asked.
			continue
		}
		own := memcached.OwnPods(m.name, pods)
		sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
		if limit := int(m.size) + 1; len(own) > limit {
			own = own[:limit]
		}
		out = append(out, own...)
	}
	return out
}
