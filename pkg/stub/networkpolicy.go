package stub

import (
	"encoding/json"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// ReasonNetworkPolicyCreated, ReasonNetworkPolicyUpdated and
	// ReasonNetworkPolicyDeleted are the reasons of the Normal Events
	// recorded when the operator creates a Memcached's NetworkPolicy,
	// restores its spec, or deletes it once spec.networkPolicy is off.
	ReasonNetworkPolicyCreated = "NetworkPolicyCreated"
	ReasonNetworkPolicyUpdated = "NetworkPolicyUpdated"
	ReasonNetworkPolicyDeleted = "NetworkPolicyDeleted"
)

// networkPolicyChild is the NetworkPolicy of a Memcached with
// spec.networkPolicy enabled, built with the handler's
// memcached.NetworkPolicyOptions; once it is off, m's own is deleted. Its
// spec is restored whole when someone changed it: the cache keeps no
// rules, only the digest of the live spec (observeNetworkPolicy), so that
// an edit that client-go 1.11's type cannot show, such as a port's
// endPort, is put back too. The policy selects the pods by their labels
// and never touches the pod template, so no change of it rolls a pod.
var networkPolicyChild = &ownedChild[*networkingv1.NetworkPolicy]{
	childKind: childKind{
		kind:         "networkpolicy",
		readFailed:   memcached.ReasonNetworkPolicyReadFailed,
		createFailed: memcached.ReasonNetworkPolicyCreateFailed,
		notOwned:     memcached.ReasonNetworkPolicyNotOwned,
		updateFailed: memcached.ReasonNetworkPolicyUpdateFailed,
		deleteFailed: memcached.ReasonNetworkPolicyDeleteFailed,
	},
	api: &kube.Kind{
		Resource: networkingv1.SchemeGroupVersion.WithResource(memcached.NetworkPolicyResource.Resource),
		New:      func() kube.Object { return &networkingv1.NetworkPolicy{} },
		NewList:  func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Trim:     kube.TrimOf(trimNetworkPolicy),
		Observe:  observeNetworkPolicy,
	},
	wanted: memcached.WantsNetworkPolicy,
	// The cache holds every policy the operator labelled, so looking for
	// one to delete costs no request.
	removeUnwanted: func(*v1alpha1.Memcached) bool { return true },
	want: func(h *Handler, m *v1alpha1.Memcached) (*networkingv1.NetworkPolicy, error) {
		return memcached.NewNetworkPolicy(m, h.networkPolicies), nil
	},
	holds: func(got, want *networkingv1.NetworkPolicy) bool {
		digest, err := memcached.NetworkPolicyDigest(want.Spec)
		return err == nil && got.Annotations[memcached.ObservedDigestAnnotation] == digest
	},
	restore: func(_, want *networkingv1.NetworkPolicy) map[string]interface{} {
		return map[string]interface{}{"/spec": want.Spec}
	},
	restoreFailed: "failed to restore networkpolicy %s/%s: %w",
	created:       event{ReasonNetworkPolicyCreated, "Created networkpolicy %s"},
	restored:      event{ReasonNetworkPolicyUpdated, "Restored the spec of networkpolicy %s"},
	deleted:       event{ReasonNetworkPolicyDeleted, "Deleted networkpolicy %s: spec.networkPolicy is off"},
}

// observeNetworkPolicy keeps memcached.NetworkPolicyDigest of the spec of
// raw, the live policy, in obj's memcached.ObservedDigestAnnotation, which
// trimNetworkPolicy keeps in place of the spec.
func observeNetworkPolicy(raw []byte, _, obj kube.Object) error {
	var live struct {
		Spec interface{} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &live); err != nil {
		return fmt.Errorf("failed to decode networkpolicy %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	digest, err := memcached.NetworkPolicyDigest(live.Spec)
	if err != nil {
		return fmt.Errorf("failed to digest networkpolicy %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[memcached.ObservedDigestAnnotation] = digest
	obj.SetAnnotations(annotations)
	return nil
}

// trimNetworkPolicy keeps what networkPolicyChild compares: the policy's
// metadata with the digest of its spec alone among its annotations.
func trimNetworkPolicy(p *networkingv1.NetworkPolicy) {
	digest, ok := p.Annotations[memcached.ObservedDigestAnnotation]
	p.Annotations = nil
	if ok {
		p.Annotations = map[string]string{memcached.ObservedDigestAnnotation: digest}
	}
	p.Spec = networkingv1.NetworkPolicySpec{}
}
