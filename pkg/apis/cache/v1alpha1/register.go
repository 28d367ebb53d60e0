package v1alpha1

import (
	"github.com/operator-framework/operator-sdk/pkg/util/k8sutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the Memcached resource.
	GroupName = "cache.example.com"
	// Version is the API version of the Memcached resource.
	Version = "v1alpha1"
	// Kind is the kind the operator watches, as sdk.Watch needs it.
	Kind = "Memcached"
	// Resource is the plural resource name the API server serves Memcached under.
	Resource = "memcacheds"
)

var (
	// SchemeGroupVersion is the group and version that objects in this package are registered under.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}
	// SchemeGroupVersionResource addresses Memcached objects through dynamic clients.
	SchemeGroupVersionResource = SchemeGroupVersion.WithResource(Resource)
	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	// The SDK decodes watched objects with its own scheme; registering here is
	// what makes the handler receive *Memcached instead of unstructured data.
	k8sutil.AddToSDKScheme(AddToScheme)
}

// APIVersion returns "cache.example.com/v1alpha1", the apiVersion sdk.Watch resolves.
func APIVersion() string {
	return SchemeGroupVersion.String()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
