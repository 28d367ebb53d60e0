package stub

import (
	"reflect"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestComputeStatus(t *testing.T) {
	m := newMemcached("example", 3)
	deleting := newPod(m, "example-deleting", corev1.PodRunning, true)
	deleting.DeletionTimestamp = &testNow
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		wantNodes []string
		wantReady int32
	}{
		{name: "no pods", pods: nil, wantNodes: []string{}},
		{
			name: "sorted",
			pods: []*corev1.Pod{
				newPod(m, "example-z", corev1.PodRunning, true),
				newPod(m, "example-a", corev1.PodRunning, true),
				newPod(m, "example-m", corev1.PodRunning, true),
			},
			wantNodes: []string{"example-a", "example-m", "example-z"},
			wantReady: 3,
		},
		{
			name: "pending and unready pods are listed but not ready",
			pods: []*corev1.Pod{
				newPod(m, "example-b", corev1.PodPending, false),
				newPod(m, "example-a", corev1.PodRunning, false),
			},
			wantNodes: []string{"example-a", "example-b"},
		},
		{
			name: "deleting and terminated pods are left out",
			pods: []*corev1.Pod{
				deleting,
				newPod(m, "example-failed", corev1.PodFailed, false),
				newPod(m, "example-done", corev1.PodSucceeded, false),
				newPod(m, "example-a", corev1.PodRunning, true),
			},
			wantNodes: []string{"example-a"},
			wantReady: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond := degradedCondition(corev1.ConditionFalse, ReasonAsExpected, "")

			got := computeStatus(m, tt.pods, cond, testNow)

			if !reflect.DeepEqual(got.Nodes, tt.wantNodes) {
				t.Errorf("nodes: got %#v, want %#v", got.Nodes, tt.wantNodes)
			}
			if got.Replicas != int32(len(tt.wantNodes)) || got.ReadyReplicas != tt.wantReady {
				t.Errorf("replicas/ready: got %d/%d, want %d/%d", got.Replicas, got.ReadyReplicas, len(tt.wantNodes), tt.wantReady)
			}
			if got.Selector != "app=memcached,memcached_cr=example" {
				t.Errorf("selector: got %q", got.Selector)
			}
			if got.ObservedGeneration != m.Generation {
				t.Errorf("observedGeneration: got %d, want %d", got.ObservedGeneration, m.Generation)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	earlier := metav1.NewTime(testNow.Add(-time.Hour))
	other := v1alpha1.MemcachedCondition{Type: "Other", Status: corev1.ConditionTrue, LastTransitionTime: earlier}
	tests := []struct {
		name     string
		existing []v1alpha1.MemcachedCondition
		set      v1alpha1.MemcachedCondition
		want     []v1alpha1.MemcachedCondition
	}{
		{
			name: "added with the current time",
			set:  degradedCondition(corev1.ConditionFalse, ReasonAsExpected, ""),
			want: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse, Reason: ReasonAsExpected, LastTransitionTime: testNow},
			},
		},
		{
			name: "same status keeps its transition time",
			existing: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: "Old", LastTransitionTime: earlier},
			},
			set: degradedCondition(corev1.ConditionTrue, ReasonDeploymentNotOwned, "msg"),
			want: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: ReasonDeploymentNotOwned, Message: "msg", LastTransitionTime: earlier},
			},
		},
		{
			name: "changed status moves the transition time and keeps other types",
			existing: []v1alpha1.MemcachedCondition{
				other,
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			},
			set: degradedCondition(corev1.ConditionFalse, ReasonAsExpected, ""),
			want: []v1alpha1.MemcachedCondition{
				other,
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse, Reason: ReasonAsExpected, LastTransitionTime: testNow},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := append([]v1alpha1.MemcachedCondition(nil), tt.existing...)

			got := setCondition(existing, tt.set, testNow)

			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(existing, tt.existing) {
				t.Errorf("setCondition modified its input: %+v", existing)
			}
		})
	}
}
