package stub

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Client is the narrow slice of the Kubernetes API that the reconcile uses.
type Client interface {
	// GetMemcached returns a copy of the named Memcached that the caller may modify.
	GetMemcached(namespace, name string) (*v1alpha1.Memcached, error)
	// UpdateMemcachedStatus writes m.Status through the status subresource.
	UpdateMemcachedStatus(m *v1alpha1.Memcached) error
	// GetDeployment returns the named Deployment, which the caller must not modify.
	GetDeployment(namespace, name string) (*appsv1.Deployment, error)
	// CreateDeployment creates the Deployment described by manifest.
	CreateDeployment(manifest *unstructured.Unstructured) error
	// ScaleDeployment sets spec.replicas of the named Deployment and nothing else.
	ScaleDeployment(namespace, name string, replicas int32) error
	// ListPods returns the pods in namespace that selector matches, which the
	// caller must not modify.
	ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error)
}

// CachedClient is the Client the operator runs with. It reads from informer
// caches of one namespace, so a reconcile costs no API request unless it
// writes, and it writes through the API server. Its informers also tell the
// handler when a Deployment or pod of a Memcached changes.
//
// Writes that would lose data through client-go 1.11's typed structs go
// through the dynamic client or a patch: a PUT of a 1.11 Deployment would
// drop every pod field added since 1.11 and so restart all memcached pods.
type CachedClient struct {
	kube        kubernetes.Interface
	dyn         dynamic.Interface
	factory     informers.SharedInformerFactory
	memcacheds  cache.SharedIndexInformer
	deployments cache.SharedIndexInformer
	pods        cache.SharedIndexInformer
}

// NewCachedClient returns a CachedClient for namespace. The Deployment and
// pod caches hold only objects labelled app=memcached; Start fills them.
func NewCachedClient(kube kubernetes.Interface, dyn dynamic.Interface, namespace string) *CachedClient {
	factory := informers.NewFilteredSharedInformerFactory(kube, 0, namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = ManagedSelector
	})
	memcacheds := dyn.Resource(v1alpha1.SchemeGroupVersionResource).Namespace(namespace)
	served := &apiServed{}
	return &CachedClient{
		kube:    kube,
		dyn:     dyn,
		factory: factory,
		memcacheds: cache.NewSharedIndexInformer(&cache.ListWatch{
			ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
				list, err := memcacheds.List(o)
				served.observe(err)
				return list, err
			},
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return memcacheds.Watch(o) },
		}, &unstructured.Unstructured{}, 0, cache.Indexers{}),
		deployments: factory.Apps().V1().Deployments().Informer(),
		pods:        factory.Core().V1().Pods().Informer(),
	}
}

// apiServed logs when the Memcached API stops being served, typically because
// its CustomResourceDefinition was deleted, and when it is served again. The
// informer meanwhile retries its list once a second, and client-go's
// reflector logs each failure only as "Failed to list
// *unstructured.Unstructured: the server could not find the requested
// resource", which names neither.
type apiServed struct {
	missing int32 // 1 while lists fail with NotFound
}

// observe takes the result of a Memcached list.
func (a *apiServed) observe(err error) {
	switch {
	case apierrors.IsNotFound(err):
		if atomic.CompareAndSwapInt32(&a.missing, 0, 1) {
			crd := v1alpha1.SchemeGroupVersionResource.GroupResource()
			logrus.Errorf("the Memcached API %s is not served (is the CustomResourceDefinition %s deleted?): no Memcached can be read or reconciled until it is back; retrying every second",
				v1alpha1.APIVersion(), crd.String())
		}
	case err == nil:
		if atomic.CompareAndSwapInt32(&a.missing, 1, 0) {
			logrus.Infof("the Memcached API %s is served again", v1alpha1.APIVersion())
		}
	}
}

// OnChildChange makes the caches call enqueue with the namespace and
// Memcached name (the memcached_cr label) of every Deployment or pod that is
// added, changed or deleted. It must be called before Start.
func (c *CachedClient) OnChildChange(enqueue func(namespace, name string)) {
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueueOwner(obj, enqueue) },
		UpdateFunc: func(_, obj interface{}) { enqueueOwner(obj, enqueue) },
		DeleteFunc: func(obj interface{}) { enqueueOwner(obj, enqueue) },
	}
	c.deployments.AddEventHandler(handler)
	c.pods.AddEventHandler(handler)
}

// enqueueOwner passes the owner of a cached child, or of the last known
// state of a deleted one, to enqueue.
func enqueueOwner(obj interface{}, enqueue func(namespace, name string)) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	child, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if name := child.GetLabels()[crLabel]; name != "" {
		enqueue(child.GetNamespace(), name)
	}
}

// Start runs the informers until stop is closed and waits for their caches
// to be filled, failing if stop closes first.
func (c *CachedClient) Start(stop <-chan struct{}) error {
	go c.memcacheds.Run(stop)
	c.factory.Start(stop)
	if !cache.WaitForCacheSync(stop, c.memcacheds.HasSynced, c.deployments.HasSynced, c.pods.HasSynced) {
		return fmt.Errorf("stopped before the Memcached, Deployment and pod caches were filled")
	}
	return nil
}

// GetMemcached reads the Memcached cache. A Memcached that the cache has not
// seen yet is NotFound: its own watch event is on the way to the SDK.
func (c *CachedClient) GetMemcached(namespace, name string) (*v1alpha1.Memcached, error) {
	obj, exists, err := c.memcacheds.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1alpha1.SchemeGroupVersionResource.GroupResource(), name)
	}
	m := &v1alpha1.Memcached{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).UnstructuredContent(), m); err != nil {
		return nil, fmt.Errorf("failed to decode memcached %s/%s: %v", namespace, name, err)
	}
	return m, nil
}

// UpdateMemcachedStatus writes m's status through the dynamic client, whose
// UpdateStatus targets the status subresource; the SDK's sdk.Update cannot.
func (c *CachedClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) error {
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

// GetDeployment reads the Deployment cache and falls back to the API server
// on a miss. The cache misses a Deployment created a moment ago and any
// Deployment without the app=memcached label, which is not ours but must be
// seen to be left alone.
func (c *CachedClient) GetDeployment(namespace, name string) (*appsv1.Deployment, error) {
	d, err := appslisters.NewDeploymentLister(c.deployments.GetIndexer()).Deployments(namespace).Get(name)
	if err == nil || !apierrors.IsNotFound(err) {
		return d, err
	}
	return c.kube.AppsV1().Deployments(namespace).Get(name, metav1.GetOptions{})
}

// CreateDeployment creates manifest through the dynamic client, which keeps
// fields client-go 1.11's types do not know.
func (c *CachedClient) CreateDeployment(manifest *unstructured.Unstructured) error {
	_, err := c.dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).
		Namespace(manifest.GetNamespace()).Create(manifest)
	return err
}

// ScaleDeployment patches spec.replicas alone, leaving every other field,
// including the pod template, as the API server has it.
func (c *CachedClient) ScaleDeployment(namespace, name string, replicas int32) error {
	patch, err := json.Marshal(map[string]interface{}{
		"spec": map[string]interface{}{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	_, err = c.kube.AppsV1().Deployments(namespace).Patch(name, types.MergePatchType, patch)
	return err
}

// ListPods reads the pod cache.
func (c *CachedClient) ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	return corelisters.NewPodLister(c.pods.GetIndexer()).Pods(namespace).List(selector)
}
