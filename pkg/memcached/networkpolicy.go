package memcached

import (
	"encoding/json"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NamespaceNameLabel is the label that the API server gives every
// namespace, with its name, since Kubernetes 1.21: a namespace selector on
// it names one namespace.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// OperatorPodLabels returns the labels of the operator's own pods, those
// of deploy/operator.yaml's pod template, which the CSV copies: the
// NetworkPolicy of a Memcached admits pods with them to the sidecar's port,
// so that the operator's poll of the sidecars' reports (package
// sidecarpoll) keeps working.
func OperatorPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "memcached-operator"}
}

// NetworkPolicyOptions are the operator's settings that every Memcached's
// NetworkPolicy takes.
type NetworkPolicyOptions struct {
	// MonitoringNamespaces selects the namespaces whose pods may scrape
	// the metrics of a Memcached whose spec.networkPolicy.monitoringFrom
	// is empty; nil admits none of them.
	MonitoringNamespaces *metav1.LabelSelector
	// OperatorNamespace is the operator's own namespace, whose pods of
	// OperatorPodLabels may reach the sidecar's port; "" for an operator
	// that runs out of a cluster, which is no pod a policy can name.
	OperatorNamespace string
}

// WantsNetworkPolicy reports whether m asks for a NetworkPolicy.
func WantsNetworkPolicy(m *v1alpha1.Memcached) bool {
	return m.Spec.NetworkPolicy != nil && m.Spec.NetworkPolicy.Enabled
}

// NewNetworkPolicy returns the NetworkPolicy of m's pods: it admits
// ingress only, and only to the ports the pods serve, each from its own
// peers:
//   - memcached's port, and the discovery port with discovery, from
//     spec.networkPolicy.from, or the pods of m's namespace;
//   - the sidecar's port, where the pods run one, from the operator's pods,
//     which poll its report, and, with monitoring, from
//     spec.networkPolicy.monitoringFrom, or the namespaces of
//     o.MonitoringNamespaces.
//
// A rule never has an empty list of peers, which would admit everyone: a
// port that no peer may reach has no rule. The policy selects m's pods by
// the labels that the Deployment selects them by, and never changes them,
// so that a change of it rolls no pod.
func NewNetworkPolicy(m *v1alpha1.Memcached, o NetworkPolicyOptions) *networkingv1.NetworkPolicy {
	var spec v1alpha1.MemcachedNetworkPolicy
	if m.Spec.NetworkPolicy != nil {
		spec = *m.Spec.NetworkPolicy.DeepCopy()
	}
	clients := spec.From
	if len(clients) == 0 {
		clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	servePorts := []int{memcachedPort}
	if Discovered(m) {
		servePorts = append(servePorts, discoveryPort)
	}
	rules := []networkingv1.NetworkPolicyIngressRule{{Ports: tcpPorts(servePorts...), From: clients}}

	if needsSidecar(m) {
		var sidecarPeers []networkingv1.NetworkPolicyPeer
		if o.OperatorNamespace != "" {
			sidecarPeers = append(sidecarPeers, networkingv1.NetworkPolicyPeer{
				PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels()},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: o.OperatorNamespace}},
			})
		}
		if Monitored(m) {
			switch {
			case len(spec.MonitoringFrom) > 0:
				sidecarPeers = append(sidecarPeers, spec.MonitoringFrom...)
			case o.MonitoringNamespaces != nil:
				sidecarPeers = append(sidecarPeers, networkingv1.NetworkPolicyPeer{NamespaceSelector: o.MonitoringNamespaces.DeepCopy()})
			}
		}
		if len(sidecarPeers) > 0 {
			rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: tcpPorts(metricsPort), From: sidecarPeers})
		}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: childMeta(m),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: Labels(m.Name)},
			Ingress:     rules,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

// NetworkPolicyDigest returns a digest of spec, a NetworkPolicy's spec,
// typed or as JSON content, that depends on its JSON alone: the cache keeps
// that of the live policy in ObservedDigestAnnotation, which equals the
// wanted policy's exactly when the live one holds what the operator set
// and nothing more, even a field that client-go 1.11's type lacks, such as
// a port's endPort, which would widen a rule to a range of ports.
func NetworkPolicyDigest(spec interface{}) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	// Through generic JSON, so that a typed spec's fields come in the
	// sorted order of a decoded one's keys.
	var content interface{}
	if err := json.Unmarshal(b, &content); err != nil {
		return "", err
	}
	return shortHash(content)
}

// tcpPorts returns the TCP ports of a rule.
func tcpPorts(ports ...int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		tcp := corev1.ProtocolTCP
		port := intstr.FromInt(p)
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
	}
	return out
}

// NetworkPolicyResource is the resource of the NetworkPolicy, for its REST
// path and the errors that name it.
var NetworkPolicyResource = schema.GroupResource{Group: networkingv1.GroupName, Resource: "networkpolicies"}

// The reasons below name the failed steps of the Memcached's NetworkPolicy,
// as those of reasons.go name the Deployment's.
const (
	// ReasonNetworkPolicyCreateFailed and the three reasons after it are the
	// same for the Memcached's NetworkPolicy, which the operator also
	// deletes when spec.networkPolicy is turned off. A create the API
	// server refuses, such as one of a peer whose ipBlock is no CIDR, is
	// one of them.
	ReasonNetworkPolicyCreateFailed = "NetworkPolicyCreateFailed"
	ReasonNetworkPolicyReadFailed   = "NetworkPolicyReadFailed"
	ReasonNetworkPolicyUpdateFailed = "NetworkPolicyUpdateFailed"
	ReasonNetworkPolicyDeleteFailed = "NetworkPolicyDeleteFailed"
	// ReasonNetworkPolicyNotOwned means a NetworkPolicy with the
	// Memcached's name exists but another owner controls it; the operator
	// leaves it alone, and neither creates nor deletes one.
	ReasonNetworkPolicyNotOwned = "NetworkPolicyNotOwned"
)
