package stub

import (
	"sort"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ReasonAsExpected is the reason of a Degraded condition that is False.
	ReasonAsExpected = "AsExpected"
	// ReasonDeploymentNotOwned is the reason, on the Warning Event and on the
	// Degraded condition, used when a Deployment with the Memcached's name
	// exists but another owner controls it.
	ReasonDeploymentNotOwned = "DeploymentNotOwned"
)

// computeStatus returns the status m should have when pods are the pods its
// label selector matches and degraded is its Degraded condition. The result
// depends only on its inputs, so comparing it with m.Status tells whether a
// write is needed.
func computeStatus(m *v1alpha1.Memcached, pods []*corev1.Pod, degraded v1alpha1.MemcachedCondition, now metav1.Time) v1alpha1.MemcachedStatus {
	live := livePods(pods)
	status := v1alpha1.MemcachedStatus{
		Nodes:              podNames(live),
		Replicas:           int32(len(live)),
		ReadyReplicas:      countReady(live),
		Selector:           selectorForMemcached(m.Name).String(),
		ObservedGeneration: m.Generation,
		Conditions:         setCondition(m.Status.Conditions, degraded, now),
	}
	return status
}

// livePods drops pods that are going away: those being deleted and those
// that have terminated, which a Deployment replaces.
func livePods(pods []*corev1.Pod) []*corev1.Pod {
	var live []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live = append(live, p)
	}
	return live
}

// podNames returns the sorted names of pods. It never returns nil, because
// the CRD's schema types status.nodes as an array and null is not one.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// countReady counts the pods whose Ready condition is True.
func countReady(pods []*corev1.Pod) int32 {
	var ready int32
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready
}

// degradedCondition returns a Degraded condition; its LastTransitionTime is
// filled in by setCondition.
func degradedCondition(status corev1.ConditionStatus, reason, message string) v1alpha1.MemcachedCondition {
	return v1alpha1.MemcachedCondition{
		Type:    v1alpha1.MemcachedDegraded,
		Status:  status,
		Reason:  reason,
		Message: message,
	}
}

// setCondition returns a copy of conditions with c in place of the condition
// of the same type. LastTransitionTime moves to now only when the status
// changes, so an unchanged condition compares equal and causes no write.
func setCondition(conditions []v1alpha1.MemcachedCondition, c v1alpha1.MemcachedCondition, now metav1.Time) []v1alpha1.MemcachedCondition {
	out := make([]v1alpha1.MemcachedCondition, 0, len(conditions)+1)
	c.LastTransitionTime = now
	for _, existing := range conditions {
		if existing.Type != c.Type {
			out = append(out, existing)
			continue
		}
		if existing.Status == c.Status {
			c.LastTransitionTime = existing.LastTransitionTime
		}
	}
	return append(out, c)
}
