package memcached

import (
	"fmt"
	"sort"
	"strings"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// ReasonAsExpected is the reason of a Degraded condition that is False
	// because at least spec.size of the Memcached's pods are Ready.
	ReasonAsExpected = "AsExpected"
	// ReasonPodsStarting is the reason of a Degraded condition that is False
	// while fewer than spec.size pods are Ready but none has failed: they are
	// being scheduled, pulled or created, or wait for their readiness probe.
	// It is also the reason of a Progressing condition that is True while
	// the pods of the current template are not all Ready yet.
	ReasonPodsStarting = "PodsStarting"
	// ReasonDeploymentNotOwned is the reason, on the Warning Event and on the
	// Available and Degraded conditions, used when a Deployment with the
	// Memcached's name exists but another owner controls it. Like the reasons
	// of reasons.go, its Event is recorded when the condition starts.
	ReasonDeploymentNotOwned = "DeploymentNotOwned"
	// ReasonAllReplicasReady is the reason of an Available condition that is
	// True: at least spec.size pods are Ready, which a size of 0 always is.
	ReasonAllReplicasReady = "AllReplicasReady"
	// ReasonRollingUpdate is the reason of a Progressing condition that is
	// True while pods of an older pod template are being replaced.
	ReasonRollingUpdate = "RollingUpdate"
	// ReasonRestoring is the reason of a Progressing condition that is True
	// because the operator has just put back what someone changed of the
	// Deployment it set; the pods that the change replaced are then rolled
	// back, one at a time.
	ReasonRestoring = "Restoring"
	// ReasonScaling is the reason of a Progressing condition that is True
	// while the number of pods differs from spec.size.
	ReasonScaling = "Scaling"
	// ReasonComplete is the reason of a Progressing condition that is False
	// because spec.size pods of the current pod template are all Ready.
	ReasonComplete = "Complete"
	// ReasonPodsNotReady is the reason of an Available condition that is
	// False because fewer than spec.size pods are Ready. The Degraded
	// condition tells whether they are still starting or why they fail.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonProgressDeadlineExceeded is the Deployment controller's reason
	// for a Progressing condition that is False: no pod became available
	// within the Deployment's progressDeadlineSeconds. The Memcached's
	// Progressing and Degraded conditions take it over, with the
	// controller's message.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonFailedMount is the kubelet's reason for the Warning Event it
	// records on a pod whose volume it cannot mount, such as a Secret of
	// spec.tls or spec.auth that is missing or lacks a key memcached reads
	// (see secretVolumes). The Degraded condition takes it over, with the
	// Event's message, while none of the pod's containers has started (see
	// Observation.MountFailures).
	ReasonFailedMount = "FailedMount"
)

// reasonCrashLoopBackOff is the kubelet's waiting reason for a container
// that keeps exiting, while it waits to restart it.
const reasonCrashLoopBackOff = "CrashLoopBackOff"

// Observation is what the status is computed from besides the Memcached.
type Observation struct {
	// Pods are the pods the Memcached's label selector matches.
	Pods []*corev1.Pod
	// TemplateHash is the hash of the pod template the spec asks for (see
	// TemplateHashAnnotation); "" when it is unknown, and then no pod
	// counts as one of an older template.
	TemplateHash string
	// ServiceName is the name of the Memcached's own Service, "" without one.
	ServiceName string
	// DeploymentConditions are the conditions of the Memcached's own
	// Deployment that tell a stuck rollout, as the cache keeps them (see
	// the kube package's trimDeployment): ReplicaFailure when the ReplicaSet controller
	// cannot create or delete pods, and Progressing when it is False.
	DeploymentConditions []appsv1.DeploymentCondition
	// RollPending, when set, says why the roll to the operator's new pod
	// template waits, and RollPendingReason for what: a roll slot
	// (ReasonRollPending, see pkg/stub's rolls.go) or the maintenance
	// window (ReasonWaitingForMaintenanceWindow); TemplateHash is then the
	// Deployment's own.
	RollPending       string
	RollPendingReason string
	// Restoring, when set, says what the reconcile put back of the
	// Deployment, which someone had changed (see pkg/stub's
	// restoreDeployment).
	Restoring string
	// Behind says that the operator has not acted on m's generation: it
	// refused the spec, or could not set the Deployment to the spec's size
	// and pod template. status.observedGeneration then stays below m's
	// generation (see actedOn), and the Progressing condition reports the
	// rollout to what the Deployment runs, Deployed, for that generation;
	// without a Deployment of m's own there is none to report. When false,
	// the Deployment runs spec.size pods of the template of TemplateHash.
	Behind bool
	// Deployed is what m's own Deployment runs, nil without one; read only
	// when Behind.
	Deployed *Rollout
	// MountFailures holds, by pod UID, the message of the newest Warning
	// Event FailedMount that the kubelet recorded on the pod, as the
	// operator's cache of those Events keeps them (see the kube package's
	// CachedClient.MountFailure): a pod without an entry has none. The
	// kubelet records one on every failed try, with its back-off, and the
	// pod's status says nothing of it: its containers wait in
	// ContainerCreating without a message. An Event outlives its cause, by
	// up to an hour, so it counts only for a pod that the kubelet has not
	// made ready to start its containers yet (see mountFailed).
	MountFailures map[types.UID]string
	// SidecarProblems are what the pods' sidecars last reported they could
	// not make memcached do, as the operator polls them (package
	// sidecarpoll): a pod without an entry has no problem, or has not
	// answered yet.
	SidecarProblems []SidecarProblem
}

// Rollout is what a Deployment rolls its pods to.
type Rollout struct {
	// Size is the Deployment's spec.replicas.
	Size int32
	// TemplateHash is the hash of its pod template (see TemplateOf), ""
	// when it is unknown.
	TemplateHash string
}

// target returns what the pods of o roll toward: m's spec, or what the
// Deployment runs when o says the operator has not acted on m's generation.
// ok is false when there is no rollout to report: the operator has not
// acted on m's generation nor on any before it (see actedOn), or m has no
// Deployment of its own.
func target(m *v1alpha1.Memcached, o Observation) (t Rollout, ok bool) {
	if !o.Behind {
		return Rollout{Size: m.Spec.Size, TemplateHash: o.TemplateHash}, true
	}
	if o.Deployed == nil || actedOn(m, o) == 0 {
		return Rollout{}, false
	}
	return *o.Deployed, true
}

// actedOn returns the generation whose spec the operator last acted on, as
// status.observedGeneration states it: m's own unless o says otherwise, and
// then the stored one, but always below m's generation, which the operator
// has not acted on. A stored value that is not below it drops to the
// generation before: an operator version that wrote the generation it
// computed the status from left it, or the spec, acted on once, is refused
// since, by a policy the operator was restarted with.
func actedOn(m *v1alpha1.Memcached, o Observation) int64 {
	if !o.Behind {
		return m.Generation
	}
	return max(0, min(m.Status.ObservedGeneration, m.Generation-1))
}

// SidecarProblem is one problem that the sidecar of a pod reports (see
// pkg/sidecar's Report): memcached does not serve the mounted certificate
// or -Y file, or the sidecar's worker, which does that, keeps exiting,
// while the pod looks healthy to the kubelet.
type SidecarProblem struct {
	// Pod names the pod.
	Pod string
	// Reason and Message are the sidecar's, such as
	// CertificateRefreshFailed with memcached's reply.
	Reason, Message string
}

// SidecarFailure returns the problem that m's Degraded condition reports
// when nothing stops the pods (see stuck): the first problem of the first
// live pod by name, so that the condition does not move between pods that
// fail alike, with the sidecar's reason and a message naming the pod. ok is
// false when no live pod reports one.
func SidecarFailure(o Observation) (reason, message string, ok bool) {
	live := map[string]bool{}
	for _, p := range livePods(o.Pods) {
		live[p.Name] = true
	}
	var first *SidecarProblem
	for i := range o.SidecarProblems {
		if p := &o.SidecarProblems[i]; live[p.Pod] && (first == nil || p.Pod < first.Pod) {
			first = p
		}
	}
	if first == nil {
		return "", "", false
	}
	return first.Reason, fmt.Sprintf("pod %s: sidecar: %s", first.Pod, first.Message), true
}

// rollout is what the pods of an Observation say about the rollout of the
// current pod template to spec.size Ready pods.
type rollout struct {
	// live are the pods that are not going away, sorted by name.
	live []*corev1.Pod
	// outdated counts the live pods of an older pod template.
	outdated int
	// ready counts the live pods that are Ready.
	ready int32
	// complete is whether spec.size pods of the current template, and no
	// other live pods, are all Ready.
	complete bool
}

// rolloutOf returns the rollout of o's pods to t.
func rolloutOf(t Rollout, o Observation) rollout {
	live := livePods(o.Pods)
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	r := rollout{live: live, ready: countReady(live)}
	for _, p := range live {
		if isOutdated(p, t.TemplateHash) {
			r.outdated++
		}
	}
	r.complete = r.outdated == 0 && int32(len(live)) == t.Size && r.ready >= t.Size
	return r
}

// isOutdated reports whether p runs a pod template older than the one of
// hash; with hash "", unknown, no pod does.
func isOutdated(p *corev1.Pod, hash string) bool {
	return hash != "" && p.Annotations[TemplateHashAnnotation] != hash
}

// stuck returns why the pods cannot get to t.Size Ready pods of t's
// template without a change from outside, as the reason and message
// of the Degraded condition, or ok false when nothing says so. In this order:
//   - the Deployment's ReplicaFailure: the ReplicaSet controller cannot
//     create pods (a quota, a LimitRange, a missing PriorityClass, an
//     admission policy), with the controller's reason and message;
//   - a failed pod (see podFailed), the first by name so that the condition
//     does not move between pods that fail alike: any live pod while fewer
//     than t.Size are Ready, and a pod of the current template while a
//     roll goes on, even when the pods of the older one keep the Memcached
//     Available;
//   - the Deployment's Progressing condition False with reason
//     ProgressDeadlineExceeded, unless the pods show the rollout complete.
func stuck(t Rollout, o Observation, r rollout) (reason, message string, ok bool) {
	if c := deploymentCondition(o, appsv1.DeploymentReplicaFailure, corev1.ConditionTrue); c != nil {
		return c.Reason, c.Message, true
	}
	for _, p := range r.live {
		if r.ready >= t.Size && (r.outdated == 0 || isOutdated(p, t.TemplateHash)) {
			continue
		}
		if reason, message, failed := podFailed(p, o.MountFailures); failed {
			return reason, message, true
		}
	}
	if c := deploymentCondition(o, appsv1.DeploymentProgressing, corev1.ConditionFalse); c != nil && c.Reason == ReasonProgressDeadlineExceeded && !r.complete {
		return c.Reason, c.Message, true
	}
	return "", "", false
}

// deploymentCondition returns o's Deployment condition of type typ when it
// has status, or nil.
func deploymentCondition(o Observation, typ appsv1.DeploymentConditionType, status corev1.ConditionStatus) *appsv1.DeploymentCondition {
	for i := range o.DeploymentConditions {
		if c := &o.DeploymentConditions[i]; c.Type == typ && c.Status == status {
			return c
		}
	}
	return nil
}

// ComputeStatus returns the status m should have when its Deployment is its
// own and o holds its pods. The result depends only on its inputs, so
// comparing it with m.Status tells whether a write is needed.
func ComputeStatus(m *v1alpha1.Memcached, o Observation, now metav1.Time) v1alpha1.MemcachedStatus {
	return observedStatus(m, o, now, availableCondition(m, o.Pods), progressing(m, o), degradedCondition(m, o))
}

// NotOwnedStatus returns the status m should have while a Deployment that
// another owner controls holds its name. It lists no pods, because none of
// them are m's, and every condition carries reason DeploymentNotOwned and
// msg, whatever the pods are doing. The operator has not acted on m's
// generation, so Progressing names an older one, or is left out when there
// is none (see actedOn).
func NotOwnedStatus(m *v1alpha1.Memcached, msg string, now metav1.Time) v1alpha1.MemcachedStatus {
	o := Observation{Behind: true}
	var p *v1alpha1.MemcachedCondition
	if actedOn(m, o) > 0 {
		c := newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionFalse, ReasonDeploymentNotOwned, msg)
		p = &c
	}
	return observedStatus(m, o, now,
		newCondition(v1alpha1.MemcachedAvailable, corev1.ConditionFalse, ReasonDeploymentNotOwned, msg), p,
		newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, ReasonDeploymentNotOwned, msg))
}

// FailedStatus returns the status m should have when a step of its reconcile
// failed with reason and message: the pods as ComputeStatus reports them, with
// a Degraded condition that is True with that reason and message whatever the
// pods are doing, because the failure needs a change from outside too.
// Available and Progressing still follow the pods alone; when o is Behind,
// as for a refused spec, Progressing reports the rollout of the generation
// the operator last acted on (see Observation.Behind), so that a refused
// spec never reads as a completed one.
func FailedStatus(m *v1alpha1.Memcached, o Observation, reason, message string, now metav1.Time) v1alpha1.MemcachedStatus {
	return observedStatus(m, o, now, availableCondition(m, o.Pods), progressing(m, o),
		newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, reason, message))
}

// UnobservedStatus returns the status m should have when its pods could not
// be listed: the pods and the Available and Progressing conditions as
// stored, since nothing newer is known, and a Degraded condition that is
// True with reason and message. behind says, as Observation.Behind does,
// that the operator has not acted on m's generation.
func UnobservedStatus(m *v1alpha1.Memcached, behind bool, reason, message string, now metav1.Time) v1alpha1.MemcachedStatus {
	status := *m.Status.DeepCopy()
	if status.Nodes == nil {
		// The CRD's schema types status.nodes as an array, and null is not one.
		status.Nodes = []string{}
	}
	status.Selector = Selector(m.Name).String()
	status.ObservedGeneration = actedOn(m, Observation{Behind: behind})
	degraded := newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, reason, message)
	degraded.ObservedGeneration = m.Generation
	status.Conditions = setCondition(status.Conditions, degraded, now)
	return status
}

// observedStatus returns m's status with o's live pods and Service and the
// conditions, set in their order so that the stored list keeps a stable
// order. Available and Degraded judge m's spec and carry its generation;
// progressing, which carries the generation the operator acted on, is
// removed when nil (see target).
func observedStatus(m *v1alpha1.Memcached, o Observation, now metav1.Time, available v1alpha1.MemcachedCondition, progressing *v1alpha1.MemcachedCondition, degraded v1alpha1.MemcachedCondition) v1alpha1.MemcachedStatus {
	acted := actedOn(m, o)
	available.ObservedGeneration, degraded.ObservedGeneration = m.Generation, m.Generation
	stored := setCondition(m.Status.Conditions, available, now)
	if progressing != nil {
		progressing.ObservedGeneration = acted
		stored = setCondition(stored, *progressing, now)
	} else {
		stored = removeCondition(stored, v1alpha1.MemcachedProgressing)
	}
	stored = setCondition(stored, degraded, now)
	live := livePods(o.Pods)
	return v1alpha1.MemcachedStatus{
		Nodes:              podNames(live),
		Replicas:           int32(len(live)),
		ReadyReplicas:      countReady(live),
		Selector:           Selector(m.Name).String(),
		ObservedGeneration: acted,
		ServiceName:        o.ServiceName,
		Conditions:         stored,
	}
}

// progressing returns m's Progressing condition (see progressingCondition),
// or nil when there is no rollout to report (see target).
func progressing(m *v1alpha1.Memcached, o Observation) *v1alpha1.MemcachedCondition {
	if _, ok := target(m, o); !ok {
		return nil
	}
	c := progressingCondition(m, o)
	return &c
}

// availableCondition returns m's Available condition when pods are the pods
// its label selector matches: True once at least spec.size of the live pods
// are Ready, False with reason PodsNotReady before. The Degraded condition,
// not this one, carries the reason why pods are not Ready, so that Available
// changes only when readiness does.
func availableCondition(m *v1alpha1.Memcached, pods []*corev1.Pod) v1alpha1.MemcachedCondition {
	ready := countReady(livePods(pods))
	if ready >= m.Spec.Size {
		return newCondition(v1alpha1.MemcachedAvailable, corev1.ConditionTrue, ReasonAllReplicasReady, readyMessage(ready, m.Spec.Size))
	}
	return newCondition(v1alpha1.MemcachedAvailable, corev1.ConditionFalse, ReasonPodsNotReady, readyMessage(ready, m.Spec.Size))
}

// progressingCondition returns m's Progressing condition when its Deployment is
// its own and o holds its pods, for the rollout to the size and template of
// target: True with reason RollPending while the roll to the operator's new
// pod template waits for a slot (see pkg/stub's rolls.go), or
// WaitingForMaintenanceWindow while it waits for the window; else False with
// reason Complete once that many pods of that template are all Ready and no
// other pod is live; False with the Deployment controller's reason and
// message once it reports ProgressDeadlineExceeded; otherwise True while a
// live pod runs an older pod template (reason RollingUpdate), else while the
// number of live pods differs from the size (Scaling), else while fewer are
// Ready (PodsStarting). A True condition's message ends with what keeps the
// pods from getting there, if anything does (see stuck); the Degraded
// condition gives the detail.
func progressingCondition(m *v1alpha1.Memcached, o Observation) v1alpha1.MemcachedCondition {
	if o.RollPending != "" {
		return newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionTrue, o.RollPendingReason, o.RollPending)
	}
	if o.Restoring != "" {
		return newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionTrue, ReasonRestoring, o.Restoring)
	}
	t, _ := target(m, o)
	r := rolloutOf(t, o)
	if r.complete {
		return newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionFalse, ReasonComplete, readyMessage(r.ready, t.Size))
	}
	if c := deploymentCondition(o, appsv1.DeploymentProgressing, corev1.ConditionFalse); c != nil && c.Reason == ReasonProgressDeadlineExceeded {
		return newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionFalse, c.Reason, c.Message)
	}
	var reason, message string
	switch {
	case r.outdated > 0:
		reason, message = ReasonRollingUpdate, fmt.Sprintf("%d of %d pods run an older pod template", r.outdated, len(r.live))
	case int32(len(r.live)) != t.Size:
		reason, message = ReasonScaling, fmt.Sprintf("scaling from %d to %d pods", len(r.live), t.Size)
	default:
		reason, message = ReasonPodsStarting, readyMessage(r.ready, t.Size)
	}
	if why, _, ok := stuck(t, o, r); ok {
		message += "; stuck: " + why
	}
	return newCondition(v1alpha1.MemcachedProgressing, corev1.ConditionTrue, reason, message)
}

// degradedCondition returns m's Degraded condition when its Deployment is its
// own, every reconcile step succeeded (see FailedStatus otherwise) and o
// holds its pods:
//   - True with the reason and message of stuck, when the pods cannot get to
//     spec.size Ready pods of the current template without a change from
//     outside: pods that cannot be created, a failed pod, a roll past its
//     deadline;
//   - otherwise True with the reason and message of SidecarFailure, when a
//     pod's memcached serves, Ready, but not the mounted certificate or -Y
//     file, or its sidecar's worker fails, which no readiness may show: a
//     sidecar that failed its container's readiness would take a serving
//     memcached out of the Service;
//   - otherwise False with reason AsExpected once at least spec.size live
//     pods are Ready;
//   - otherwise False with reason PodsStarting.
func degradedCondition(m *v1alpha1.Memcached, o Observation) v1alpha1.MemcachedCondition {
	t := Rollout{Size: m.Spec.Size, TemplateHash: o.TemplateHash}
	r := rolloutOf(t, o)
	if reason, message, ok := stuck(t, o, r); ok {
		return newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, reason, message)
	}
	if reason, message, ok := SidecarFailure(o); ok {
		return newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionTrue, reason, message)
	}
	if r.ready >= m.Spec.Size {
		return newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionFalse, ReasonAsExpected, "")
	}
	return newCondition(v1alpha1.MemcachedDegraded, corev1.ConditionFalse, ReasonPodsStarting, readyMessage(r.ready, m.Spec.Size))
}

// readyMessage says how many of the size pods wanted are Ready, in the
// READY column's notation of kubectl get deployment.
func readyMessage(ready, size int32) string {
	return fmt.Sprintf("%d/%d pods ready", ready, size)
}

// podFailed reports whether p cannot become Ready without a change from
// outside: the scheduler found no node for it, one of its init containers
// or containers failed (see containerFailed), or the kubelet cannot mount
// one of its volumes (see mountFailed), whose newest FailedMount message
// mountFailures holds by pod UID. The message names the pod, then the
// container and the kubelet's detail or, without one, its reason; for a
// volume, the kubelet's message, which names the volume and the missing
// Secret or key.
func podFailed(p *corev1.Pod, mountFailures map[types.UID]string) (reason, message string, failed bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Reason, fmt.Sprintf("pod %s: %s", p.Name, c.Message), true
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range statuses {
			if reason, detail, failed := containerFailed(s); failed {
				if detail == "" {
					detail = reason
				}
				return reason, fmt.Sprintf("pod %s: container %s: %s", p.Name, s.Name, detail), true
			}
		}
	}
	if msg, ok := mountFailures[p.UID]; ok && mountFailed(p) {
		return ReasonFailedMount, fmt.Sprintf("pod %s: %s", p.Name, msg), true
	}
	return "", "", false
}

// PodReadyToStartContainers is the kubelet's pod condition that turns True
// once it has mounted the pod's volumes and made its sandbox (GA in
// Kubernetes 1.37; client-go 1.11 has no constant for it). The operator's
// pod cache keeps it (see mountFailed).
const PodReadyToStartContainers corev1.PodConditionType = "PodReadyToStartContainers"

// mountFailed reports whether p's FailedMount Event, if it has one, still
// tells why p cannot start: none of its containers has started (each waits,
// and none has terminated before), and the kubelet has not reported it
// ready to start them, which it does only once every volume is mounted.
// An Event from before a Secret was fixed then stops counting as soon as
// the kubelet mounts it, not only once the containers run.
func mountFailed(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == PodReadyToStartContainers && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range statuses {
			if s.State.Waiting == nil || s.LastTerminationState.Terminated != nil {
				return false
			}
		}
	}
	return true
}

// containerFailed reports whether the container of status s has failed: it
// waits for a reason that isKubeletFailure accepts, or it is not Ready and
// its current or, while it runs again, its last termination was an error.
// The reason is the kubelet's own.
//
// The detail is kept free of text that changes on every kubelet update, so
// that a pod that keeps failing the same way causes no status writes: for
// CrashLoopBackOff it replaces the kubelet's message, which holds the
// growing back-off delay, with the exit code and the last line of the
// container's termination message. Writes still follow the kubelet's reason
// as it alternates, for example from CrashLoopBackOff to Error and back on
// every restart, or between ErrImagePull and ImagePullBackOff on every pull;
// the kubelet's back-off bounds those to a few per pod every five minutes.
func containerFailed(s corev1.ContainerStatus) (reason, detail string, failed bool) {
	if w := s.State.Waiting; w != nil && isKubeletFailure(w.Reason) {
		if w.Reason != reasonCrashLoopBackOff {
			return w.Reason, w.Message, true
		}
		detail = "back-off restarting failed container"
		if t := s.LastTerminationState.Terminated; t != nil {
			detail += " that " + terminationDetail(t)
		}
		return w.Reason, detail, true
	}
	if s.Ready {
		return "", "", false
	}
	t := s.State.Terminated
	if t == nil {
		t = s.LastTerminationState.Terminated
	}
	if t == nil || t.ExitCode == 0 {
		return "", "", false
	}
	reason = t.Reason
	if reason == "" {
		reason = "Error"
	}
	return reason, terminationDetail(t), true
}

// terminationDetail describes how a container terminated: its exit code, the
// kubelet's reason and the last line of its termination message, where a
// crashing memcached leaves its last complaint.
func terminationDetail(t *corev1.ContainerStateTerminated) string {
	detail := fmt.Sprintf("exited with code %d", t.ExitCode)
	if t.Reason != "" {
		detail += " (" + t.Reason + ")"
	}
	msg := strings.TrimSpace(t.Message)
	if msg != "" {
		detail += ": " + msg[strings.LastIndex(msg, "\n")+1:]
	}
	return detail
}

// isKubeletFailure reports whether a container waits for reason because the
// kubelet failed to pull, create or start it, or backs off restarting it.
// ContainerCreating and PodInitializing, the waiting reasons of a normal
// start, are not failures, and neither are reasons missing from this list:
// their pods count as starting.
func isKubeletFailure(reason string) bool {
	switch reason {
	case reasonCrashLoopBackOff,
		"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
		"ImageInspectError", "RegistryUnavailable", "SignatureValidationFailed",
		"CreateContainerConfigError", "CreateContainerError", "RunContainerError",
		"RunInitContainerError", "VerifyNonRootError", "PreStartHookError", "PostStartHookError":
		return true
	}
	return false
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
		if podReady(p) {
			ready++
		}
	}
	return ready
}

// newCondition returns a condition; its LastTransitionTime is filled in by
// setCondition.
func newCondition(typ v1alpha1.MemcachedConditionType, status corev1.ConditionStatus, reason, message string) v1alpha1.MemcachedCondition {
	return v1alpha1.MemcachedCondition{
		Type:    typ,
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

// removeCondition returns a copy of conditions without the one of type typ.
func removeCondition(conditions []v1alpha1.MemcachedCondition, typ v1alpha1.MemcachedConditionType) []v1alpha1.MemcachedCondition {
	out := make([]v1alpha1.MemcachedCondition, 0, len(conditions))
	for _, c := range conditions {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

// FindCondition returns the condition of type typ in conditions, or nil.
func FindCondition(conditions []v1alpha1.MemcachedCondition, typ v1alpha1.MemcachedConditionType) *v1alpha1.MemcachedCondition {
	for i := range conditions {
		if conditions[i].Type == typ {
			return &conditions[i]
		}
	}
	return nil
}
