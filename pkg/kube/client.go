package kube

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// CachedClient is the Client the operator runs with. It reads from informer
// caches of the namespaces of its Scope, so a reconcile costs no API request
// unless it writes, and it writes through the API server. Its informers also tell the
// handler when a child or a pod of a Memcached changes.
//
// It serves any kind of child that a Kind describes, by the same five
// calls (Get, Read, Create, Patch, Delete), so a new kind of child needs no
// code here.
//
// Writes that would lose data through client-go 1.11's typed structs go as
// JSON built from the manifest, or as a patch: a PUT of a 1.11 Deployment
// would drop every pod field added since 1.11 and so restart all memcached
// pods.
type CachedClient struct {
	memcacheds rest.Interface
	discovery  discovery.ServerResourcesInterface
	// kinds holds the children of each Kind given to NewCachedClient, by
	// resource, in that order.
	kinds map[schema.GroupVersionResource]*children
	order []*children
	pods  *scoped
	// mountEvents caches the kubelet's FailedMount Events on pods (see
	// MountFailure).
	mountEvents *scoped
}

// Clients are the API clients of a CachedClient. The reconcile's requests
// go through Kube, Memcacheds, Discovery and the children's clients that
// NewCachedClient builds from the same configuration, which should each
// have a request timeout, so that a request that the API server or the
// network leaves unanswered fails and is retried instead of holding a
// worker. The caches list and watch through CacheKube and children's
// clients built from the caches' configuration, the same APIs without a
// timeout: client-go 1.11 applies a client's timeout to watches too, and
// would cut every watch, and so relist every cache, that often.
type Clients struct {
	// Kube and CacheKube may speak protobuf.
	Kube, CacheKube kubernetes.Interface
	// Memcacheds speaks JSON to the Memcached API, as NewClients builds it.
	Memcacheds rest.Interface
	Discovery  discovery.ServerResourcesInterface
	// config and cacheConfig are Kube's and CacheKube's: the children of
	// built-in kinds share their rate limiters, as the groups of one
	// clientset do.
	config, cacheConfig *rest.Config
}

// NewCachedClient returns a CachedClient for the namespaces of scope that
// serves the children of kinds. Its caches hold only objects labelled
// app=memcached; Start fills them. Each kind has one informer on every
// namespace for AllNamespaces, one per namespace for a list (see scoped).
func NewCachedClient(clients Clients, scope Scope, kinds ...*Kind) (*CachedClient, error) {
	if clients.config == nil || clients.cacheConfig == nil {
		return nil, fmt.Errorf("the clients were not built by NewClients")
	}
	c := &CachedClient{
		memcacheds: clients.Memcacheds,
		discovery:  clients.Discovery,
		kinds:      map[schema.GroupVersionResource]*children{},
		pods: newScoped(scope, func(namespace string) cache.SharedIndexInformer {
			return newPodInformer(clients.CacheKube, namespace, memcached.ManagedSelector)
		}),
		mountEvents: newScoped(scope, func(namespace string) cache.SharedIndexInformer {
			return newMountEventInformer(clients.CacheKube, namespace)
		}),
	}
	s := jsonScheme(kinds)
	for _, k := range kinds {
		client, _, err := kindREST(clients.config, k, s)
		if err != nil {
			return nil, err
		}
		var listWatch func(namespace string, cached cachedFunc) (listFunc, watchFunc)
		if !k.Optional {
			lister, codec, err := kindREST(clients.cacheConfig, k, s)
			if err != nil {
				return nil, err
			}
			listWatch = func(namespace string, cached cachedFunc) (listFunc, watchFunc) {
				if k.speaksJSON() {
					return jsonListWatch(lister, codec, k, namespace, cached)
				}
				list := func(o metav1.ListOptions) (runtime.Object, error) {
					l := k.NewList()
					err := lister.Get().NamespaceIfScoped(namespace, namespace != "").Resource(k.Resource.Resource).VersionedParams(&o, codec).Do().Into(l)
					return l, err
				}
				watchFn := func(o metav1.ListOptions) (watch.Interface, error) {
					o.Watch = true
					return lister.Get().NamespaceIfScoped(namespace, namespace != "").Resource(k.Resource.Resource).VersionedParams(&o, codec).Watch()
				}
				return list, watchFn
			}
		}
		ch, err := newChildren(k, client, scope, listWatch)
		if err != nil {
			return nil, err
		}
		if k.Optional {
			ch.served = newServedCheck(clients.Discovery, k.Resource, DefaultServiceMonitorCheckInterval)
		}
		c.kinds[k.Resource] = ch
		c.order = append(c.order, ch)
	}
	return c, nil
}

// OnChildChange makes the caches call enqueue with the namespace and
// Memcached name (the memcached_cr label) of every child or pod that is
// added, changed or deleted, but for the updates that a kind's Changed
// leaves out, such as those of a PodDisruptionBudget that change only its
// status (see SpecChanged), and updates of a pod that change nothing the
// trimmed pod keeps (see podChanged), and of every pod whose FailedMount
// Event is added, updated or deleted (see enqueuePodOwner). It must be
// called before Start.
func (c *CachedClient) OnChildChange(enqueue func(namespace, name string)) {
	every := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueueOwner(obj, enqueue) },
		UpdateFunc: func(_, obj interface{}) { enqueueOwner(obj, enqueue) },
		DeleteFunc: func(obj interface{}) { enqueueOwner(obj, enqueue) },
	}
	onlyIf := func(changed func(old, obj interface{}) bool) cache.ResourceEventHandlerFuncs {
		h := every
		h.UpdateFunc = func(old, obj interface{}) {
			if changed(old, obj) {
				enqueueOwner(obj, enqueue)
			}
		}
		return h
	}
	c.pods.AddEventHandler(onlyIf(podChanged))
	c.mountEvents.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueuePodOwner(obj, enqueue) },
		UpdateFunc: func(_, obj interface{}) { c.enqueuePodOwner(obj, enqueue) },
		DeleteFunc: func(obj interface{}) { c.enqueuePodOwner(obj, enqueue) },
	})
	for _, ch := range c.order {
		switch {
		case ch.informer == nil:
		case ch.kind.Changed != nil:
			ch.informer.AddEventHandler(onlyIf(ch.kind.Changed))
		default:
			ch.informer.AddEventHandler(every)
		}
	}
}

// podChanged reports whether an update of a cached pod changed anything
// that trimPod keeps, besides its resourceVersion and its IP. The
// scheduler's binding and the kubelet's updates of start times, IPs,
// images and conditions other than Ready change nothing the status is
// computed from, and need no reconcile; the IP is kept for the poll of the
// pod's sidecar, which reads it from the cache when it asks.
func podChanged(old, obj interface{}) bool {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	before := *o // a shallow copy: the cached pod stays as it is
	before.ResourceVersion = n.ResourceVersion
	before.Status.PodIP = n.Status.PodIP
	return !equality.Semantic.DeepEqual(&before, n)
}

// SpecChanged reports whether an update changed what the reconcile reads:
// the spec (which moves metadata.generation), labels, owner references or
// deletion. The controller manager updates a new Deployment's status
// several times as its pods start, and a PodDisruptionBudget's whenever a
// pod's readiness changes; those updates need no reconcile, since the
// Memcached's status is computed from the pods.
func SpecChanged(old, obj interface{}) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() ||
		!reflect.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!reflect.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!reflect.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp())
}

// deploymentChanged reports whether an update of a cached Deployment changed
// what the reconcile reads: what SpecChanged compares, the digest of what
// the operator applied (an edit of labels changes it with no new
// generation), the findings of a loosened pod template, how far its
// controller has rolled it (whether memcached.RolloutComplete holds, which
// ends a paced roll), or the conditions that trimDeployment keeps, such as a
// ReplicaFailure that the ReplicaSet controller sets when a quota refuses
// the pods, or clears.
func deploymentChanged(old, obj interface{}) bool {
	o, ok1 := old.(*appsv1.Deployment)
	n, ok2 := obj.(*appsv1.Deployment)
	if !ok1 || !ok2 {
		return true
	}
	return SpecChanged(o, n) ||
		o.Annotations[memcached.ObservedDigestAnnotation] != n.Annotations[memcached.ObservedDigestAnnotation] ||
		o.Annotations[memcached.LoosenedAnnotation] != n.Annotations[memcached.LoosenedAnnotation] ||
		memcached.RolloutComplete(o) != memcached.RolloutComplete(n) ||
		!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
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
	if name := child.GetLabels()[memcached.CRLabel]; name != "" {
		enqueue(child.GetNamespace(), name)
	}
}

// Start runs the informers until stop is closed and waits for their caches
// to be filled, failing if stop closes first.
func (c *CachedClient) Start(stop <-chan struct{}) error {
	informers := []*scoped{c.pods, c.mountEvents}
	names := []string{"pods", "events"}
	for _, ch := range c.order {
		if ch.informer != nil {
			informers = append(informers, ch.informer)
			names = append(names, ch.kind.String())
		}
	}
	var synced []cache.InformerSynced
	for _, i := range informers {
		synced = append(synced, i.run(stop)...)
	}
	if !cache.WaitForCacheSync(stop, synced...) {
		return fmt.Errorf("stopped before the caches of %s were filled", strings.Join(names, ", "))
	}
	return nil
}

// newMemcachedRESTClient returns a REST client for the Memcached API, from
// cfg, that encodes and decodes the typed v1alpha1 objects as JSON, the
// only encoding custom resources have. It is cheaper than the dynamic
// client, which goes through maps. v1alpha1 must be in client-go's scheme.
func newMemcachedRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
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

// children returns the children of k, which must be one of the kinds given
// to NewCachedClient.
func (c *CachedClient) children(k *Kind) (*children, error) {
	ch, ok := c.kinds[k.Resource]
	if !ok {
		return nil, fmt.Errorf("the client serves no %s", k)
	}
	return ch, nil
}

// Get reads the cache of k, then the objects of k this client created that
// the cache has not shown yet. It never asks the API server, but for an
// Optional k, so it misses the objects without the app=memcached label:
// those are not the operator's, and Create finds them. The caller must not
// modify what it returns.
func (c *CachedClient) Get(k *Kind, namespace, name string) (Object, error) {
	ch, err := c.children(k)
	if err != nil {
		return nil, err
	}
	return ch.get(namespace, name)
}

// Read reads the object of k from the API server.
func (c *CachedClient) Read(k *Kind, namespace, name string) (Object, error) {
	ch, err := c.children(k)
	if err != nil {
		return nil, err
	}
	return ch.read(namespace, name)
}

// Create creates the object of k that manifest holds and returns it as the
// API server stored it, trimmed as the cache's are (see children.create).
func (c *CachedClient) Create(k *Kind, manifest *unstructured.Unstructured) (Object, error) {
	ch, err := c.children(k)
	if err != nil {
		return nil, err
	}
	return ch.create(manifest)
}

// Patch applies a JSON patch that tests uid to the object of k (see
// children.patch).
func (c *CachedClient) Patch(k *Kind, namespace, name string, uid types.UID, patch []byte) error {
	ch, err := c.children(k)
	if err != nil {
		return err
	}
	return ch.patch(namespace, name, uid, patch)
}

// ApplyNew creates the object of k that manifest holds by a server-side
// apply that never changes another owner's object, failing as Create does
// when an object of its name exists (see children.applyNew), and returns it
// as the API server stored it, trimmed as the cache's are.
func (c *CachedClient) ApplyNew(k *Kind, manifest *unstructured.Unstructured) (Object, error) {
	ch, err := c.children(k)
	if err != nil {
		return nil, err
	}
	return ch.applyNew(manifest)
}

// Apply sets what manifest holds on the object of k of its name while its
// UID is uid, by a server-side apply (see children.apply).
func (c *CachedClient) Apply(k *Kind, manifest *unstructured.Unstructured, uid types.UID) error {
	ch, err := c.children(k)
	if err != nil {
		return err
	}
	return ch.apply(manifest, uid)
}

// ConvertUpdates makes the fields that the operator set on the object of k
// by creates and patches, as versions before server-side apply did, its
// apply's, so that its next Apply removes those it no longer sets (see
// memcached.ConvertUpdates); it does nothing to an object the operator
// applied. It costs a read, and a patch when there is something to convert.
func (c *CachedClient) ConvertUpdates(k *Kind, namespace, name string, uid types.UID) error {
	ch, err := c.children(k)
	if err != nil {
		return err
	}
	return ch.convertUpdates(namespace, name, uid)
}

// Delete deletes the object of k while its UID is uid.
func (c *CachedClient) Delete(k *Kind, namespace, name string, uid types.UID) error {
	ch, err := c.children(k)
	if err != nil {
		return err
	}
	return ch.delete(namespace, name, uid)
}

// Served reports whether the API server serves k: always for a kind that
// is not Optional, else as discovery said at most an interval ago (see
// CheckServedEvery).
func (c *CachedClient) Served(k *Kind) bool {
	ch, err := c.children(k)
	if err != nil {
		return false
	}
	return ch.served == nil || ch.served.served()
}

// CheckServedEvery sets how long the client trusts discovery's answer on
// whether an Optional kind is served, instead of
// DefaultServiceMonitorCheckInterval (--servicemonitor-check-interval). Call
// it before the first reconcile.
func (c *CachedClient) CheckServedEvery(interval time.Duration) {
	for _, ch := range c.order {
		if ch.served != nil {
			ch.served.interval = interval
		}
	}
}

// ListDeployments reads the Deployment cache, which is filled before the
// handler runs: unlike the Memcacheds the SDK delivers one by one, it holds
// every Deployment from the first reconcile on.
func (c *CachedClient) ListDeployments() ([]*appsv1.Deployment, error) {
	ch, err := c.children(DeploymentKind)
	if err != nil {
		return nil, err
	}
	objs := ch.informer.list()
	out := make([]*appsv1.Deployment, 0, len(objs))
	for _, obj := range objs {
		if d, ok := obj.(*appsv1.Deployment); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// ScaleDeployment patches spec.replicas alone, leaving every other field,
// including the pod template, as the API server has it.
func (c *CachedClient) ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error {
	patch, err := memcached.JSONPatchSet(uid, map[string]interface{}{"/spec/replicas": replicas})
	if err != nil {
		return err
	}
	return c.Patch(DeploymentKind, namespace, name, uid, patch)
}

// ListPods reads the pod cache through its index of pods by Memcached, so
// that a reconcile costs the same whatever the number of Memcached
// resources and pods in the namespace.
func (c *CachedClient) ListPods(namespace, name string) ([]*corev1.Pod, error) {
	// The cache holds only pods labelled app=memcached, and the index
	// groups them by memcached_cr: together, memcached.Labels(name).
	objs, err := c.pods.byIndex(byMemcachedIndex, namespace+"/"+name)
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
	name := o.GetLabels()[memcached.CRLabel]
	if name == "" {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + name}, nil
}

// NewClients returns the reconcile's clients from cfg, and its caches' from
// cacheCfg (see Clients). Built-in types travel as protobuf, which
// costs the operator and the API server far less CPU than JSON; the
// Memcached and discovery clients, and the children's of the kinds
// client-go 1.11 does not know (see Kind), speak JSON.
func NewClients(cfg, cacheCfg *rest.Config) (Clients, error) {
	var c Clients
	var err error
	if c.Memcacheds, err = newMemcachedRESTClient(cfg); err != nil {
		return c, fmt.Errorf("failed to create the Memcached client: %v", err)
	}
	if c.Discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return c, fmt.Errorf("failed to create discovery client: %v", err)
	}
	protobuf := func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		if cfg.RateLimiter == nil && cfg.QPS > 0 {
			// The limiter kubernetes.NewForConfig would make, made here to
			// be shared with the children's clients.
			cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
		}
		return cfg
	}
	c.config, c.cacheConfig = protobuf(cfg), protobuf(cacheCfg)
	if c.Kube, err = kubernetes.NewForConfig(c.config); err != nil {
		return c, fmt.Errorf("failed to create kubernetes client: %v", err)
	}
	if c.CacheKube, err = kubernetes.NewForConfig(c.cacheConfig); err != nil {
		return c, fmt.Errorf("failed to create kubernetes client: %v", err)
	}
	return c, nil
}
