// Package memcachedtest holds the test fixtures that the tests of the
// memcached, kube and stub packages share: Memcacheds as the API server
// stores them and pods as the kubelet reports them.
package memcachedtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Image is the memcached image the tests' handlers run by default.
const Image = "example.com/memcached:test"

// SidecarImage is the sidecar image the tests' handlers run.
const SidecarImage = "example.com/memcached-sidecar:test"

// Now is the time the tests' handlers read from their clock.
var Now = metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

// CurrentHash is the hash of the pod template m asks for, with Image.
func CurrentHash(m *v1alpha1.Memcached) string {
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, Image, SidecarImage))
	if err != nil {
		panic(err)
	}
	return memcached.ManifestTemplateHash(u)
}

// NewMemcached returns a Memcached as the API server would store it.
func NewMemcached(name string, size int32) *v1alpha1.Memcached {
	return &v1alpha1.Memcached{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Namespace:  "test",
			UID:        types.UID("uid-" + name),
			Generation: 1,
		},
		Spec: v1alpha1.MemcachedSpec{Size: size},
	}
}

// PodTemplateHash is the pod-template-hash label of NewPod's pods, whose
// ReplicaSet the Deployment controller names after it.
const PodTemplateHash = "5d4747fd85"

// NewPod returns a pod of m's Deployment, of its current pod template, in
// the given phase and readiness.
func NewPod(m *v1alpha1.Memcached, name string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	labels := memcached.Labels(m.Name)
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = PodTemplateHash
	controller := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: m.Namespace, UID: types.UID("uid-" + name), Labels: labels,
			Annotations: map[string]string{memcached.TemplateHashAnnotation: CurrentHash(m)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: m.Name + "-" + PodTemplateHash, UID: "uid-replicaset", Controller: &controller,
			}},
		},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: readiness}},
		},
	}
}

// WithContainers gives p the container statuses the kubelet reports.
func WithContainers(p *corev1.Pod, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p.Status.ContainerStatuses = statuses
	return p
}

// CrashLooping is the status of the memcached container while the kubelet
// waits backOff before its next restart after the one it has counted.
func CrashLooping(pod, backOff string, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:         "memcached",
		RestartCount: restarts,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=memcached pod=%s_test(uid-%s)", backOff, pod, pod),
		}},
		LastTerminationState: corev1.ContainerState{Terminated: &MemcachedExit},
	}
}

// MemcachedExit is how memcached 1.6 exits when given "-m=64", with the
// termination message that FallbackToLogsOnError takes from its log.
var MemcachedExit = corev1.ContainerStateTerminated{
	ExitCode: 64,
	Reason:   "Error",
	Message:  "Cannot set item size limit higher than 1/2 of memory max.\n",
}

// Waiting is the status of a container that waits for reason.
func Waiting(name, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:  name,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
	}
}

// Starting is p as the kubelet reports it while it cannot mount p's volumes:
// Pending, every container waiting in ContainerCreating without a message,
// and not ready to start containers.
func Starting(p *corev1.Pod, containers ...string) *corev1.Pod {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: memcached.PodReadyToStartContainers, Status: corev1.ConditionFalse})
	for _, c := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, Waiting(c, "ContainerCreating", ""))
	}
	return p
}

// MissingSecret is the kubelet's message, in its FailedMount Event, of a
// Secret volume whose Secret does not exist.
func MissingSecret(volume, secret string) string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : secret %q not found", volume, secret)
}

// MissingSecretKey is the kubelet's message, in its FailedMount Event, of
// a Secret volume whose Secret lacks a key that the volume lists.
func MissingSecretKey(volume, key string) string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : references non-existent secret key: %s", volume, key)
}

// FailedMountEvent is the Warning Event FailedMount that the kubelet
// records on p with message, first at first and, after count tries, last
// at last, named as the kubelet's recorder names it: after p and the
// nanosecond it made it, in hexadecimal.
func FailedMountEvent(p *corev1.Pod, message string, count int32, first, last time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s.%x", p.Name, first.UnixNano()), Namespace: p.Namespace, UID: types.UID(fmt.Sprintf("uid-event-%x", first.UnixNano())),
			ResourceVersion: "7", CreationTimestamp: metav1.NewTime(first),
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1", ResourceVersion: "3"},
		Reason:         memcached.ReasonFailedMount,
		Message:        message,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(first),
		LastTimestamp:  metav1.NewTime(last),
		Count:          count,
		Type:           corev1.EventTypeWarning,
	}
}

// Int32p returns a pointer to v, for the optional fields of a spec.
func Int32p(v int32) *int32 { return &v }

// ManifestHash returns the template hash memcached.DeploymentManifest gives m.
func ManifestHash(t *testing.T, m *v1alpha1.Memcached, image string) string {
	t.Helper()
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, image, SidecarImage))
	if err != nil {
		t.Fatal(err)
	}
	h := memcached.ManifestTemplateHash(u)
	if h == "" {
		t.Fatalf("the manifest's pod template has no %s", memcached.TemplateHashAnnotation)
	}
	return h
}

// Messages of the ReplicaSet controller's FailedCreate, as the API server
// refuses a pod for each cause, and of the Deployment controller's deadline.
const (
	QuotaRefusal         = `pods "example-6b7f9c5d4-x2k9p" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2`
	PriorityClassRefusal = `pods "example-6b7f9c5d4-" is forbidden: no PriorityClass with name no-such-class was found`
	LimitRangeRefusal    = `pods "example-6b7f9c5d4-q8vnm" is forbidden: maximum memory usage per Container is 64Mi, but limit is 128Mi`
	AdmissionRefusal     = `pods "example-6b7f9c5d4-7wz4c" is forbidden: ValidatingAdmissionPolicy 'no-memcached' with binding 'no-memcached' denied request: memcached is not allowed here`
	DeadlineMessage      = `ReplicaSet "example-6b7f9c5d4" has timed out progressing.`
)

// ReplicaFailure is the Deployment condition of a ReplicaSet that cannot
// create its pods, as the API server refused them with message.
func ReplicaFailure(message string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: message}
}

// DeadlineExceeded is the Deployment condition of a rollout past its
// progressDeadlineSeconds.
var DeadlineExceeded = appsv1.DeploymentCondition{
	Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: memcached.ReasonProgressDeadlineExceeded, Message: DeadlineMessage,
}

// WithMonitoring returns a copy of m with monitoring on or off.
func WithMonitoring(m *v1alpha1.Memcached, on bool) *v1alpha1.Memcached {
	m = m.DeepCopy()
	m.Spec.Monitoring = nil
	if on {
		m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	}
	return m
}

// FirstEndpoint returns the first endpoint of a ServiceMonitor's spec.
func FirstEndpoint(spec map[string]interface{}) map[string]interface{} {
	return spec["endpoints"].([]interface{})[0].(map[string]interface{})
}

// OwnedDeployment is m's Deployment as the operator creates it, with the
// current template hash and m's spec recorded, and with replicas.
func OwnedDeployment(m *v1alpha1.Memcached, replicas int32) *appsv1.Deployment {
	d := memcached.NewDeployment(m, Image, SidecarImage)
	d.UID = "uid-deployment"
	d.Spec.Replicas = &replicas
	d.Spec.Template.Annotations = map[string]string{memcached.TemplateHashAnnotation: CurrentHash(m), memcached.SpecHashAnnotation: MustSpecHash(m)}
	d.Annotations = map[string]string{memcached.ObservedDigestAnnotation: CurrentDigest(m)}
	return d
}

// CurrentDigest is memcached.DesiredDigest of the Deployment m asks for,
// with Image: what the cache observes on m's Deployment while nobody
// changed what the operator applied.
func CurrentDigest(m *v1alpha1.Memcached) string {
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, Image, SidecarImage))
	if err != nil {
		panic(err)
	}
	digest, err := memcached.DesiredDigest(u.Object)
	if err != nil {
		panic(err)
	}
	return digest
}

// MustSpecHash is m's memcached.SpecHash.
func MustSpecHash(m *v1alpha1.Memcached) string {
	h, err := memcached.SpecHash(m)
	if err != nil {
		panic(err)
	}
	return h
}

// OwnedService is m's Service as the operator creates it.
func OwnedService(m *v1alpha1.Memcached) *corev1.Service {
	s := memcached.NewService(m)
	s.UID = "uid-service"
	return s
}

// OwnedBudget is m's PodDisruptionBudget as the operator creates it.
func OwnedBudget(m *v1alpha1.Memcached) *policyv1beta1.PodDisruptionBudget {
	p := memcached.NewPodDisruptionBudget(m)
	p.UID = "uid-pdb"
	return p
}

// PacedDeployment is m's Deployment right after a paced roll to Image.
func PacedDeployment(m *v1alpha1.Memcached, replicas int32) *appsv1.Deployment {
	d := OwnedDeployment(m, replicas)
	d.Spec.Template.Annotations[memcached.PacedRollAnnotation] = "true"
	return d
}

// StrictPolicy is a memcached.Policy with every check on.
var StrictPolicy = memcached.Policy{
	ImagePrefixes:            []string{"registry.example.com/cache/", "docker.io/library/memcached:"},
	PriorityClasses:          []string{"cache-low", "cache-high"},
	ForbidKeylessTolerations: true,
}

// WaitMet reports whether kubectl wait --for=condition=typ=want returns for
// a Memcached of generation with status, as kubectl v1.37 decides it: the
// condition of that type must have that status, and the generation it
// describes, its own observedGeneration or else the status's, must not be
// below generation. A status with no observedGeneration at all is taken as
// it is.
func WaitMet(generation int64, status v1alpha1.MemcachedStatus, typ v1alpha1.MemcachedConditionType, want corev1.ConditionStatus) bool {
	c := memcached.FindCondition(status.Conditions, typ)
	if c == nil {
		return false
	}
	observed := c.ObservedGeneration
	if observed == 0 {
		observed = status.ObservedGeneration
	}
	if observed != 0 && observed < generation {
		return false
	}
	return c.Status == want
}
