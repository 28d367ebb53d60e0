package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// AppLabel marks every object the operator manages, so that its watches
	// can filter on one label.
	AppLabel = "app"
	// AppLabelValue is the value of AppLabel on memcached Deployments and pods.
	AppLabelValue = "memcached"
	// CRLabel names the Memcached resource a Deployment or pod belongs to.
	CRLabel = "memcached_cr"
)

// ManagedSelector selects every Deployment and pod the operator may manage,
// across all Memcached resources; main.go filters the child watches with it.
var ManagedSelector = labels.Set{AppLabel: AppLabelValue}.String()

// Labels returns the labels of the Deployment and pods of the
// Memcached named name; they are also the Deployment's selector.
func Labels(name string) map[string]string {
	return map[string]string{AppLabel: AppLabelValue, CRLabel: name}
}

// OwnPods returns the pods among pods that the Deployment of the Memcached
// named name runs: those whose controller is the ReplicaSet that the
// Deployment controller names after the Deployment and the pod's
// pod-template-hash label. A pod that only carries the Memcached's labels,
// made by hand or by another controller, is not one of its pods, and is
// left out of its status and of its rolls.
func OwnPods(name string, pods []*corev1.Pod) []*corev1.Pod {
	var own []*corev1.Pod
	for _, p := range pods {
		c := metav1.GetControllerOf(p)
		hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if c != nil && c.Kind == "ReplicaSet" && hash != "" && c.Name == name+"-"+hash {
			own = append(own, p)
		}
	}
	return own
}

// Selector selects the pods of the Memcached named name.
func Selector(name string) labels.Selector {
	return labels.SelectorFromSet(Labels(name))
}

// The resources of the children, for their REST paths and for the errors
// that name them, as the API server's do.
var (
	DeploymentResource          = schema.GroupResource{Group: "apps", Resource: "deployments"}
	ServiceResource             = schema.GroupResource{Resource: "services"}
	PodDisruptionBudgetResource = schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}
)
