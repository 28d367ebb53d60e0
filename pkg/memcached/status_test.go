package memcached_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestComputeStatus(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	deleting := memcachedtest.NewPod(m, "example-deleting", corev1.PodRunning, true)
	deleting.DeletionTimestamp = &memcachedtest.Now
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
				memcachedtest.NewPod(m, "example-z", corev1.PodRunning, true),
				memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
				memcachedtest.NewPod(m, "example-m", corev1.PodRunning, true),
			},
			wantNodes: []string{"example-a", "example-m", "example-z"},
			wantReady: 3,
		},
		{
			name: "pending and unready pods are listed but not ready",
			pods: []*corev1.Pod{
				memcachedtest.NewPod(m, "example-b", corev1.PodPending, false),
				memcachedtest.NewPod(m, "example-a", corev1.PodRunning, false),
			},
			wantNodes: []string{"example-a", "example-b"},
		},
		{
			name: "deleting and terminated pods are left out",
			pods: []*corev1.Pod{
				deleting,
				memcachedtest.NewPod(m, "example-failed", corev1.PodFailed, false),
				memcachedtest.NewPod(m, "example-done", corev1.PodSucceeded, false),
				memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
			},
			wantNodes: []string{"example-a"},
			wantReady: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memcached.ComputeStatus(m, memcached.Observation{Pods: tt.pods}, memcachedtest.Now)

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
			want := []v1alpha1.MemcachedCondition{memcached.AvailableCondition(m, tt.pods), memcached.ProgressingCondition(m, memcached.Observation{Pods: tt.pods}), memcached.DegradedCondition(m, memcached.Observation{Pods: tt.pods})}
			for i := range want {
				want[i].LastTransitionTime = memcachedtest.Now
				want[i].ObservedGeneration = m.Generation
			}
			if !reflect.DeepEqual(got.Conditions, want) {
				t.Errorf("conditions:\n got %+v\nwant %+v", got.Conditions, want)
			}
		})
	}
}

func TestDegradedCondition(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 0)
	ready := func(name string) *corev1.Pod { return memcachedtest.NewPod(m, name, corev1.PodRunning, true) }
	pending := func(name string) *corev1.Pod { return memcachedtest.NewPod(m, name, corev1.PodPending, false) }
	running := func(name string) *corev1.Pod { return memcachedtest.NewPod(m, name, corev1.PodRunning, false) }
	deleting := memcachedtest.WithContainers(running("example-old"), memcachedtest.CrashLooping("example-old", "10s", 1))
	deleting.DeletionTimestamp = &memcachedtest.Now
	unschedulable := pending("example-a")
	unschedulable.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient memory.",
	}}
	initCrashing := pending("example-a")
	initCrashing.Status.InitContainerStatuses = []corev1.ContainerStatus{memcachedtest.CrashLooping("example-a", "20s", 2)}
	initCrashing.Status.InitContainerStatuses[0].Name = "init"
	initCrashing.Status.ContainerStatuses = []corev1.ContainerStatus{memcachedtest.Waiting("memcached", "PodInitializing", "")}
	runningAgain := corev1.ContainerStatus{
		Name:                 "memcached",
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &memcachedtest.MemcachedExit},
	}
	recovered := runningAgain
	recovered.Ready = true
	oomKilled := corev1.ContainerStatus{
		Name:  "memcached",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
	}
	exitedCleanly := corev1.ContainerStatus{
		Name:  "memcached",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
	}
	// mounted is a pod whose volumes the kubelet mounted after FailedMount
	// Events: it made the pod's sandbox, and pulls the images.
	mounted := memcachedtest.Starting(pending("example-a"), "memcached")
	mounted.Status.Conditions[1].Status = corev1.ConditionTrue
	// restarting is a container that ran, exited cleanly and is being made
	// again.
	restarting := memcachedtest.Waiting("memcached", "ContainerCreating", "")
	restarting.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
	const crashLoopMessage = "container memcached: back-off restarting failed container that exited with code 64 (Error): " +
		"Cannot set item size limit higher than 1/2 of memory max."
	refresh := func(pod string) memcached.SidecarProblem {
		return memcached.SidecarProblem{Pod: pod, Reason: "CertificateRefreshFailed", Message: "memcached refused to reload its certificate: refresh_certs: ERROR"}
	}
	tests := []struct {
		name string
		size int32
		pods []*corev1.Pod
		// problems are what the pods' sidecars report.
		problems []memcached.SidecarProblem
		// mounts are the pods' newest FailedMount messages, by pod UID.
		mounts  map[types.UID]string
		status  corev1.ConditionStatus
		reason  string
		message string
	}{
		{
			name: "a Secret the kubelet cannot mount",
			size: 1, pods: []*corev1.Pod{memcachedtest.Starting(pending("example-a"), "memcached", memcached.SidecarName)},
			mounts: map[types.UID]string{"uid-example-a": memcachedtest.MissingSecret("tls", "cert")},
			status: corev1.ConditionTrue, reason: memcached.ReasonFailedMount,
			message: `pod example-a: MountVolume.SetUp failed for volume "tls" : secret "cert" not found`,
		},
		{
			name: "a key the Secret lacks, before the kubelet reported any container",
			size: 1, pods: []*corev1.Pod{pending("example-a")},
			mounts: map[types.UID]string{"uid-example-a": memcachedtest.MissingSecretKey("tls", "ca.crt")},
			status: corev1.ConditionTrue, reason: memcached.ReasonFailedMount,
			message: `pod example-a: MountVolume.SetUp failed for volume "tls" : references non-existent secret key: ca.crt`,
		},
		{
			name: "the first pod by name that cannot mount",
			size: 2, pods: []*corev1.Pod{memcachedtest.Starting(pending("example-b"), "memcached"), memcachedtest.Starting(pending("example-a"), "memcached")},
			mounts: map[types.UID]string{
				"uid-example-a": memcachedtest.MissingSecretKey("auth", "passwords"),
				"uid-example-b": memcachedtest.MissingSecret("auth", "users"),
			},
			status: corev1.ConditionTrue, reason: memcached.ReasonFailedMount,
			message: `pod example-a: MountVolume.SetUp failed for volume "auth" : references non-existent secret key: passwords`,
		},
		{
			name: "an Event from before the kubelet mounted the volumes is history",
			size: 1, pods: []*corev1.Pod{mounted},
			mounts: map[types.UID]string{"uid-example-a": memcachedtest.MissingSecret("tls", "cert")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "0/1 pods ready",
		},
		{
			name: "an Event of a pod whose containers run is history",
			size: 1, pods: []*corev1.Pod{ready("example-a")},
			mounts: map[types.UID]string{"uid-example-a": memcachedtest.MissingSecret("tls", "cert")},
			status: corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name: "an Event of a pod whose containers ran before is history",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), restarting)},
			mounts: map[types.UID]string{"uid-example-a": memcachedtest.MissingSecret("tls", "cert")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "0/1 pods ready",
		},
		{
			name: "an Event of another pod, of the same name before, is not this pod's",
			size: 1, pods: []*corev1.Pod{memcachedtest.Starting(pending("example-a"), "memcached")},
			mounts: map[types.UID]string{"uid-example-gone": memcachedtest.MissingSecret("tls", "cert")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "0/1 pods ready",
		},
		{
			name: "a sidecar's problem while all are ready",
			size: 2, pods: []*corev1.Pod{ready("example-a"), ready("example-b")},
			problems: []memcached.SidecarProblem{refresh("example-b"), {Pod: "example-b", Reason: "AuthReloadFailed", Message: "malformed"}},
			status:   corev1.ConditionTrue, reason: "CertificateRefreshFailed",
			message: "pod example-b: sidecar: memcached refused to reload its certificate: refresh_certs: ERROR",
		},
		{
			name: "the first pod's problem by name",
			size: 2, pods: []*corev1.Pod{ready("example-a"), ready("example-b")},
			problems: []memcached.SidecarProblem{{Pod: "example-b", Reason: "AuthReloadFailed", Message: "malformed"}, refresh("example-a")},
			status:   corev1.ConditionTrue, reason: "CertificateRefreshFailed",
			message: "pod example-a: sidecar: memcached refused to reload its certificate: refresh_certs: ERROR",
		},
		{
			name: "a sidecar whose worker fails, before what the worker reported",
			size: 2, pods: []*corev1.Pod{ready("example-a"), ready("example-b")},
			problems: []memcached.SidecarProblem{
				{Pod: "example-a", Reason: "SidecarFailing", Message: "its worker exited (signal: killed); it is restarted with backoff until it runs for 1m0s"},
				refresh("example-a"),
			},
			status: corev1.ConditionTrue, reason: "SidecarFailing",
			message: "pod example-a: sidecar: its worker exited (signal: killed); it is restarted with backoff until it runs for 1m0s",
		},
		{
			name: "a failed pod comes before a sidecar's problem",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), memcachedtest.CrashLooping("example-a", "10s", 1))},
			problems: []memcached.SidecarProblem{refresh("example-a")},
			status:   corev1.ConditionTrue, reason: "CrashLoopBackOff", message: "pod example-a: " + crashLoopMessage,
		},
		{
			name: "a sidecar's problem while pods start",
			size: 2, pods: []*corev1.Pod{ready("example-a"), pending("example-b")},
			problems: []memcached.SidecarProblem{refresh("example-a")},
			status:   corev1.ConditionTrue, reason: "CertificateRefreshFailed",
			message: "pod example-a: sidecar: memcached refused to reload its certificate: refresh_certs: ERROR",
		},
		{
			name: "the problem of a pod that is gone or going is not reported",
			size: 1, pods: []*corev1.Pod{deleting, ready("example-new")},
			problems: []memcached.SidecarProblem{refresh("example-old"), refresh("example-gone")},
			status:   corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name: "all ready",
			size: 2, pods: []*corev1.Pod{ready("example-a"), ready("example-b")},
			status: corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name:   "size 0 without pods",
			status: corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name: "more ready than wanted while scaling down",
			size: 1, pods: []*corev1.Pod{ready("example-a"), ready("example-b")},
			status: corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name: "a failing surplus pod once enough are ready",
			size: 1, pods: []*corev1.Pod{ready("example-a"), memcachedtest.WithContainers(running("example-b"), memcachedtest.CrashLooping("example-b", "10s", 1))},
			status: corev1.ConditionFalse, reason: memcached.ReasonAsExpected,
		},
		{
			name: "starting",
			size: 3, pods: []*corev1.Pod{ready("example-a"), memcachedtest.WithContainers(pending("example-b"), memcachedtest.Waiting("memcached", "ContainerCreating", "")), pending("example-c")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "1/3 pods ready",
		},
		{
			name: "crash loop",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), memcachedtest.CrashLooping("example-a", "10s", 1))},
			status: corev1.ConditionTrue, reason: "CrashLoopBackOff", message: "pod example-a: " + crashLoopMessage,
		},
		{
			name: "image pull back-off",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(pending("example-a"), memcachedtest.Waiting("memcached", "ImagePullBackOff", `Back-off pulling image "memcached:nope"`))},
			status: corev1.ConditionTrue, reason: "ImagePullBackOff", message: `pod example-a: container memcached: Back-off pulling image "memcached:nope"`,
		},
		{
			name: "image pull error",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(pending("example-a"), memcachedtest.Waiting("memcached", "ErrImagePull", "manifest unknown"))},
			status: corev1.ConditionTrue, reason: "ErrImagePull", message: "pod example-a: container memcached: manifest unknown",
		},
		{
			name: "create container config error",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(pending("example-a"), memcachedtest.Waiting("memcached", "CreateContainerConfigError", "container has runAsNonRoot and image will run as root"))},
			status: corev1.ConditionTrue, reason: "CreateContainerConfigError", message: "pod example-a: container memcached: container has runAsNonRoot and image will run as root",
		},
		{
			name: "a failure without a message is named by its reason",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(pending("example-a"), memcachedtest.Waiting("memcached", "ErrImageNeverPull", ""))},
			status: corev1.ConditionTrue, reason: "ErrImageNeverPull", message: "pod example-a: container memcached: ErrImageNeverPull",
		},
		{
			name: "unschedulable",
			size: 1, pods: []*corev1.Pod{unschedulable},
			status: corev1.ConditionTrue, reason: "Unschedulable", message: "pod example-a: 0/1 nodes are available: 1 Insufficient memory.",
		},
		{
			name: "init container crash loop",
			size: 1, pods: []*corev1.Pod{initCrashing},
			status: corev1.ConditionTrue, reason: "CrashLoopBackOff",
			message: "pod example-a: container init: back-off restarting failed container that exited with code 64 (Error): " +
				"Cannot set item size limit higher than 1/2 of memory max.",
		},
		{
			name: "running again after an error, not yet ready",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), runningAgain)},
			status: corev1.ConditionTrue, reason: "Error",
			message: "pod example-a: container memcached: exited with code 64 (Error): Cannot set item size limit higher than 1/2 of memory max.",
		},
		{
			name: "terminated by the OOM killer",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), oomKilled)},
			status: corev1.ConditionTrue, reason: "OOMKilled", message: "pod example-a: container memcached: exited with code 137 (OOMKilled)",
		},
		{
			name: "a ready container's old error is history",
			size: 2, pods: []*corev1.Pod{memcachedtest.WithContainers(ready("example-a"), recovered), pending("example-b")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "1/2 pods ready",
		},
		{
			name: "a clean exit is no failure",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(running("example-a"), exitedCleanly)},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "0/1 pods ready",
		},
		{
			name: "the first failing pod by name is reported",
			size: 3, pods: []*corev1.Pod{
				memcachedtest.WithContainers(pending("example-z"), memcachedtest.Waiting("memcached", "ImagePullBackOff", "")),
				memcachedtest.WithContainers(running("example-b"), memcachedtest.CrashLooping("example-b", "10s", 1)),
				ready("example-a"),
			},
			status: corev1.ConditionTrue, reason: "CrashLoopBackOff", message: "pod example-b: " + crashLoopMessage,
		},
		{
			name: "a pod being deleted is not reported",
			size: 1, pods: []*corev1.Pod{deleting, pending("example-new")},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsStarting, message: "0/1 pods ready",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)

			got := memcached.DegradedCondition(m, memcached.Observation{Pods: tt.pods, SidecarProblems: tt.problems, MountFailures: tt.mounts})

			want := memcached.NewCondition(v1alpha1.MemcachedDegraded, tt.status, tt.reason, tt.message)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestAvailableCondition(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 0)
	tests := []struct {
		name    string
		size    int32
		pods    []*corev1.Pod
		status  corev1.ConditionStatus
		reason  string
		message string
	}{
		{
			name: "all ready",
			size: 2, pods: []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			status: corev1.ConditionTrue, reason: memcached.ReasonAllReplicasReady, message: "2/2 pods ready",
		},
		{
			name:   "size 0 without pods",
			status: corev1.ConditionTrue, reason: memcached.ReasonAllReplicasReady, message: "0/0 pods ready",
		},
		{
			name: "more ready than wanted while scaling down",
			size: 1, pods: []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			status: corev1.ConditionTrue, reason: memcached.ReasonAllReplicasReady, message: "2/1 pods ready",
		},
		{
			name: "starting",
			size: 3, pods: []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodPending, false)},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsNotReady, message: "1/3 pods ready",
		},
		{
			name: "crash loop",
			size: 1, pods: []*corev1.Pod{memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, false), memcachedtest.CrashLooping("example-a", "10s", 1))},
			status: corev1.ConditionFalse, reason: memcached.ReasonPodsNotReady, message: "0/1 pods ready",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)

			got := memcached.AvailableCondition(m, tt.pods)

			want := memcached.NewCondition(v1alpha1.MemcachedAvailable, tt.status, tt.reason, tt.message)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestNotOwnedStatusTakesPrecedence: a foreign Deployment makes every
// condition say DeploymentNotOwned whatever the pods do. The operator acts
// on no generation meanwhile, so Progressing names the one before, or is
// left out when there is none, and kubectl wait
// --for=condition=Progressing=false does not return.
func TestNotOwnedStatusTakesPrecedence(t *testing.T) {
	earlier := metav1.NewTime(memcachedtest.Now.Add(-time.Hour))
	tests := []struct {
		name            string
		generation      int64
		wantProgressing []v1alpha1.MemcachedCondition
		wantObserved    int64
	}{
		{name: "first generation", generation: 1},
		{
			name: "later generation", generation: 2, wantObserved: 1,
			// Progressing was False already: its transition time stays.
			wantProgressing: []v1alpha1.MemcachedCondition{{Type: v1alpha1.MemcachedProgressing, Status: corev1.ConditionFalse, Reason: memcached.ReasonDeploymentNotOwned, Message: "taken", LastTransitionTime: earlier, ObservedGeneration: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			m.Generation = tt.generation
			m.Status = memcached.ComputeStatus(m, memcached.Observation{Pods: []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)}}, earlier)

			got := memcached.NotOwnedStatus(m, "taken", memcachedtest.Now)

			want := append(append([]v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedAvailable, Status: corev1.ConditionFalse, Reason: memcached.ReasonDeploymentNotOwned, Message: "taken", LastTransitionTime: memcachedtest.Now, ObservedGeneration: tt.generation},
			}, tt.wantProgressing...),
				v1alpha1.MemcachedCondition{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: memcached.ReasonDeploymentNotOwned, Message: "taken", LastTransitionTime: memcachedtest.Now, ObservedGeneration: tt.generation})
			if !reflect.DeepEqual(got.Conditions, want) {
				t.Errorf("conditions:\n got %+v\nwant %+v", got.Conditions, want)
			}
			if got.ObservedGeneration != tt.wantObserved {
				t.Errorf("observedGeneration: got %d, want %d", got.ObservedGeneration, tt.wantObserved)
			}
			if got.Nodes == nil || len(got.Nodes) != 0 || got.Replicas != 0 || got.ReadyReplicas != 0 {
				t.Errorf("pods: got nodes %#v, %d/%d ready, want none: no pod is the memcached's", got.Nodes, got.ReadyReplicas, got.Replicas)
			}
		})
	}
}

// TestStatusIgnoresKubeletChurn checks that kubelet updates which change
// nothing a user acts on leave the computed status equal to the stored one,
// so that they cause no write.
func TestStatusIgnoresKubeletChurn(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	pod := func(name string, statuses ...corev1.ContainerStatus) *corev1.Pod {
		return memcachedtest.WithContainers(memcachedtest.NewPod(m, name, corev1.PodRunning, false), statuses...)
	}
	ready := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	tests := []struct {
		name          string
		before, after []*corev1.Pod
	}{
		{
			name:   "resync",
			before: []*corev1.Pod{ready, memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			after:  []*corev1.Pod{memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true), ready},
		},
		{
			name:   "crash loop back-off doubles",
			before: []*corev1.Pod{ready, pod("example-b", memcachedtest.CrashLooping("example-b", "10s", 1))},
			after:  []*corev1.Pod{ready, pod("example-b", memcachedtest.CrashLooping("example-b", "20s", 2))},
		},
		{
			name:   "another pull back-off",
			before: []*corev1.Pod{ready, pod("example-b", memcachedtest.Waiting("memcached", "ImagePullBackOff", `Back-off pulling image "memcached:nope"`))},
			after:  []*corev1.Pod{ready, pod("example-b", memcachedtest.Waiting("memcached", "ImagePullBackOff", `Back-off pulling image "memcached:nope"`))},
		},
		{
			name:   "still creating",
			before: []*corev1.Pod{ready, pod("example-b", memcachedtest.Waiting("memcached", "ContainerCreating", ""))},
			after:  []*corev1.Pod{ready, pod("example-b", memcachedtest.Waiting("memcached", "ContainerCreating", ""))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := m.DeepCopy()
			stored.Status = memcached.ComputeStatus(m, memcached.Observation{Pods: tt.before}, memcachedtest.Now)

			got := memcached.ComputeStatus(stored, memcached.Observation{Pods: tt.after}, metav1.NewTime(memcachedtest.Now.Add(time.Minute)))

			if !equality.Semantic.DeepEqual(got, stored.Status) {
				t.Errorf("status changed:\n got %+v\nwant %+v", got, stored.Status)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	earlier := metav1.NewTime(memcachedtest.Now.Add(-time.Hour))
	other := v1alpha1.MemcachedCondition{Type: "Other", Status: corev1.ConditionTrue, LastTransitionTime: earlier}
	tests := []struct {
		name     string
		existing []v1alpha1.MemcachedCondition
		set      v1alpha1.MemcachedCondition
		want     []v1alpha1.MemcachedCondition
	}{
		{
			name: "added with the current time",
			set:  memcached.NewCondition(v1alpha1.MemcachedDegraded, corev1.ConditionFalse, memcached.ReasonAsExpected, ""),
			want: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse, Reason: memcached.ReasonAsExpected, LastTransitionTime: memcachedtest.Now},
			},
		},
		{
			name: "same status keeps its transition time",
			existing: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: "Old", LastTransitionTime: earlier},
			},
			set: memcached.NewCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, memcached.ReasonDeploymentNotOwned, "msg"),
			want: []v1alpha1.MemcachedCondition{
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: memcached.ReasonDeploymentNotOwned, Message: "msg", LastTransitionTime: earlier},
			},
		},
		{
			name: "changed status moves the transition time and keeps other types",
			existing: []v1alpha1.MemcachedCondition{
				other,
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			},
			set: memcached.NewCondition(v1alpha1.MemcachedDegraded, corev1.ConditionFalse, memcached.ReasonAsExpected, ""),
			want: []v1alpha1.MemcachedCondition{
				other,
				{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse, Reason: memcached.ReasonAsExpected, LastTransitionTime: memcachedtest.Now},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := append([]v1alpha1.MemcachedCondition(nil), tt.existing...)

			got := memcached.SetCondition(existing, tt.set, memcachedtest.Now)

			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(existing, tt.existing) {
				t.Errorf("setCondition modified its input: %+v", existing)
			}
		})
	}
}

func TestProgressingCondition(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	current := memcachedtest.CurrentHash(m)
	old := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{memcached.TemplateHashAnnotation: "older"}
		return p
	}
	unannotated := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = nil
		return p
	}
	deleting := old(memcachedtest.NewPod(m, "example-old-going", corev1.PodRunning, true))
	deleting.DeletionTimestamp = &memcachedtest.Now
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		hash       string
		wantStatus corev1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{
			name:       "complete",
			pods:       []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			hash:       current,
			wantStatus: corev1.ConditionFalse, wantReason: memcached.ReasonComplete, wantMsg: "2/2 pods ready",
		},
		{
			name:       "rolling: one pod of an older template",
			pods:       []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), old(memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)), memcachedtest.NewPod(m, "example-c", corev1.PodPending, false)},
			hash:       current,
			wantStatus: corev1.ConditionTrue, wantReason: memcached.ReasonRollingUpdate, wantMsg: "1 of 3 pods run an older pod template",
		},
		{
			name:       "a pod of an operator that did not annotate is older",
			pods:       []*corev1.Pod{unannotated(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			hash:       current,
			wantStatus: corev1.ConditionTrue, wantReason: memcached.ReasonRollingUpdate, wantMsg: "1 of 2 pods run an older pod template",
		},
		{
			name:       "an older pod being deleted no longer counts",
			pods:       []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true), deleting},
			hash:       current,
			wantStatus: corev1.ConditionFalse, wantReason: memcached.ReasonComplete, wantMsg: "2/2 pods ready",
		},
		{
			name:       "scaling",
			pods:       []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)},
			hash:       current,
			wantStatus: corev1.ConditionTrue, wantReason: memcached.ReasonScaling, wantMsg: "scaling from 1 to 2 pods",
		},
		{
			name:       "starting",
			pods:       []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, false)},
			hash:       current,
			wantStatus: corev1.ConditionTrue, wantReason: memcached.ReasonPodsStarting, wantMsg: "1/2 pods ready",
		},
		{
			name:       "unknown template: older pods are not told apart",
			pods:       []*corev1.Pod{old(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)},
			wantStatus: corev1.ConditionFalse, wantReason: memcached.ReasonComplete, wantMsg: "2/2 pods ready",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memcached.ProgressingCondition(m, memcached.Observation{Pods: tt.pods, TemplateHash: tt.hash})
			if got.Type != v1alpha1.MemcachedProgressing || got.Status != tt.wantStatus || got.Reason != tt.wantReason || got.Message != tt.wantMsg {
				t.Errorf("got %s=%s %s %q, want Progressing=%s %s %q", got.Type, got.Status, got.Reason, got.Message, tt.wantStatus, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

// TestStatusOfStuckRollouts: the conditions of every cause of a rollout or
// scale that cannot finish, from what the Deployment controller and the
// kubelet report. It backs the README's table of causes.
func TestStatusOfStuckRollouts(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	current := memcachedtest.CurrentHash(m)
	ready := func(name string) *corev1.Pod { return memcachedtest.NewPod(m, name, corev1.PodRunning, true) }
	old := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{memcached.TemplateHashAnnotation: "older"}
		return p
	}
	pending := func(name string, statuses ...corev1.ContainerStatus) *corev1.Pod {
		return memcachedtest.WithContainers(memcachedtest.NewPod(m, name, corev1.PodPending, false), statuses...)
	}
	unschedulable := pending("example-new")
	unschedulable.Status.Conditions = append(unschedulable.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient memory.",
	})
	pullBackOff := memcachedtest.Waiting("memcached", "ImagePullBackOff", `Back-off pulling image "memcached:no-such-tag"`)
	type cond struct {
		status          corev1.ConditionStatus
		reason, message string
	}
	tests := []struct {
		name                            string
		pods                            []*corev1.Pod
		deployment                      []appsv1.DeploymentCondition
		available, progressing, degrade cond
	}{
		{
			name:        "a pod quota used up",
			deployment:  []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal)},
			available:   cond{corev1.ConditionFalse, memcached.ReasonPodsNotReady, "0/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonScaling, "scaling from 0 to 2 pods; stuck: FailedCreate"},
			degrade:     cond{corev1.ConditionTrue, "FailedCreate", memcachedtest.QuotaRefusal},
		},
		{
			name:        "a missing PriorityClass",
			deployment:  []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.PriorityClassRefusal)},
			available:   cond{corev1.ConditionFalse, memcached.ReasonPodsNotReady, "0/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonScaling, "scaling from 0 to 2 pods; stuck: FailedCreate"},
			degrade:     cond{corev1.ConditionTrue, "FailedCreate", memcachedtest.PriorityClassRefusal},
		},
		{
			name:        "a LimitRange, one pod short",
			pods:        []*corev1.Pod{ready("example-a")},
			deployment:  []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.LimitRangeRefusal)},
			available:   cond{corev1.ConditionFalse, memcached.ReasonPodsNotReady, "1/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonScaling, "scaling from 1 to 2 pods; stuck: FailedCreate"},
			degrade:     cond{corev1.ConditionTrue, "FailedCreate", memcachedtest.LimitRangeRefusal},
		},
		{
			name:        "an admission policy refuses the surge pod of a roll",
			pods:        []*corev1.Pod{old(ready("example-a")), old(ready("example-b"))},
			deployment:  []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.AdmissionRefusal)},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 2 pods run an older pod template; stuck: FailedCreate"},
			degrade:     cond{corev1.ConditionTrue, "FailedCreate", memcachedtest.AdmissionRefusal},
		},
		{
			name:        "a roll to an image that cannot be pulled",
			pods:        []*corev1.Pod{old(ready("example-a")), old(ready("example-b")), pending("example-new", pullBackOff)},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template; stuck: ImagePullBackOff"},
			degrade:     cond{corev1.ConditionTrue, "ImagePullBackOff", `pod example-new: container memcached: Back-off pulling image "memcached:no-such-tag"`},
		},
		{
			name: "a roll to a template whose pods crash",
			pods: []*corev1.Pod{old(ready("example-a")), old(ready("example-b")),
				memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-new", corev1.PodRunning, false), memcachedtest.CrashLooping("example-new", "40s", 3))},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template; stuck: CrashLoopBackOff"},
			degrade: cond{corev1.ConditionTrue, "CrashLoopBackOff", "pod example-new: container memcached: back-off restarting failed container " +
				"that exited with code 64 (Error): Cannot set item size limit higher than 1/2 of memory max."},
		},
		{
			name:        "a roll to a template no node can take",
			pods:        []*corev1.Pod{old(ready("example-a")), old(ready("example-b")), unschedulable},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template; stuck: Unschedulable"},
			degrade:     cond{corev1.ConditionTrue, "Unschedulable", "pod example-new: 0/3 nodes are available: 3 Insufficient memory."},
		},
		{
			name:        "a roll past its deadline",
			pods:        []*corev1.Pod{old(ready("example-a")), old(ready("example-b")), pending("example-new", memcachedtest.Waiting("memcached", "ContainerCreating", ""))},
			deployment:  []appsv1.DeploymentCondition{memcachedtest.DeadlineExceeded},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionFalse, memcached.ReasonProgressDeadlineExceeded, memcachedtest.DeadlineMessage},
			degrade:     cond{corev1.ConditionTrue, memcached.ReasonProgressDeadlineExceeded, memcachedtest.DeadlineMessage},
		},
		{
			name:        "a roll going well",
			pods:        []*corev1.Pod{old(ready("example-a")), old(ready("example-b")), pending("example-new", memcachedtest.Waiting("memcached", "ContainerCreating", ""))},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "2 of 3 pods run an older pod template"},
			degrade:     cond{corev1.ConditionFalse, memcached.ReasonAsExpected, ""},
		},
		{
			name:        "an old pod failing while the new ones serve",
			pods:        []*corev1.Pod{ready("example-a"), ready("example-b"), old(pending("example-old", pullBackOff))},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionTrue, memcached.ReasonRollingUpdate, "1 of 3 pods run an older pod template"},
			degrade:     cond{corev1.ConditionFalse, memcached.ReasonAsExpected, ""},
		},
		{
			name:        "a deadline the pods have since met",
			pods:        []*corev1.Pod{ready("example-a"), ready("example-b")},
			deployment:  []appsv1.DeploymentCondition{memcachedtest.DeadlineExceeded},
			available:   cond{corev1.ConditionTrue, memcached.ReasonAllReplicasReady, "2/2 pods ready"},
			progressing: cond{corev1.ConditionFalse, memcached.ReasonComplete, "2/2 pods ready"},
			degrade:     cond{corev1.ConditionFalse, memcached.ReasonAsExpected, ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := memcached.ComputeStatus(m, memcached.Observation{Pods: tt.pods, TemplateHash: current, DeploymentConditions: tt.deployment}, memcachedtest.Now)

			for typ, want := range map[v1alpha1.MemcachedConditionType]cond{
				v1alpha1.MemcachedAvailable:   tt.available,
				v1alpha1.MemcachedProgressing: tt.progressing,
				v1alpha1.MemcachedDegraded:    tt.degrade,
			} {
				c := memcached.FindCondition(status.Conditions, typ)
				if c == nil || (cond{c.Status, c.Reason, c.Message}) != want {
					t.Errorf("%s: got %+v, want %+v", typ, c, want)
				}
			}
		})
	}
}

func TestOwnPodsAreThoseOfTheDeploymentsReplicaSets(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	own := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	bare := memcachedtest.NewPod(m, "bare", corev1.PodRunning, true)
	bare.OwnerReferences = nil
	otherSet := memcachedtest.NewPod(m, "other-set", corev1.PodRunning, true)
	otherSet.OwnerReferences[0].Name = "someone-else-" + memcachedtest.PodTemplateHash
	notController := memcachedtest.NewPod(m, "not-controller", corev1.PodRunning, true)
	notController.OwnerReferences[0].Controller = nil
	job := memcachedtest.NewPod(m, "job", corev1.PodRunning, true)
	job.OwnerReferences[0].Kind = "Job"
	noHash := memcachedtest.NewPod(m, "no-hash", corev1.PodRunning, true)
	delete(noHash.Labels, "pod-template-hash")

	got := memcached.OwnPods("example", []*corev1.Pod{own, bare, otherSet, notController, job, noHash})
	if len(got) != 1 || got[0] != own {
		var names []string
		for _, p := range got {
			names = append(names, p.Name)
		}
		t.Errorf("OwnPods: got %v, want only example-a, the pod of the ReplicaSet example-%s", names, memcachedtest.PodTemplateHash)
	}
}
