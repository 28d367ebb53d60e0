package kube

import (
	"fmt"
	"reflect"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// CachedClient is the Client the operator runs with. It reads from informer
// caches of one namespace, so a reconcile costs no API request unless it
// writes, and it writes through the API server. Its informers also tell the
// handler when a child or a pod of a Memcached changes.
//
// Writes that would lose data through client-go 1.11's typed structs go as
// JSON built from the manifest, or as a patch: a PUT of a 1.11 Deployment
// would drop every pod field added since 1.11 and so restart all memcached
// pods.
type CachedClient struct {
	memcacheds  rest.Interface
	discovery   discovery.ServerResourcesInterface
	deployments *children[*appsv1.Deployment]
	services    *children[*corev1.Service]
	pdbs        *children[*policyv1beta1.PodDisruptionBudget]
	pods        cache.SharedIndexInformer
	// serviceMonitors is the ServiceMonitor API, used only while
	// serviceMonitorsAPI says it is served. It has no informer, so only
	// its read, patch and delete are used; CreateServiceMonitor posts
	// itself.
	serviceMonitors    *children[*unstructured.Unstructured]
	serviceMonitorsAPI *servedCheck
}

// Clients are the API clients of a CachedClient. The reconcile's requests
// go through Kube, Memcacheds, PodDisruptionBudgets and Discovery, which
// should each have a request timeout, so that a request that the API server
// or the network leaves unanswered fails and is retried instead of holding a
// worker. The caches list and watch through CacheKube and
// CachePodDisruptionBudgets, the same APIs without a timeout: client-go
// 1.11 applies a client's timeout to watches too, and would cut every watch,
// and so relist every cache, that often.
type Clients struct {
	// Kube and CacheKube may speak protobuf.
	Kube, CacheKube kubernetes.Interface
	// Memcacheds speaks JSON to the Memcached API, as NewClients builds it.
	Memcacheds rest.Interface
	// PodDisruptionBudgets and CachePodDisruptionBudgets speak policy/v1
	// JSON, as NewClients builds them.
	PodDisruptionBudgets, CachePodDisruptionBudgets rest.Interface
	Discovery                                       discovery.ServerResourcesInterface
	// ServiceMonitors speaks monitoring.coreos.com/v1 JSON, as NewClients
	// builds it.
	ServiceMonitors rest.Interface
}

// NewCachedClient returns a CachedClient for namespace. Its caches hold only
// objects labelled app=memcached; Start fills them.
func NewCachedClient(clients Clients, namespace string) *CachedClient {
	kube, pdbs := clients.CacheKube, clients.CachePodDisruptionBudgets
	deployments := kube.AppsV1().Deployments(namespace)
	services := kube.CoreV1().Services(namespace)
	pdbList := func(o metav1.ListOptions) (runtime.Object, error) {
		l := &policyv1beta1.PodDisruptionBudgetList{}
		err := pdbs.Get().Namespace(namespace).Resource(memcached.PodDisruptionBudgetResource.Resource).
			VersionedParams(&o, policyParameterCodec).Do().Into(l)
		return l, err
	}
	pdbWatch := func(o metav1.ListOptions) (watch.Interface, error) {
		o.Watch = true
		return pdbs.Get().Namespace(namespace).Resource(memcached.PodDisruptionBudgetResource.Resource).
			VersionedParams(&o, policyParameterCodec).Watch()
	}
	return &CachedClient{
		memcacheds: clients.Memcacheds,
		discovery:  clients.Discovery,
		deployments: newChildren(clients.Kube.AppsV1().RESTClient(), memcached.DeploymentResource,
			func(o metav1.ListOptions) (runtime.Object, error) { return deployments.List(o) }, deployments.Watch,
			func() *appsv1.Deployment { return &appsv1.Deployment{} }, trimDeployment),
		services: newChildren(clients.Kube.CoreV1().RESTClient(), memcached.ServiceResource,
			func(o metav1.ListOptions) (runtime.Object, error) { return services.List(o) }, services.Watch,
			func() *corev1.Service { return &corev1.Service{} }, trimService),
		pdbs: newChildren(clients.PodDisruptionBudgets, memcached.PodDisruptionBudgetResource, pdbList, pdbWatch,
			func() *policyv1beta1.PodDisruptionBudget { return &policyv1beta1.PodDisruptionBudget{} }, trimPodDisruptionBudget),
		pods: newPodInformer(kube, namespace, memcached.ManagedSelector),
		serviceMonitors: &children[*unstructured.Unstructured]{
			client: clients.ServiceMonitors, resource: memcached.ServiceMonitorGVR.GroupResource(),
			newObj: func() *unstructured.Unstructured { return &unstructured.Unstructured{} },
		},
		serviceMonitorsAPI: newServedCheck(clients.Discovery, memcached.ServiceMonitorGVR, DefaultServiceMonitorCheckInterval),
	}
}

// OnChildChange makes the caches call enqueue with the namespace and
// Memcached name (the memcached_cr label) of every child or pod that is
// added, changed or deleted. Updates of a PodDisruptionBudget that change
// only its status are left out (see specChanged), and so are updates of a
// Deployment that change neither its spec nor the conditions that say its
// rollout is stuck (see deploymentChanged), and updates of a pod that change
// nothing the trimmed pod keeps (see podChanged). It must be called before
// Start.
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
	c.services.informer.AddEventHandler(every)
	c.deployments.informer.AddEventHandler(onlyIf(deploymentChanged))
	c.pdbs.informer.AddEventHandler(onlyIf(specChanged))
}

// podChanged reports whether an update of a cached pod changed anything
// that trimPod keeps, besides its resourceVersion. The scheduler's binding
// and the kubelet's updates of start times, images and conditions other
// than Ready change nothing the status is computed from, and need no
// reconcile.
func podChanged(old, obj interface{}) bool {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	before := *o // a shallow copy: the cached pod stays as it is
	before.ResourceVersion = n.ResourceVersion
	return !equality.Semantic.DeepEqual(&before, n)
}

// specChanged reports whether an update changed what the reconcile reads:
// the spec (which moves metadata.generation), labels, owner references or
// deletion. The controller manager updates a new Deployment's status
// several times as its pods start, and a PodDisruptionBudget's whenever a
// pod's readiness changes; those updates need no reconcile, since the
// Memcached's status is computed from the pods.
func specChanged(old, obj interface{}) bool {
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
// what the reconcile reads: what specChanged compares, or the conditions
// that trimDeployment keeps, such as a ReplicaFailure that the ReplicaSet
// controller sets when a quota refuses the pods, or clears.
func deploymentChanged(old, obj interface{}) bool {
	o, ok1 := old.(*appsv1.Deployment)
	n, ok2 := obj.(*appsv1.Deployment)
	if !ok1 || !ok2 {
		return true
	}
	return specChanged(o, n) || !equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
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
	informers := []cache.SharedIndexInformer{c.deployments.informer, c.services.informer, c.pdbs.informer, c.pods}
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, i := range informers {
		go i.Run(stop)
		synced = append(synced, i.HasSynced)
	}
	if !cache.WaitForCacheSync(stop, synced...) {
		return fmt.Errorf("stopped before the Deployment, Service, PodDisruptionBudget and pod caches were filled")
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

// GetDeployment reads the Deployment cache, then the Deployments this
// client created that the cache has not shown yet. It never asks the API
// server, so it misses Deployments without the app=memcached label: those
// are not the operator's, and CreateDeployment finds them.
func (c *CachedClient) GetDeployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.deployments.get(namespace, name)
}

// ListDeployments reads the Deployment cache, which is filled before the
// handler runs: unlike the Memcacheds the SDK delivers one by one, it holds
// every Deployment from the first reconcile on.
func (c *CachedClient) ListDeployments() ([]*appsv1.Deployment, error) {
	objs := c.deployments.informer.GetIndexer().List()
	out := make([]*appsv1.Deployment, 0, len(objs))
	for _, obj := range objs {
		if d, ok := obj.(*appsv1.Deployment); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// ReadDeployment reads the Deployment from the API server.
func (c *CachedClient) ReadDeployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.deployments.read(namespace, name)
}

// CreateDeployment creates the Deployment of manifest (see children.create).
func (c *CachedClient) CreateDeployment(manifest *unstructured.Unstructured) (*appsv1.Deployment, error) {
	return c.deployments.create(manifest)
}

// PatchDeployment applies a JSON patch that tests uid to the Deployment.
func (c *CachedClient) PatchDeployment(namespace, name string, uid types.UID, patch []byte) error {
	return c.deployments.patch(namespace, name, uid, patch)
}

// ScaleDeployment patches spec.replicas alone, leaving every other field,
// including the pod template, as the API server has it.
func (c *CachedClient) ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error {
	patch, err := memcached.JSONPatchSet(uid, map[string]interface{}{"/spec/replicas": replicas})
	if err != nil {
		return err
	}
	return c.deployments.patch(namespace, name, uid, patch)
}

// GetService reads the Service cache, like GetDeployment.
func (c *CachedClient) GetService(namespace, name string) (*corev1.Service, error) {
	return c.services.get(namespace, name)
}

// ReadService reads the Service from the API server.
func (c *CachedClient) ReadService(namespace, name string) (*corev1.Service, error) {
	return c.services.read(namespace, name)
}

// CreateService creates the Service of manifest (see children.create).
func (c *CachedClient) CreateService(manifest *unstructured.Unstructured) (*corev1.Service, error) {
	return c.services.create(manifest)
}

// PatchService applies a JSON patch that tests uid to the Service.
func (c *CachedClient) PatchService(namespace, name string, uid types.UID, patch []byte) error {
	return c.services.patch(namespace, name, uid, patch)
}

// DeleteService deletes the Service while its UID is uid.
func (c *CachedClient) DeleteService(namespace, name string, uid types.UID) error {
	return c.services.delete(namespace, name, uid)
}

// GetPodDisruptionBudget reads the PodDisruptionBudget cache, like GetDeployment.
func (c *CachedClient) GetPodDisruptionBudget(namespace, name string) (*policyv1beta1.PodDisruptionBudget, error) {
	return c.pdbs.get(namespace, name)
}

// ReadPodDisruptionBudget reads the PodDisruptionBudget from the API server.
func (c *CachedClient) ReadPodDisruptionBudget(namespace, name string) (*policyv1beta1.PodDisruptionBudget, error) {
	return c.pdbs.read(namespace, name)
}

// CreatePodDisruptionBudget creates the PodDisruptionBudget of manifest (see children.create).
func (c *CachedClient) CreatePodDisruptionBudget(manifest *unstructured.Unstructured) (*policyv1beta1.PodDisruptionBudget, error) {
	return c.pdbs.create(manifest)
}

// PatchPodDisruptionBudget applies a JSON patch that tests uid to the PodDisruptionBudget.
func (c *CachedClient) PatchPodDisruptionBudget(namespace, name string, uid types.UID, patch []byte) error {
	return c.pdbs.patch(namespace, name, uid, patch)
}

// DeletePodDisruptionBudget deletes the PodDisruptionBudget while its UID is uid.
func (c *CachedClient) DeletePodDisruptionBudget(namespace, name string, uid types.UID) error {
	return c.pdbs.delete(namespace, name, uid)
}

// ServiceMonitorsServed asks discovery, at most once per check interval
// (see CheckServiceMonitorsEvery), whether ServiceMonitors are served.
func (c *CachedClient) ServiceMonitorsServed() bool {
	return c.serviceMonitorsAPI.served()
}

// CheckServiceMonitorsEvery sets how long the client trusts discovery's
// answer on whether ServiceMonitors are served, instead of
// DefaultServiceMonitorCheckInterval (--servicemonitor-check-interval). Call
// it before the first reconcile.
func (c *CachedClient) CheckServiceMonitorsEvery(interval time.Duration) {
	c.serviceMonitorsAPI.interval = interval
}

// ReadServiceMonitor reads the ServiceMonitor from the API server.
func (c *CachedClient) ReadServiceMonitor(namespace, name string) (*unstructured.Unstructured, error) {
	return c.serviceMonitors.read(namespace, name)
}

// CreateServiceMonitor creates the ServiceMonitor of manifest. Unlike
// children.create it remembers nothing: no cache would make it forget. A
// NotFound says that the API went since discovery said it was served, so
// the next ServiceMonitorsServed asks discovery again.
func (c *CachedClient) CreateServiceMonitor(manifest *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	body, err := manifest.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("failed to encode servicemonitor %s/%s: %v", manifest.GetNamespace(), manifest.GetName(), err)
	}
	created := &unstructured.Unstructured{}
	err = c.serviceMonitors.client.Post().Namespace(manifest.GetNamespace()).Resource(memcached.ServiceMonitorGVR.Resource).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do().Into(created)
	if apierrors.IsNotFound(err) {
		c.serviceMonitorsAPI.expire()
	}
	return created, err
}

// PatchServiceMonitor applies a JSON patch that tests uid to the ServiceMonitor.
func (c *CachedClient) PatchServiceMonitor(namespace, name string, uid types.UID, patch []byte) error {
	return c.serviceMonitors.patch(namespace, name, uid, patch)
}

// DeleteServiceMonitor deletes the ServiceMonitor while its UID is uid.
func (c *CachedClient) DeleteServiceMonitor(namespace, name string, uid types.UID) error {
	return c.serviceMonitors.delete(namespace, name, uid)
}

// ListPods reads the pod cache through its index of pods by Memcached, so
// that a reconcile costs the same whatever the number of Memcached
// resources and pods in the namespace.
func (c *CachedClient) ListPods(namespace, name string) ([]*corev1.Pod, error) {
	// The cache holds only pods labelled app=memcached, and the index
	// groups them by memcached_cr: together, memcached.Labels(name).
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
	name := o.GetLabels()[memcached.CRLabel]
	if name == "" {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + name}, nil
}

// NewClients returns the reconcile's clients from cfg, and its caches' from
// cacheCfg (see Clients). Built-in types travel as protobuf, which
// costs the operator and the API server far less CPU than JSON; the
// Memcached, PodDisruptionBudget, ServiceMonitor and discovery clients
// speak JSON.
func NewClients(cfg, cacheCfg *rest.Config) (Clients, error) {
	var c Clients
	var err error
	if c.Memcacheds, err = newMemcachedRESTClient(cfg); err != nil {
		return c, fmt.Errorf("failed to create the Memcached client: %v", err)
	}
	if c.PodDisruptionBudgets, err = newPodDisruptionBudgetRESTClient(cfg); err != nil {
		return c, fmt.Errorf("failed to create the PodDisruptionBudget client: %v", err)
	}
	if c.CachePodDisruptionBudgets, err = newPodDisruptionBudgetRESTClient(cacheCfg); err != nil {
		return c, fmt.Errorf("failed to create the PodDisruptionBudget client: %v", err)
	}
	if c.Discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return c, fmt.Errorf("failed to create discovery client: %v", err)
	}
	if c.ServiceMonitors, err = newServiceMonitorRESTClient(cfg); err != nil {
		return c, fmt.Errorf("failed to create the ServiceMonitor client: %v", err)
	}
	protobuf := func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		return cfg
	}
	if c.Kube, err = kubernetes.NewForConfig(protobuf(cfg)); err != nil {
		return c, fmt.Errorf("failed to create kubernetes client: %v", err)
	}
	if c.CacheKube, err = kubernetes.NewForConfig(protobuf(cacheCfg)); err != nil {
		return c, fmt.Errorf("failed to create kubernetes client: %v", err)
	}
	return c, nil
}
