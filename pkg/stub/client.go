package stub

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Client is the narrow slice of the Kubernetes API that the reconcile uses.
// Memcached resources come from the SDK's events instead (see Handler).
type Client interface {
	// UpdateMemcachedStatus writes m.Status through the status subresource
	// and returns the Memcached as the API server stored it.
	UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error)
	// MemcachedAPIServed returns nil when the API server serves the
	// Memcached API, or the error that says why not.
	MemcachedAPIServed() error
	// GetDeployment returns the named Deployment from what the client
	// knows without asking the API server: NotFound means the client has
	// not seen it. The caller must not modify it.
	GetDeployment(namespace, name string) (*appsv1.Deployment, error)
	// ReadDeployment reads the named Deployment from the API server.
	ReadDeployment(namespace, name string) (*appsv1.Deployment, error)
	// CreateDeployment creates the Deployment described by manifest and
	// returns it as the API server stored it, trimmed as the cache's are.
	CreateDeployment(manifest *unstructured.Unstructured) (*appsv1.Deployment, error)
	// ScaleDeployment sets spec.replicas of the named Deployment and nothing else.
	ScaleDeployment(namespace, name string, replicas int32) error
	// ListPods returns the pods of the Memcached namespace/name, those with
	// its labels (labelsForMemcached), which the caller must not modify.
	ListPods(namespace, name string) ([]*corev1.Pod, error)
}

// CachedClient is the Client the operator runs with. It reads from informer
// caches of one namespace, so a reconcile costs no API request unless it
// writes, and it writes through the API server. Its informers also tell the
// handler when a Deployment or pod of a Memcached changes.
//
// Writes that would lose data through client-go 1.11's typed structs go as
// JSON built from the manifest, or as a patch: a PUT of a 1.11 Deployment
// would drop every pod field added since 1.11 and so restart all memcached
// pods.
type CachedClient struct {
	kube        kubernetes.Interface
	memcacheds  rest.Interface
	discovery   discovery.ServerResourcesInterface
	deployments cache.SharedIndexInformer
	pods        cache.SharedIndexInformer
	// created holds the Deployments this client created that the
	// Deployment cache has not shown yet, by namespace/name, so that the
	// reconciles right after a create need no read from the API server.
	created *createdDeployments
}

// NewCachedClient returns a CachedClient for namespace. The Deployment and
// pod caches hold only objects labelled app=memcached; Start fills them.
// kube may speak protobuf; memcacheds, from NewMemcachedRESTClient, and disco
// speak JSON.
func NewCachedClient(kube kubernetes.Interface, memcacheds rest.Interface, disco discovery.ServerResourcesInterface, namespace string) *CachedClient {
	c := &CachedClient{
		kube:        kube,
		memcacheds:  memcacheds,
		discovery:   disco,
		deployments: newDeploymentInformer(kube, namespace, ManagedSelector),
		pods:        newPodInformer(kube, namespace, ManagedSelector),
		created:     &createdDeployments{items: map[string]*appsv1.Deployment{}},
	}
	// Once the cache shows a Deployment, in any version, it is the truth.
	seen := func(obj interface{}) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.created.forget(k)
		}
	}
	c.deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
		DeleteFunc: seen,
	})
	return c
}

// createdDeployments is a set of Deployments by namespace/name, safe for
// concurrent use.
type createdDeployments struct {
	mu    sync.Mutex
	items map[string]*appsv1.Deployment
}

func (c *createdDeployments) add(key string, d *appsv1.Deployment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[key] = d
}

func (c *createdDeployments) get(key string) (*appsv1.Deployment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.items[key]
	return d, ok
}

func (c *createdDeployments) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, key)
}

// OnChildChange makes the caches call enqueue with the namespace and
// Memcached name (the memcached_cr label) of every Deployment or pod that is
// added, changed or deleted. It must be called before Start.
func (c *CachedClient) OnChildChange(enqueue func(namespace, name string)) {
	c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueueOwner(obj, enqueue) },
		UpdateFunc: func(_, obj interface{}) { enqueueOwner(obj, enqueue) },
		DeleteFunc: func(obj interface{}) { enqueueOwner(obj, enqueue) },
	})
	c.deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { enqueueOwner(obj, enqueue) },
		UpdateFunc: func(old, obj interface{}) {
			if deploymentChanged(old, obj) {
				enqueueOwner(obj, enqueue)
			}
		},
		DeleteFunc: func(obj interface{}) { enqueueOwner(obj, enqueue) },
	})
}

// deploymentChanged reports whether a Deployment update changed what the
// reconcile reads: its spec (which moves metadata.generation), labels, owner
// references or deletion. The controller manager updates each new
// Deployment's status several times as its pods start; those updates need
// no reconcile, since the status is computed from the pods.
func deploymentChanged(old, obj interface{}) bool {
	o, ok1 := old.(*appsv1.Deployment)
	n, ok2 := obj.(*appsv1.Deployment)
	if !ok1 || !ok2 {
		return true
	}
	return o.Generation != n.Generation ||
		!reflect.DeepEqual(o.Labels, n.Labels) ||
		!reflect.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
		!reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp)
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
	go c.deployments.Run(stop)
	go c.pods.Run(stop)
	if !cache.WaitForCacheSync(stop, c.deployments.HasSynced, c.pods.HasSynced) {
		return fmt.Errorf("stopped before the Deployment and pod caches were filled")
	}
	return nil
}

// NewMemcachedRESTClient returns a REST client for the Memcached API, from
// cfg, that encodes and decodes the typed v1alpha1 objects as JSON, the
// only encoding custom resources have. It is cheaper than the dynamic
// client, which goes through maps. v1alpha1 must be in client-go's scheme.
func NewMemcachedRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1alpha1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.DirectCodecFactory{CodecFactory: scheme.Codecs}
	return rest.RESTClientFor(cfg)
}

// UpdateMemcachedStatus writes m's status through the status subresource,
// which the SDK's sdk.Update cannot.
func (c *CachedClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error) {
	m = m.DeepCopy()
	m.APIVersion = v1alpha1.APIVersion()
	m.Kind = v1alpha1.Kind
	updated := &v1alpha1.Memcached{}
	err := c.memcacheds.Put().Namespace(m.Namespace).Resource(v1alpha1.Resource).Name(m.Name).SubResource("status").
		Body(m).Do().Into(updated)
	if err != nil {
		return nil, err
	}
	return updated, nil
}

// MemcachedAPIServed asks the API server's discovery for the Memcached API.
func (c *CachedClient) MemcachedAPIServed() error {
	_, err := c.discovery.ServerResourcesForGroupVersion(v1alpha1.APIVersion())
	return err
}

// GetDeployment reads the Deployment cache, then the Deployments this client
// created that the cache has not shown yet. It never asks the API server, so
// it misses Deployments without the app=memcached label: those are not the
// operator's, and CreateDeployment finds them.
func (c *CachedClient) GetDeployment(namespace, name string) (*appsv1.Deployment, error) {
	d, err := appslisters.NewDeploymentLister(c.deployments.GetIndexer()).Deployments(namespace).Get(name)
	if !apierrors.IsNotFound(err) {
		return d, err
	}
	if d, ok := c.created.get(namespace + "/" + name); ok {
		return d, nil
	}
	return nil, err
}

// ReadDeployment reads the Deployment from the API server.
func (c *CachedClient) ReadDeployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.kube.AppsV1().Deployments(namespace).Get(name, metav1.GetOptions{})
}

// CreateDeployment sends manifest as JSON, which keeps fields client-go
// 1.11's types do not know, reads the created Deployment back as protobuf,
// and remembers it, trimmed as the cache's are, until the cache shows it.
func (c *CachedClient) CreateDeployment(manifest *unstructured.Unstructured) (*appsv1.Deployment, error) {
	body, err := manifest.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("failed to encode deployment %s/%s: %v", manifest.GetNamespace(), manifest.GetName(), err)
	}
	d := &appsv1.Deployment{}
	err = c.kube.AppsV1().RESTClient().Post().Namespace(manifest.GetNamespace()).Resource("deployments").
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do().Into(d)
	if err != nil {
		return nil, err
	}
	trimDeployment(d)
	// Add, then look: the cache's handler forgets the key after the cache
	// stores the Deployment, so whichever comes second wins, never a stale
	// entry.
	key := d.Namespace + "/" + d.Name
	c.created.add(key, d)
	if _, cached, _ := c.deployments.GetIndexer().GetByKey(key); cached {
		c.created.forget(key)
	}
	return d, nil
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

// ListPods reads the pod cache through its index of pods by Memcached, so
// that a reconcile costs the same whatever the number of Memcached
// resources and pods in the namespace.
func (c *CachedClient) ListPods(namespace, name string) ([]*corev1.Pod, error) {
	// The cache holds only pods labelled app=memcached, and the index
	// groups them by memcached_cr: together, labelsForMemcached(name).
	objs, err := c.pods.GetIndexer().ByIndex(byMemcachedIndex, namespace+"/"+name)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*corev1.Pod))
	}
	return pods, nil
}

// byMemcachedIndex names the pod cache's index by the namespace/name of the
// Memcached in the pod's memcached_cr label.
const byMemcachedIndex = "memcached"

// indexByMemcached is the index function of byMemcachedIndex.
func indexByMemcached(obj interface{}) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	name := o.GetLabels()[crLabel]
	if name == "" {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + name}, nil
}
