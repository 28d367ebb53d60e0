package stub

import (
	"fmt"
	"strconv"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// memcachedPort is the port memcached listens on, and the container port's number.
	memcachedPort = 11211
	// memcachedPortName names the container port, so Services can target it by name.
	memcachedPortName = "memcached"
	// memcachedCacheMB is memcached's item memory in megabytes, its -m
	// option. It stays well inside memcachedMemoryLimit, which also has to
	// hold memcached's hash table and connection buffers.
	memcachedCacheMB = 64
	// memcachedMemoryLimit is the memory limit of the memcached container.
	memcachedMemoryLimit = "128Mi"
	// memcachedUID is the uid of the "memcache" user in the official memcached
	// images. The kubelet can only enforce runAsNonRoot for numeric users.
	memcachedUID = 11211
)

// newDeploymentForMemcached returns the Deployment that runs m's memcached
// pods with the given image. It is the whole desired state of the child: the
// reconcile creates it as is and afterwards only manages its replica count.
func newDeploymentForMemcached(m *v1alpha1.Memcached, image string) *appsv1.Deployment {
	labels := labelsForMemcached(m.Name)
	replicas := m.Spec.Size
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{
			APIVersion: appsv1.SchemeGroupVersion.String(),
			Kind:       "Deployment",
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:      m.Name,
			Namespace: m.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(m, v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind)),
			},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       memcachedPodSpec(image),
			},
		},
	}
}

// memcachedPodSpec is a pod that Pod Security "restricted" admits, running
// memcached with memcachedCacheMB of cache.
func memcachedPodSpec(image string) corev1.PodSpec {
	nonRoot := true
	noEscalation := false
	readOnlyRoot := true
	uid := int64(memcachedUID)
	probe := &corev1.Probe{
		Handler: corev1.Handler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(memcachedPortName)},
		},
		PeriodSeconds: 10,
	}
	return corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: &nonRoot,
			RunAsUser:    &uid,
			RunAsGroup:   &uid,
		},
		Containers: []corev1.Container{{
			Name:    "memcached",
			Image:   image,
			Command: memcachedCommand(),
			// memcached prints why it exits to stderr and writes no
			// termination message, so the kubelet's fallback to the log's
			// tail is what lets the status name the cause of a crash loop.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			Ports: []corev1.ContainerPort{{
				Name:          memcachedPortName,
				ContainerPort: memcachedPort,
				Protocol:      corev1.ProtocolTCP,
			}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("50m"),
					corev1.ResourceMemory: resource.MustParse("96Mi"),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse(memcachedMemoryLimit),
				},
			},
			ReadinessProbe: probe,
			LivenessProbe:  probe,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &noEscalation,
				ReadOnlyRootFilesystem:   &readOnlyRoot,
				Capabilities: &corev1.Capabilities{
					Drop: []corev1.Capability{"ALL"},
				},
			},
		}},
	}
}

// memcachedCommand is the memcached command line. Every option and its value
// are separate arguments: memcached's getopt reads "-m=64" as the value "=64",
// which it takes for 0 MB, and then exits.
func memcachedCommand() []string {
	return []string{
		"memcached",
		"-m", strconv.Itoa(memcachedCacheMB),
		"-p", strconv.Itoa(memcachedPort),
		"-v",
	}
}

// deploymentManifest returns d as the object to send to the API server, with
// the fields that client-go 1.11's types cannot express: a RuntimeDefault
// seccomp profile, which Pod Security "restricted" requires since
// Kubernetes 1.19 replaced the seccomp annotations with a field.
func deploymentManifest(d *appsv1.Deployment) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, fmt.Errorf("failed to convert deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	u := &unstructured.Unstructured{Object: content}
	if err := unstructured.SetNestedField(u.Object, "RuntimeDefault",
		"spec", "template", "spec", "securityContext", "seccompProfile", "type"); err != nil {
		return nil, fmt.Errorf("failed to set the seccomp profile of deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	return u, nil
}
