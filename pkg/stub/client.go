package stub

import (
	"encoding/json"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Client is the narrow slice of the Kubernetes API that the reconcile uses.
// Reads are live, so every decision is made on the API server's current
// state rather than on a cache that may lag the event being handled.
type Client interface {
	// GetMemcached returns a fresh copy of the named Memcached.
	GetMemcached(namespace, name string) (*v1alpha1.Memcached, error)
	// UpdateMemcachedStatus writes m.Status through the status subresource.
	UpdateMemcachedStatus(m *v1alpha1.Memcached) error
	// GetDeployment returns the named Deployment.
	GetDeployment(namespace, name string) (*appsv1.Deployment, error)
	// CreateDeployment creates the Deployment described by manifest.
	CreateDeployment(manifest *unstructured.Unstructured) error
	// ScaleDeployment sets spec.replicas of the named Deployment and nothing else.
	ScaleDeployment(namespace, name string, replicas int32) error
	// ListPods returns the pods in namespace that selector matches.
	ListPods(namespace string, selector labels.Selector) ([]corev1.Pod, error)
}

// NewClient returns a Client over kube for built-in resources and dyn for
// Memcached resources and for Deployment creation.
func NewClient(kube kubernetes.Interface, dyn dynamic.Interface) Client {
	return &apiClient{kube: kube, dyn: dyn}
}

// apiClient implements Client with client-go 1.11. Writes that would lose
// data through 1.11's typed structs go through the dynamic client or a patch:
// a PUT of a 1.11 Deployment would drop every pod field added since 1.11 and
// so restart all memcached pods.
type apiClient struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func (c *apiClient) GetMemcached(namespace, name string) (*v1alpha1.Memcached, error) {
	u, err := c.dyn.Resource(v1alpha1.SchemeGroupVersionResource).Namespace(namespace).Get(name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m := &v1alpha1.Memcached{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m); err != nil {
		return nil, fmt.Errorf("failed to decode memcached %s/%s: %v", namespace, name, err)
	}
	return m, nil
}

func (c *apiClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) error {
	m = m.DeepCopy()
	m.APIVersion = v1alpha1.APIVersion()
	m.Kind = v1alpha1.Kind
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return fmt.Errorf("failed to encode memcached %s/%s: %v", m.Namespace, m.Name, err)
	}
	_, err = c.dyn.Resource(v1alpha1.SchemeGroupVersionResource).Namespace(m.Namespace).
		UpdateStatus(&unstructured.Unstructured{Object: content})
	return err
}

func (c *apiClient) GetDeployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.kube.AppsV1().Deployments(namespace).Get(name, metav1.GetOptions{})
}

func (c *apiClient) CreateDeployment(manifest *unstructured.Unstructured) error {
	_, err := c.dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).
		Namespace(manifest.GetNamespace()).Create(manifest)
	return err
}

func (c *apiClient) ScaleDeployment(namespace, name string, replicas int32) error {
	patch, err := json.Marshal(map[string]interface{}{
		"spec": map[string]interface{}{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	_, err = c.kube.AppsV1().Deployments(namespace).Patch(name, types.MergePatchType, patch)
	return err
}

func (c *apiClient) ListPods(namespace string, selector labels.Selector) ([]corev1.Pod, error) {
	list, err := c.kube.CoreV1().Pods(namespace).List(metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
