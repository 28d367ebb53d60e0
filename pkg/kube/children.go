package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Object is a child kind's typed object, as the caches hold it and the
// client returns it, and as the handler's steps take it.
type Object interface {
	metav1.Object
	runtime.Object
}

// children reads one kind of the Memcached's children from a trimmed cache
// and writes them through the API server.
type children[T Object] struct {
	client   rest.Interface
	resource schema.GroupResource
	informer cache.SharedIndexInformer
	newObj   func() T
	trim     func(T)

	// created holds the objects this client created that the cache has not
	// shown yet, by namespace/name, so that the reconciles right after a
	// create need no read from the API server. creating holds the names
	// being created, until the create returns or the cache shows an event
	// for the name: an object that the cache saw come, or come and go,
	// before its create returned is not remembered, so that no entry
	// outlives its object.
	mu       sync.Mutex
	created  map[string]T
	creating map[string]bool
}

// newChildren returns the children of resource, written through client,
// which speaks the resource's group version, and cached, trimmed by trim, by
// an informer on what list and watchFn return (see newTrimmedInformer).
func newChildren[T Object](client rest.Interface, resource schema.GroupResource, list func(metav1.ListOptions) (runtime.Object, error), watchFn func(metav1.ListOptions) (watch.Interface, error), newObj func() T, trim func(T)) *children[T] {
	informer := newTrimmedInformer(newObj(), list, watchFn, trim)
	c := &children[T]{
		client:   client,
		resource: resource,
		informer: informer,
		newObj:   newObj,
		trim:     trim,
		created:  map[string]T{},
		creating: map[string]bool{},
	}
	// Once the cache shows an object, in any version, it is the truth.
	seen := func(obj interface{}) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.forget(k)
		}
	}
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
		DeleteFunc: seen,
	})
	return c
}

func (c *children[T]) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.created, key)
	delete(c.creating, key)
}

// get reads the cache, then the objects this client created that the cache
// has not shown yet. It never asks the API server.
func (c *children[T]) get(namespace, name string) (T, error) {
	key := namespace + "/" + name
	obj, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil {
		var zero T
		return zero, err
	}
	if ok {
		return obj.(T), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.created[key]; ok {
		return o, nil
	}
	var zero T
	return zero, apierrors.NewNotFound(c.resource, name)
}

// read reads the object from the API server.
func (c *children[T]) read(namespace, name string) (T, error) {
	o := c.newObj()
	err := c.client.Get().Namespace(namespace).Resource(c.resource.Resource).Name(name).Do().Into(o)
	return o, err
}

// create sends manifest as JSON, which keeps fields client-go 1.11's types
// do not know, reads the created object back in the client's encoding, and
// remembers it, trimmed as the cache's are, until the cache shows it;
// unless the cache showed an event for its name while the create was on its
// way, such as the object's creation and then its deletion by the garbage
// collector, its owner having gone meanwhile: the cache then knows as much
// as the client, and a remembered object could outlive the real one.
func (c *children[T]) create(manifest *unstructured.Unstructured) (T, error) {
	o := c.newObj()
	body, err := manifest.MarshalJSON()
	if err != nil {
		return o, fmt.Errorf("failed to encode %s %s/%s: %v", c.resource, manifest.GetNamespace(), manifest.GetName(), err)
	}
	key := manifest.GetNamespace() + "/" + manifest.GetName()
	c.mu.Lock()
	c.creating[key] = true
	c.mu.Unlock()
	err = c.client.Post().Namespace(manifest.GetNamespace()).Resource(c.resource.Resource).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do().Into(o)
	c.mu.Lock()
	defer c.mu.Unlock()
	unseen := c.creating[key]
	delete(c.creating, key)
	if err != nil {
		return o, err
	}
	c.trim(o)
	// The cache's handler runs after the cache stores an object, so an
	// object remembered here is forgotten once the cache has it.
	if unseen {
		c.created[key] = o
	}
	return o, nil
}

// ErrReplaced reports that a patch was refused because the object of its
// name is no longer the one the patch was built for: someone deleted that
// one, and maybe created another, within the lag of the operator's cache.
var ErrReplaced = errors.New("replaced since the operator's cache showed it")

// patch sends a JSON patch whose first operation tests that the object's UID is
// uid (see memcached.JSONPatchSet). The API server refuses a failed test as an
// invalid request, as it refuses a patch that breaks validation; only then the
// object is read, to tell the two apart.
func (c *children[T]) patch(namespace, name string, uid types.UID, patch []byte) error {
	err := c.client.Patch(types.JSONPatchType).Namespace(namespace).Resource(c.resource.Resource).Name(name).Body(patch).Do().Error()
	if !apierrors.IsInvalid(err) {
		return err
	}
	current, rerr := c.read(namespace, name)
	if apierrors.IsNotFound(rerr) || (rerr == nil && current.GetUID() != uid) {
		return fmt.Errorf("%s %s/%s with UID %s was %w", c.resource.String(), namespace, name, uid, ErrReplaced)
	}
	return err
}

// delete deletes the object only while its UID is uid, so that it never
// deletes an object that replaced the one the caller looked at.
func (c *children[T]) delete(namespace, name string, uid types.UID) error {
	body, err := json.Marshal(&metav1.DeleteOptions{
		TypeMeta:      metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"},
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return err
	}
	return c.client.Delete().Namespace(namespace).Resource(c.resource.Resource).Name(name).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do().Error()
}

// policyScheme maps policy/v1 PodDisruptionBudgets onto client-go 1.11's
// policy/v1beta1 types, whose JSON holds every field the operator uses
// (selector, minAvailable, maxUnavailable) under the same names.
var policyScheme = newPolicyScheme()

// policyParameterCodec encodes list and watch options for policy/v1.
var policyParameterCodec = runtime.NewParameterCodec(policyScheme)

func newPolicyScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(memcached.PolicyV1, &policyv1beta1.PodDisruptionBudget{}, &policyv1beta1.PodDisruptionBudgetList{})
	metav1.AddToGroupVersion(s, memcached.PolicyV1)
	return s
}

// newPodDisruptionBudgetRESTClient returns a JSON REST client, from cfg,
// for policy/v1 PodDisruptionBudgets as client-go 1.11's policy/v1beta1
// types.
func newPodDisruptionBudgetRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	return jsonRESTClient(cfg, memcached.PolicyV1, policyScheme)
}

// jsonRESTClient returns a REST client, from cfg, that speaks JSON to the
// API group version gv and decodes with scheme.
func jsonRESTClient(cfg *rest.Config, gv schema.GroupVersion, scheme *runtime.Scheme) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.DirectCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	return rest.RESTClientFor(cfg)
}

// monitoringScheme decodes the API server's errors for the ServiceMonitor
// API; the objects themselves travel as unstructured JSON.
var monitoringScheme = newMonitoringScheme()

func newMonitoringScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, memcached.ServiceMonitorGVR.GroupVersion())
	return s
}

// newServiceMonitorRESTClient returns a JSON REST client, from cfg, for the
// Prometheus Operator's monitoring.coreos.com/v1 ServiceMonitors, which
// client-go 1.11 has no type for. Its requests carry their Content-Type,
// which the API server requires and client-go 1.11's dynamic client leaves
// out of creates and deletes.
func newServiceMonitorRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	return jsonRESTClient(cfg, memcached.ServiceMonitorGVR.GroupVersion(), monitoringScheme)
}
