package memcached

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// memcachedPort is the port memcached listens on, and the container port's number.
	memcachedPort = 11211
	// memcachedPortName names the container port, so Services can target it by name.
	memcachedPortName = "memcached"
	// memcachedUID is the uid of the "memcache" user in the official memcached
	// images. The kubelet can only enforce runAsNonRoot for numeric users.
	memcachedUID = 11211
	// TemplateHashAnnotation, on the Deployment's pod template and so on
	// every pod, holds a hash of the pod template the operator wants. The
	// reconcile compares hashes, not templates, so that its caches need not
	// hold pod templates, and tells pods of an older template by it.
	TemplateHashAnnotation = "cache.example.com/template-hash"
	// terminationGracePeriod is how long the kubelet lets a memcached pod
	// stop: the preStop pause, then memcached closing its connections.
	terminationGracePeriod = 15
	// preStopSleepSeconds keeps a stopping memcached serving while the
	// endpoints controller removes the pod from the Service and clients
	// that watch it stop sending new requests there.
	preStopSleepSeconds = 5
	// ProgressDeadlineSeconds is how long a roll or a scale of a memcached
	// Deployment may go without another pod becoming available before the
	// Deployment controller reports ProgressDeadlineExceeded, which the
	// Memcached's Degraded condition takes over (see stuck). The clock
	// restarts with every pod that becomes available, so it bounds the start
	// of one pod, not a whole roll. A memcached pod is Ready seconds after
	// its image is pulled: memcached starts at once, and the first TCP
	// readiness probe runs within its period of 10 s. Five minutes leave
	// room for a slow pull and for a node that a cluster autoscaler adds,
	// and still tell within five minutes what no pod's state explains, such
	// as a pod that stays ContainerCreating; half of Kubernetes' default of
	// 600 s, which was set for workloads that take minutes to start.
	ProgressDeadlineSeconds = 300
	// hostnameTopologyKey is the node label that tells nodes apart, for
	// spreading the pods; client-go 1.11 has no constant for it.
	hostnameTopologyKey = "kubernetes.io/hostname"
)

// NewDeployment returns the Deployment that runs m's memcached
// pods, with defaultImage unless m names its own, and sidecarImage when m's
// TLS, auth or monitoring needs the sidecar. It holds what client-go 1.11's types
// can express; DeploymentManifest adds the rest. The reconcile
// creates it as is and afterwards manages its replica count, its progress
// deadline and, by TemplateHashAnnotation, its pod template and strategy.
func NewDeployment(m *v1alpha1.Memcached, defaultImage, sidecarImage string) *appsv1.Deployment {
	labels := Labels(m.Name)
	replicas := m.Spec.Size
	deadline := int32(ProgressDeadlineSeconds)
	surge, unavailable := intstr.FromInt(1), intstr.FromInt(0)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{
			APIVersion: appsv1.SchemeGroupVersion.String(),
			Kind:       "Deployment",
		},
		ObjectMeta: childMeta(m),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One new pod at a time, and an old one goes only once the new
			// one is Ready: a roll never has fewer than spec.size Ready
			// pods, and never loses more than one pod's keys at once.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       &surge,
					MaxUnavailable: &unavailable,
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       PodSpec(m, defaultImage, sidecarImage),
			},
			ProgressDeadlineSeconds: &deadline,
		},
	}
}

// childMeta is the metadata of every child of m: its name, namespace and
// labels, and a controller reference to m, so that the garbage collector
// removes the child with m.
func childMeta(m *v1alpha1.Memcached) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      m.Name,
		Namespace: m.Namespace,
		Labels:    Labels(m.Name),
		OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(m, v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind)),
		},
	}
}

// PodSpec is a pod that Pod Security "restricted" admits, running
// memcached as m's spec asks.
func PodSpec(m *v1alpha1.Memcached, defaultImage, sidecarImage string) corev1.PodSpec {
	nonRoot := true
	noEscalation := false
	readOnlyRoot := true
	uid := int64(memcachedUID)
	grace := int64(terminationGracePeriod)
	noToken := false
	image := m.Spec.Image
	if image == "" {
		image = defaultImage
	}
	readiness, liveness := memcachedProbes()
	security := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &noEscalation,
		ReadOnlyRootFilesystem:   &readOnlyRoot,
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
		},
	}
	volumes, mounts := secretVolumes(m)
	spec := corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: &nonRoot,
			RunAsUser:    &uid,
			RunAsGroup:   &uid,
		},
		Volumes:                       volumes,
		TerminationGracePeriodSeconds: &grace,
		// memcached never calls the API server: a mounted token would only
		// be a credential for whoever breaks into the pod.
		AutomountServiceAccountToken: &noToken,
		NodeSelector:                 m.Spec.NodeSelector,
		Tolerations:                  m.Spec.Tolerations,
		PriorityClassName:            m.Spec.PriorityClassName,
		Containers: []corev1.Container{{
			Name:    "memcached",
			Image:   image,
			Command: memcachedCommand(m),
			// memcached prints why it exits to stderr and writes no
			// termination message, so the kubelet's fallback to the log's
			// tail is what lets the status name the cause of a crash loop.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			Ports: []corev1.ContainerPort{{
				Name:          memcachedPortName,
				ContainerPort: memcachedPort,
				Protocol:      corev1.ProtocolTCP,
			}},
			VolumeMounts:    mounts,
			Resources:       memcachedResources(m),
			ReadinessProbe:  readiness,
			LivenessProbe:   liveness,
			SecurityContext: security,
		}},
	}
	if needsSidecar(m) {
		cmVolumes, cmMounts := discoveryVolumes(m)
		spec.Volumes = append(spec.Volumes, cmVolumes...)
		spec.Containers = append(spec.Containers, sidecarContainer(m, sidecarImage, append(mounts[:len(mounts):len(mounts)], cmMounts...), security))
	}
	if len(spec.Volumes) > 0 {
		// The Secrets' files and the discovery ConfigMap's belong to this
		// group, readable by it alone.
		spec.SecurityContext.FSGroup = &uid
	}
	if sharesProcesses(m) {
		share := true
		spec.ShareProcessNamespace = &share
	}
	return spec
}

// memcachedProbes returns memcached's readiness and liveness probes. Both can
// only connect to its port: an image of the user's choice may hold no shell
// or client, and memcached speaks no HTTP. A connect succeeds while memcached
// listens and the kernel's accept queue (memcached's -b backlog) has room, so
// it fails when memcached has exited or when its threads have left
// connections unaccepted long enough to fill that queue: under a burst of
// load, or when they hang. The two probes differ in how long they wait for
// that to pass. Readiness takes a pod out of its Service after 2 failed
// connects 5 s apart, so that clients go to its peers; liveness restarts
// memcached, which loses its keys, only after 6 connects 10 s apart have
// each waited 5 s in vain: a minute in which a busy memcached accepted
// nothing is one whose threads are stuck.
func memcachedProbes() (readiness, liveness *corev1.Probe) {
	connect := corev1.Handler{
		TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(memcachedPortName)},
	}
	readiness = &corev1.Probe{Handler: connect, PeriodSeconds: 5, TimeoutSeconds: 1, FailureThreshold: 2}
	liveness = &corev1.Probe{Handler: connect, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6}
	return readiness, liveness
}

// memcachedCommand is the memcached command line: m's extra arguments, then
// the options the operator controls, last so that they win, then those of
// TLS and auth. Every option and its value are separate arguments:
// memcached's getopt reads "-m=64" as the value "=64", which it takes for
// 0 MB, and then exits.
func memcachedCommand(m *v1alpha1.Memcached) []string {
	cmd := append([]string{"memcached"}, m.Spec.ExtraArgs...)
	return append(append(cmd,
		"-m", strconv.Itoa(int(cacheMB(m))),
		"-p", strconv.Itoa(memcachedPort),
		"-v",
	), securityArgs(m)...)
}

// DeploymentManifest returns d as the object to send to the API server, with
// the fields that client-go 1.11's types cannot express, and the hash of its
// pod template in TemplateHashAnnotation. Those fields are:
//   - a RuntimeDefault seccomp profile, which Pod Security "restricted"
//     requires since Kubernetes 1.19 replaced the seccomp annotations with
//     a field;
//   - a soft spread of the pods across nodes, counted among the pods of one
//     ReplicaSet (matchLabelKeys), so that a roll spreads the new pods too;
//   - a preStop pause of preStopSleepSeconds, which needs no shell in the
//     image.
func DeploymentManifest(d *appsv1.Deployment) (*unstructured.Unstructured, error) {
	u, err := ToManifest(d)
	if err != nil {
		return nil, fmt.Errorf("failed to convert deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	if err := addModernPodFields(u, d.Spec.Template.Labels); err != nil {
		return nil, fmt.Errorf("failed to build the pod template of deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	template, _, err := unstructured.NestedMap(u.Object, "spec", "template")
	if err != nil {
		return nil, fmt.Errorf("failed to read the pod template of deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	hash, err := shortHash(template)
	if err != nil {
		return nil, fmt.Errorf("failed to hash the pod template of deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	if err := unstructured.SetNestedField(u.Object, hash, "spec", "template", "metadata", "annotations", TemplateHashAnnotation); err != nil {
		return nil, fmt.Errorf("failed to annotate the pod template of deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	return u, nil
}

// addModernPodFields sets the pod template fields of DeploymentManifest in u.
func addModernPodFields(u *unstructured.Unstructured, labels map[string]string) error {
	podSpec := []string{"spec", "template", "spec"}
	if err := unstructured.SetNestedField(u.Object, "RuntimeDefault", append(podSpec, "securityContext", "seccompProfile", "type")...); err != nil {
		return err
	}
	selector := map[string]interface{}{}
	for k, v := range labels {
		selector[k] = v
	}
	spread := []interface{}{map[string]interface{}{
		"maxSkew":           int64(1),
		"topologyKey":       hostnameTopologyKey,
		"whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector":     map[string]interface{}{"matchLabels": selector},
		"matchLabelKeys":    []interface{}{appsv1.DefaultDeploymentUniqueLabelKey},
	}}
	if err := unstructured.SetNestedSlice(u.Object, spread, append(podSpec, "topologySpreadConstraints")...); err != nil {
		return err
	}
	containers, _, err := unstructured.NestedSlice(u.Object, append(podSpec, "containers")...)
	if err != nil {
		return err
	}
	for _, c := range containers {
		container, ok := c.(map[string]interface{})
		if !ok {
			return fmt.Errorf("container is a %T", c)
		}
		container["lifecycle"] = map[string]interface{}{
			"preStop": map[string]interface{}{
				"sleep": map[string]interface{}{"seconds": int64(preStopSleepSeconds)},
			},
		}
	}
	return unstructured.SetNestedSlice(u.Object, containers, append(podSpec, "containers")...)
}

// shortHash is a short hash of v's JSON, whose map keys encoding/json
// sorts, so that equal pod templates or specs always hash alike.
func shortHash(v interface{}) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 36), nil
}

// TemplateOf returns the hash of d's pod template, as TemplateHashAnnotation
// records it; "" for a template the operator has not annotated.
func TemplateOf(d *appsv1.Deployment) string {
	return d.Spec.Template.Annotations[TemplateHashAnnotation]
}

// ManifestTemplateHash returns the hash that DeploymentManifest recorded in
// manifest's pod template.
func ManifestTemplateHash(manifest *unstructured.Unstructured) string {
	hash, _, _ := unstructured.NestedString(manifest.Object, "spec", "template", "metadata", "annotations", TemplateHashAnnotation)
	return hash
}

// memcachedResources returns the container's resources: m's own, as given,
// or the default of a small cache. The default sets no CPU limit: the CFS
// quota would stall a busy memcached for the rest of each 100 ms period and
// add that to its replies' latency, while its CPU request already weighs it
// against its neighbours. Its ephemeral storage is its log, as memcached
// writes no file: see logStorage.
func memcachedResources(m *v1alpha1.Memcached) corev1.ResourceRequirements {
	if m.Spec.Resources != nil {
		return *m.Spec.Resources.DeepCopy()
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("50m"),
			corev1.ResourceMemory:           resource.MustParse("96Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse(logStorageRequest),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory:           resource.MustParse(defaultMemoryLimit),
			corev1.ResourceEphemeralStorage: resource.MustParse(logStorageLimit),
		},
	}
}

// The ephemeral storage of a container that writes no file but its log,
// which the kubelet counts against the limit. The limit is above what the
// kubelet keeps of a log by default (5 files of 10 MiB, containerLogMaxFiles
// and containerLogMaxSize), so that a chatty container is rotated, not
// evicted; the request is what a quiet one uses.
const (
	logStorageRequest = "16Mi"
	logStorageLimit   = "128Mi"
)
