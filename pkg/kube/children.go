package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// children reads one kind of the Memcached's children from a trimmed cache,
// or from the API server for an Optional kind, and writes them through the
// API server.
type children struct {
	kind   *Kind
	client rest.Interface
	// informer is nil for an Optional kind, whose API served checks.
	informer *scoped
	served   *servedCheck

	// created holds the objects this client created that the cache has not
	// shown yet, by namespace/name, so that the reconciles right after a
	// create need no read from the API server. creating holds the names
	// being created, until the create returns or the cache shows an event
	// for the name: an object that the cache saw come, or come and go,
	// before its create returned is not remembered, so that no entry
	// outlives its object.
	mu       sync.Mutex
	created  map[string]createdObject
	creating map[string]bool
	// now is the clock of the created objects' expiry.
	now func() time.Time
}

// createdTTL is how long an object this client created stands in for the
// cache before the cache has shown it. The cache shows an object seconds
// after its create; one it never shows, deleted during a gap of the watch or
// left by a mutating webhook without the app label the cache selects on,
// must not stand for the life of the process. Past it, the next reconcile,
// at the latest the next resync, treats it as a cache miss: its create
// finds the object if it exists, and makes it if it does not.
const createdTTL = time.Minute

// createdObject is an object this client created, and when.
type createdObject struct {
	obj Object
	at  time.Time
}

// listFunc and watchFunc list and watch one kind's objects.
type (
	listFunc  func(metav1.ListOptions) (runtime.Object, error)
	watchFunc func(metav1.ListOptions) (watch.Interface, error)
)

// newChildren returns the children of kind, written through client, and,
// unless kind is Optional, cached, trimmed, by an informer per namespace of
// scope on what listWatch returns for the namespace, given the cache's
// copies (see newTrimmedInformer and scoped).
func newChildren(kind *Kind, client rest.Interface, scope Scope, listWatch func(namespace string, cached cachedFunc) (listFunc, watchFunc)) (*children, error) {
	c := &children{
		kind:     kind,
		client:   client,
		created:  map[string]createdObject{},
		creating: map[string]bool{},
		now:      time.Now,
	}
	if kind.Optional {
		return c, nil
	}
	c.informer = newScoped(scope, func(namespace string) cache.SharedIndexInformer {
		list, watchFn := listWatch(namespace, c.cachedCopy)
		return newTrimmedInformer(kind.New(), list, watchFn, kind.Trim)
	})
	// Once the cache shows an object, in any version, it is the truth.
	seen := func(obj interface{}) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.forget(k)
		}
	}
	c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
		DeleteFunc: seen,
	})
	return c, nil
}

func (c *children) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.created, key)
	delete(c.creating, key)
}

// get reads the cache, then the objects this client created that the cache
// has not shown yet. It never asks the API server, except for an Optional
// kind, which has no cache.
func (c *children) get(namespace, name string) (Object, error) {
	if c.informer == nil {
		return c.read(namespace, name)
	}
	key := namespace + "/" + name
	obj, ok, err := c.informer.getByKey(key)
	if err != nil {
		return nil, err
	}
	if ok {
		return obj.(Object), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.created[key]; ok {
		if c.now().Sub(o.at) < createdTTL {
			return o.obj, nil
		}
		delete(c.created, key)
	}
	return nil, apierrors.NewNotFound(c.kind.Resource.GroupResource(), name)
}

// cachedCopy returns the cache's copy of the object or, until the cache
// shows it, the one this client created (see get), trimmed; nil for an
// Optional kind, and for an object neither holds.
func (c *children) cachedCopy(namespace, name string) Object {
	if c.informer == nil {
		return nil
	}
	key := namespace + "/" + name
	if obj, ok, err := c.informer.getByKey(key); err == nil && ok {
		return obj.(Object)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.created[key]; ok {
		return o.obj
	}
	return nil
}

// read reads the object from the API server.
func (c *children) read(namespace, name string) (Object, error) {
	return c.decode(c.client.Get().Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).Do())
}

// decode returns the object of r: decoded in the client's encoding or, for
// a kind with Observe, from its JSON (see Kind.decodeJSON).
func (c *children) decode(r rest.Result) (Object, error) {
	if c.kind.Observe == nil {
		o := c.kind.New()
		return o, r.Into(o)
	}
	// Raw returns the error without the API server's Status, which Error
	// decodes.
	if err := r.Error(); err != nil {
		return c.kind.New(), err
	}
	body, err := r.Raw()
	if err != nil {
		return c.kind.New(), err
	}
	o, err := c.kind.decodeJSON(body, c.cachedCopy)
	if err != nil {
		return c.kind.New(), err
	}
	return o, nil
}

// create sends manifest as JSON, which keeps fields client-go 1.11's types
// do not know, reads the created object back in the client's encoding, and
// remembers it, trimmed as the cache's are, until the cache shows it;
// unless the cache showed an event for its name while the create was on its
// way, such as the object's creation and then its deletion by the garbage
// collector, its owner having gone meanwhile: the cache then knows as much
// as the client, and a remembered object could outlive the real one.
//
// An Optional kind's create remembers nothing, as no cache would make it
// forget; a NotFound says that its API went since discovery said it was
// served, so the next served asks discovery again.
func (c *children) create(manifest *unstructured.Unstructured) (Object, error) {
	return c.remember(manifest, c.post)
}

// remember sends manifest with send, as create and applyNew do, and
// remembers the object send returns until the cache shows it (see create).
func (c *children) remember(manifest *unstructured.Unstructured, send func(namespace, name string, body []byte) (Object, error)) (Object, error) {
	body, err := manifest.MarshalJSON()
	if err != nil {
		return c.kind.New(), fmt.Errorf("failed to encode %s %s/%s: %v", c.kind, manifest.GetNamespace(), manifest.GetName(), err)
	}
	if c.informer == nil {
		o, err := send(manifest.GetNamespace(), manifest.GetName(), body)
		if apierrors.IsNotFound(err) {
			c.served.expire()
		}
		return o, err
	}
	key := manifest.GetNamespace() + "/" + manifest.GetName()
	c.mu.Lock()
	c.creating[key] = true
	c.mu.Unlock()
	o, err := send(manifest.GetNamespace(), manifest.GetName(), body)
	c.mu.Lock()
	defer c.mu.Unlock()
	unseen := c.creating[key]
	delete(c.creating, key)
	if err != nil {
		return o, err
	}
	if c.kind.Trim != nil {
		c.kind.Trim(o)
	}
	// The cache's handler runs after the cache stores an object, so an
	// object remembered here is forgotten once the cache has it.
	if unseen {
		c.created[key] = createdObject{obj: o, at: c.now()}
	}
	return o, nil
}

// post creates the object of the JSON body in namespace and returns the
// object the API server stored.
func (c *children) post(namespace, _ string, body []byte) (Object, error) {
	return c.decode(c.client.Post().Namespace(namespace).Resource(c.kind.Resource.Resource).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do())
}

// applyPatchType is the content type of a server-side apply; client-go
// 1.11 predates it.
const applyPatchType types.PatchType = "application/apply-patch+yaml"

// applyNew creates the object of manifest by a server-side apply as
// memcached.FieldManager, so that the API server records the fields the
// operator set (see memcached.OwnedDigest), and remembers it as create does.
// An apply also changes an object that exists, so applyNew never forces:
// an object of that name that someone else made has its fields owned by
// its makers, and the API server refuses to change them (a conflict), or
// refuses a second controller reference (invalid); applyNew then returns
// an error that IsAlreadyExists reports, as a create's would, and so it
// does when the apply changed an object that existed, one whose fields
// the operator owns (the API server answers 200, not 201): the caller
// reads it, as after a create that found its object.
func (c *children) applyNew(manifest *unstructured.Unstructured) (Object, error) {
	return c.remember(manifest, func(namespace, name string, body []byte) (Object, error) {
		var code int
		o, err := c.decode(c.client.Patch(applyPatchType).Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).
			Param("fieldManager", memcached.FieldManager).Body(body).Do().StatusCode(&code))
		exists := apierrors.NewAlreadyExists(c.kind.Resource.GroupResource(), name)
		switch {
		case err == nil && code != http.StatusCreated:
			return o, exists
		case apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			if _, rerr := c.read(namespace, name); rerr == nil {
				return o, exists
			}
		}
		return o, err
	})
}

// apply sets what manifest holds on the object of its name while its UID is
// uid, by a server-side apply as memcached.FieldManager that forces, taking
// back the fields that others changed. The UID in the apply is a
// precondition: the API server refuses the apply when the object of that
// name is another one or is gone, and the error then wraps ErrReplaced, as
// patch's does.
func (c *children) apply(manifest *unstructured.Unstructured, uid types.UID) error {
	manifest = manifest.DeepCopy()
	manifest.SetUID(uid)
	body, err := manifest.MarshalJSON()
	if err != nil {
		return fmt.Errorf("failed to encode %s %s/%s: %v", c.kind, manifest.GetNamespace(), manifest.GetName(), err)
	}
	namespace, name := manifest.GetNamespace(), manifest.GetName()
	err = c.client.Patch(applyPatchType).Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).
		Param("fieldManager", memcached.FieldManager).Param("force", "true").Body(body).Do().Error()
	// A UID that is not the object's is invalid (a UID is immutable); one
	// of an object that is gone, a conflict.
	if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		return err
	}
	current, rerr := c.read(namespace, name)
	if apierrors.IsNotFound(rerr) || (rerr == nil && current.GetUID() != uid) {
		return fmt.Errorf("%s %s/%s with UID %s was %w", c.kind, namespace, name, uid, ErrReplaced)
	}
	return err
}

// convertUpdates makes the fields that the operator set on the object by
// creates and patches its apply's (see memcached.ConvertUpdates), while the
// object's UID is uid and it does not change meanwhile: it reads the
// object's managedFields, which no cache keeps, and patches them, testing
// its UID and resourceVersion first. Nothing is patched when there is
// nothing to convert.
func (c *children) convertUpdates(namespace, name string, uid types.UID) error {
	body, err := c.client.Get().Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).Do().Raw()
	if err != nil {
		return err
	}
	live := &unstructured.Unstructured{}
	if err := live.UnmarshalJSON(body); err != nil {
		return fmt.Errorf("failed to decode %s %s/%s: %v", c.kind, namespace, name, err)
	}
	if live.GetUID() != uid {
		return fmt.Errorf("%s %s/%s with UID %s was %w", c.kind, namespace, name, uid, ErrReplaced)
	}
	entries, _, _ := unstructured.NestedSlice(live.Object, "metadata", "managedFields")
	converted, changed := memcached.ConvertUpdates(entries)
	if !changed {
		return nil
	}
	patch, err := json.Marshal([]map[string]interface{}{
		{"op": "test", "path": "/metadata/uid", "value": uid},
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": converted},
	})
	if err != nil {
		return err
	}
	return c.patch(namespace, name, uid, patch)
}

// ErrReplaced reports that a patch was refused because the object of its
// name is no longer the one the patch was built for: someone deleted that
// one, and maybe created another, within the lag of the operator's cache.
var ErrReplaced = errors.New("replaced since the operator's cache showed it")

// ErrChanged reports that a patch was refused because the object changed
// since the operator's cache showed it: the patch set the resourceVersion
// that the cache showed, which the API server takes as a precondition.
// Nothing failed: the caller runs again once the cache shows the change.
var ErrChanged = errors.New("changed since the operator's cache showed it")

// patch sends a JSON patch whose first operation tests that the object's UID is
// uid (see memcached.JSONPatchSet). The API server refuses a failed test as an
// invalid request, as it refuses a patch that breaks validation; only then the
// object is read, to tell the two apart. It refuses a patch that sets a
// resourceVersion other than the object's as a conflict, which no other
// JSON patch meets, since the API server retries those itself: that error
// wraps ErrChanged.
func (c *children) patch(namespace, name string, uid types.UID, patch []byte) error {
	err := c.client.Patch(types.JSONPatchType).Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).Body(patch).Do().Error()
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s %s/%s %w: %v", c.kind, namespace, name, ErrChanged, err)
	}
	if !apierrors.IsInvalid(err) {
		return err
	}
	current, rerr := c.read(namespace, name)
	if apierrors.IsNotFound(rerr) || (rerr == nil && current.GetUID() != uid) {
		return fmt.Errorf("%s %s/%s with UID %s was %w", c.kind, namespace, name, uid, ErrReplaced)
	}
	return err
}

// delete deletes the object only while its UID is uid, so that it never
// deletes an object that replaced the one the caller looked at.
func (c *children) delete(namespace, name string, uid types.UID) error {
	body, err := json.Marshal(&metav1.DeleteOptions{
		TypeMeta:      metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"},
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return err
	}
	return c.client.Delete().Namespace(namespace).Resource(c.kind.Resource.Resource).Name(name).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do().Error()
}
