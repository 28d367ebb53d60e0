package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MemcachedList is a list of Memcached resources, as the API server returns it.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Memcached `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Memcached asks the operator for a memcached cluster of spec.size pods and
// reports the pods it runs in status.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              MemcachedSpec   `json:"spec"`
	Status            MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is the desired state that users write.
type MemcachedSpec struct {
	// Size is the number of memcached pods to run; the CRD bounds it to 0..100.
	Size int32 `json:"size"`
}

// MemcachedStatus is the observed state that only the operator writes.
type MemcachedStatus struct {
	// Nodes are the names of the memcached pods, sorted so that the field
	// changes only when the set of pods does.
	Nodes []string `json:"nodes"`
	// Replicas is the number of memcached pods; the scale subresource reads it.
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of memcached pods whose Ready condition is true.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector is the pods' label selector in string form, for the scale
	// subresource and so for `kubectl scale` and autoscalers.
	Selector string `json:"selector,omitempty"`
	// ObservedGeneration is the metadata.generation this status was computed from.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions say whether the memcached pods are available and, when
	// they are not, whether they are still starting or why they fail.
	Conditions []MemcachedCondition `json:"conditions,omitempty"`
}

// MemcachedConditionType names a condition of a Memcached.
type MemcachedConditionType string

const (
	// MemcachedAvailable is True once at least spec.size memcached pods are
	// Ready, so a Memcached of size 0 is always available.
	MemcachedAvailable MemcachedConditionType = "Available"
	// MemcachedDegraded is True while the operator cannot manage the
	// Memcached's Deployment, because another owner holds its name or the
	// API server refuses to create, scale or read it (a quota, RBAC or an
	// admission policy, with the API server's message), or while a memcached
	// pod fails in a way that needs a change from outside, such as a crash
	// loop, an image that cannot be pulled or no node to run on. It returns
	// to False by itself once the cause is gone.
	MemcachedDegraded MemcachedConditionType = "Degraded"
)

// MemcachedCondition is one observation about a Memcached, in the shape of
// the conditions of built-in workloads.
type MemcachedCondition struct {
	// Type is the condition's name.
	Type MemcachedConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// Reason is a CamelCase word that machines can match on.
	Reason string `json:"reason,omitempty"`
	// Message explains the condition to a human.
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}
