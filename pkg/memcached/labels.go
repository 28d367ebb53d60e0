package memcached

import (
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
