package stub

import (
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// appLabel marks every object the operator manages, so that its watches
	// can filter on one label.
	appLabel = "app"
	// appLabelValue is the value of appLabel on memcached Deployments and pods.
	appLabelValue = "memcached"
	// crLabel names the Memcached resource a Deployment or pod belongs to.
	crLabel = "memcached_cr"
)

// ManagedSelector selects every Deployment and pod the operator may manage,
// across all Memcached resources; main.go filters the child watches with it.
var ManagedSelector = labels.Set{appLabel: appLabelValue}.String()

// labelsForMemcached returns the labels of the Deployment and pods of the
// Memcached named name; they are also the Deployment's selector.
func labelsForMemcached(name string) map[string]string {
	return map[string]string{appLabel: appLabelValue, crLabel: name}
}

// selectorForMemcached selects the pods of the Memcached named name.
func selectorForMemcached(name string) labels.Selector {
	return labels.SelectorFromSet(labelsForMemcached(name))
}
