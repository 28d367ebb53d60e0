package stub

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakeClient is an in-memory Client that records every call as an action.
// client-go 1.11's dynamic fake cannot stand in: NewSimpleDynamicClient
// leaves its scheme nil and panics on the first successful call.
type fakeClient struct {
	memcacheds  map[string]*v1alpha1.Memcached
	deployments map[string]*appsv1.Deployment
	// listedDeployments counts the Deployments that ListDeployments returned.
	listedDeployments int
	services          map[string]*corev1.Service
	pdbs              map[string]*policyv1beta1.PodDisruptionBudget
	configMaps        map[string]*corev1.ConfigMap
	// networkPolicies are returned as the cache of a kind with Observe
	// returns them: with the digest of their spec, and trimmed.
	networkPolicies map[string]*networkingv1.NetworkPolicy
	pods            []*corev1.Pod
	// mountFailures are the messages of the pods' newest FailedMount
	// Events, by pod UID, as the cache of Events shows them.
	mountFailures map[types.UID]string
	// serviceMonitors and prometheusRules are served only with
	// monitoringServed, as the Prometheus Operator installs their CRDs
	// together.
	serviceMonitors  map[string]*unstructured.Unstructured
	prometheusRules  map[string]*unstructured.Unstructured
	monitoringServed bool
	// uncached hides Deployments, Services and PodDisruptionBudgets, by
	// kind and namespace/name ("service test/example"), from the Get calls:
	// the operator's cache leaves out those without its app label.
	uncached map[string]bool
	// cachedUID makes the Get calls of an object, by kind and
	// namespace/name, show this UID instead of the stored one: the cache
	// still shows an object that has since been replaced.
	cachedUID map[string]types.UID
	// cached makes the Get calls of an object, by kind and namespace/name,
	// return this one instead of the stored one: the cache has not seen
	// the latest writes.
	cached map[string]kube.Object
	// stores holds the stores above, and any a test adds, by resource.
	stores map[schema.GroupResource]fakeStore
	// failOn makes the call whose action starts with the key fail with the value.
	failOn map[string]error

	actions []string
	// created holds the manifests of every create, of any kind, in order.
	created []*unstructured.Unstructured
	// patches holds the body of every patch, by its action.
	patches map[string]string
	// applied holds the manifest of every apply, by its action.
	applied  map[string]*unstructured.Unstructured
	statuses []v1alpha1.MemcachedStatus
}

func newFakeClient(objects ...runtime.Object) *fakeClient {
	f := &fakeClient{
		memcacheds:      map[string]*v1alpha1.Memcached{},
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		pdbs:            map[string]*policyv1beta1.PodDisruptionBudget{},
		configMaps:      map[string]*corev1.ConfigMap{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		serviceMonitors: map[string]*unstructured.Unstructured{},
		prometheusRules: map[string]*unstructured.Unstructured{},
		patches:         map[string]string{},
		applied:         map[string]*unstructured.Unstructured{},
		failOn:          map[string]error{},
		uncached:        map[string]bool{},
		cachedUID:       map[string]types.UID{},
		cached:          map[string]kube.Object{},
	}
	f.stores = map[schema.GroupResource]fakeStore{
		memcached.DeploymentResource:          typedStore[*appsv1.Deployment]{"deployment", memcached.DeploymentResource, f.deployments},
		memcached.ServiceResource:             typedStore[*corev1.Service]{"service", memcached.ServiceResource, f.services},
		memcached.PodDisruptionBudgetResource: typedStore[*policyv1beta1.PodDisruptionBudget]{"poddisruptionbudget", memcached.PodDisruptionBudgetResource, f.pdbs},
		memcached.ConfigMapResource:           typedStore[*corev1.ConfigMap]{"configmap", memcached.ConfigMapResource, f.configMaps},
		memcached.NetworkPolicyResource: observedStore[*networkingv1.NetworkPolicy]{
			typedStore[*networkingv1.NetworkPolicy]{"networkpolicy", memcached.NetworkPolicyResource, f.networkPolicies}, networkPolicyChild.api},
		memcached.ServiceMonitorGVR.GroupResource(): typedStore[*unstructured.Unstructured]{"servicemonitor", memcached.ServiceMonitorGVR.GroupResource(), f.serviceMonitors},
		memcached.PrometheusRuleGVR.GroupResource(): typedStore[*unstructured.Unstructured]{"prometheusrule", memcached.PrometheusRuleGVR.GroupResource(), f.prometheusRules},
	}
	for _, o := range objects {
		switch o := o.(type) {
		case *v1alpha1.Memcached:
			f.memcacheds[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *appsv1.Deployment:
			f.deployments[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *corev1.Service:
			f.services[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *policyv1beta1.PodDisruptionBudget:
			f.pdbs[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *corev1.ConfigMap:
			f.configMaps[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *networkingv1.NetworkPolicy:
			f.networkPolicies[key(o.Namespace, o.Name)] = o.DeepCopy()
		case *corev1.Pod:
			f.pods = append(f.pods, o.DeepCopy())
		case *unstructured.Unstructured:
			switch o.GetKind() {
			case "ServiceMonitor":
				f.serviceMonitors[key(o.GetNamespace(), o.GetName())] = o.DeepCopy()
			case "PrometheusRule":
				f.prometheusRules[key(o.GetNamespace(), o.GetName())] = o.DeepCopy()
			default:
				panic(fmt.Sprintf("fakeClient cannot hold a %s", o.GetKind()))
			}
		default:
			panic(fmt.Sprintf("fakeClient cannot hold %T", o))
		}
	}
	return f
}

func key(namespace, name string) string { return namespace + "/" + name }

func (f *fakeClient) record(action string) error {
	f.actions = append(f.actions, action)
	for prefix, err := range f.failOn {
		if strings.HasPrefix(action, prefix) {
			return err
		}
	}
	return nil
}

func (f *fakeClient) MemcachedAPIServed() error {
	return f.record("discover memcached api")
}

func (f *fakeClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error) {
	if err := f.record("update memcached/status " + key(m.Namespace, m.Name)); err != nil {
		return nil, err
	}
	f.statuses = append(f.statuses, *m.Status.DeepCopy())
	stored := m.DeepCopy()
	stored.ResourceVersion = fmt.Sprintf("%d", len(f.statuses)+1)
	f.memcacheds[key(m.Namespace, m.Name)] = stored
	return stored.DeepCopy(), nil
}

func (f *fakeClient) ListDeployments() ([]*appsv1.Deployment, error) {
	if err := f.record("list deployments"); err != nil {
		return nil, err
	}
	var out []*appsv1.Deployment
	for k, d := range f.deployments {
		if !f.uncached["deployment "+k] {
			out = append(out, d.DeepCopy())
		}
	}
	f.listedDeployments += len(out)
	return out, nil
}

// fakeStore is the fake client's store of one kind of child.
type fakeStore interface {
	get(f *fakeClient, namespace, name string) (kube.Object, error)
	read(f *fakeClient, namespace, name string) (kube.Object, error)
	create(f *fakeClient, manifest *unstructured.Unstructured) (kube.Object, error)
	patch(f *fakeClient, namespace, name string, uid types.UID, patch []byte) error
	delete(f *fakeClient, namespace, name string, uid types.UID) error
}

// typedStore stores the objects of one kind, as T, in objects, and names
// the kind in actions as kind.
type typedStore[T fakeObject[T]] struct {
	kind    string
	gr      schema.GroupResource
	objects map[string]T
}

func (s typedStore[T]) get(f *fakeClient, namespace, name string) (kube.Object, error) {
	return fakeGet(f, s.kind, s.gr, s.objects, namespace, name)
}

func (s typedStore[T]) read(f *fakeClient, namespace, name string) (kube.Object, error) {
	return fakeRead(f, s.kind, s.gr, s.objects, namespace, name)
}

func (s typedStore[T]) create(f *fakeClient, manifest *unstructured.Unstructured) (kube.Object, error) {
	return fakeCreate(f, s.kind, s.gr, s.objects, manifest)
}

func (s typedStore[T]) patch(f *fakeClient, namespace, name string, uid types.UID, patch []byte) error {
	return fakePatch(f, s.kind, s.gr, s.objects, namespace, name, uid, patch)
}

func (s typedStore[T]) delete(f *fakeClient, namespace, name string, uid types.UID) error {
	return fakeDelete(f, s.kind, s.gr, s.objects, namespace, name, uid)
}

// observedStore is a typedStore of a kind with Observe: what it returns
// passes through the kind's Observe, as the JSON content that the API
// server would send, and its Trim, as CachedClient's objects of the kind do.
type observedStore[T fakeObject[T]] struct {
	typedStore[T]
	kind *kube.Kind
}

func (s observedStore[T]) get(f *fakeClient, namespace, name string) (kube.Object, error) {
	return s.observe(s.typedStore.get(f, namespace, name))
}

func (s observedStore[T]) read(f *fakeClient, namespace, name string) (kube.Object, error) {
	return s.observe(s.typedStore.read(f, namespace, name))
}

func (s observedStore[T]) create(f *fakeClient, manifest *unstructured.Unstructured) (kube.Object, error) {
	return s.observe(s.typedStore.create(f, manifest))
}

// observe returns o, a copy of a stored object, as CachedClient returns it.
func (s observedStore[T]) observe(o kube.Object, err error) (kube.Object, error) {
	if err != nil {
		return o, err
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	if err := s.kind.Observe(raw, nil, o); err != nil {
		return nil, err
	}
	s.kind.Trim(o)
	return o, nil
}

// store returns the store of k's objects.
func (f *fakeClient) store(k *kube.Kind) (fakeStore, error) {
	s, ok := f.stores[k.Resource.GroupResource()]
	if !ok {
		return nil, fmt.Errorf("fake client: no store of %s", k)
	}
	return s, nil
}

// Get is the cache read, but for an Optional kind, which has no cache: it
// reads the API server, as CachedClient does.
func (f *fakeClient) Get(k *kube.Kind, namespace, name string) (kube.Object, error) {
	s, err := f.store(k)
	if err != nil {
		return nil, err
	}
	if k.Optional {
		return s.read(f, namespace, name)
	}
	return s.get(f, namespace, name)
}

func (f *fakeClient) Read(k *kube.Kind, namespace, name string) (kube.Object, error) {
	s, err := f.store(k)
	if err != nil {
		return nil, err
	}
	return s.read(f, namespace, name)
}

func (f *fakeClient) Create(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	s, err := f.store(k)
	if err != nil {
		return nil, err
	}
	return s.create(f, manifest)
}

func (f *fakeClient) Patch(k *kube.Kind, namespace, name string, uid types.UID, patch []byte) error {
	s, err := f.store(k)
	if err != nil {
		return err
	}
	return s.patch(f, namespace, name, uid, patch)
}

// ApplyNew is a create, recorded as one; the Deployment it stores carries
// the digest that the real client's cache would observe on it, that of the
// manifest (see memcached.OwnedDigest).
func (f *fakeClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	if k != kube.DeploymentKind {
		return nil, fmt.Errorf("fake client: only Deployments are applied, not %s", k)
	}
	o, err := f.Create(k, manifest)
	if err != nil {
		return o, err
	}
	d := f.deployments[key(manifest.GetNamespace(), manifest.GetName())]
	if err := observeApplied(d, manifest); err != nil {
		return nil, err
	}
	return d.DeepCopy(), nil
}

// Apply records the manifest in applied, by its action, and sets the stored
// Deployment's labels, strategy, template and replicas to manifest's, with
// the digest of what was applied, while its UID is uid.
func (f *fakeClient) Apply(k *kube.Kind, manifest *unstructured.Unstructured, uid types.UID) error {
	if k != kube.DeploymentKind {
		return fmt.Errorf("fake client: only Deployments are applied, not %s", k)
	}
	action := "apply deployment " + key(manifest.GetNamespace(), manifest.GetName())
	if err := f.record(action); err != nil {
		return err
	}
	f.applied[action] = manifest.DeepCopy()
	d, ok := f.deployments[key(manifest.GetNamespace(), manifest.GetName())]
	if !ok {
		return apierrors.NewNotFound(memcached.DeploymentResource, manifest.GetName())
	}
	if d.UID != uid {
		return fmt.Errorf("%s %s with UID %s was %w", memcached.DeploymentResource.String(), key(d.Namespace, d.Name), uid, kube.ErrReplaced)
	}
	want := &appsv1.Deployment{}
	if err := setContent(manifest.DeepCopy().Object, want); err != nil {
		return err
	}
	updated := d.DeepCopy()
	updated.Labels, updated.Spec.Strategy, updated.Spec.Template, updated.Spec.Replicas = want.Labels, want.Spec.Strategy, want.Spec.Template, want.Spec.Replicas
	if err := observeApplied(updated, manifest); err != nil {
		return err
	}
	f.deployments[key(d.Namespace, d.Name)] = updated
	return nil
}

// ConvertUpdates records the call; the fake's objects have no record of
// who set their fields.
func (f *fakeClient) ConvertUpdates(k *kube.Kind, namespace, name string, uid types.UID) error {
	return f.record("convert updates of " + k.String() + " " + key(namespace, name))
}

// observeApplied sets on d the digest that the real client's cache
// observes on a Deployment after the operator applied manifest and nobody
// changed it.
func observeApplied(d *appsv1.Deployment, manifest *unstructured.Unstructured) error {
	digest, err := memcached.DesiredDigest(manifest.Object)
	if err != nil {
		return err
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[memcached.ObservedDigestAnnotation] = digest
	return nil
}

func (f *fakeClient) Delete(k *kube.Kind, namespace, name string, uid types.UID) error {
	s, err := f.store(k)
	if err != nil {
		return err
	}
	return s.delete(f, namespace, name, uid)
}

// Served records no action: the real client asks discovery once per check
// interval, not once a call. Only the Prometheus Operator's kinds are
// Optional.
func (f *fakeClient) Served(k *kube.Kind) bool {
	return !k.Optional || f.monitoringServed
}

// setContent fills o from content, which an Unstructured takes as it is.
func setContent(content map[string]interface{}, o interface{}) error {
	if u, ok := o.(*unstructured.Unstructured); ok {
		u.Object = content
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(content, o)
}

// fakeObject is a typed object the fake client stores.
type fakeObject[T any] interface {
	kube.Object
	DeepCopy() T
}

// fakeGet is the cache read: it finds what objects holds, unless the test
// hid it from the cache with uncached.
func fakeGet[T fakeObject[T]](f *fakeClient, kind string, gr schema.GroupResource, objects map[string]T, namespace, name string) (T, error) {
	var zero T
	action := kind + " " + key(namespace, name)
	if err := f.record("get " + action); err != nil {
		return zero, err
	}
	if c, ok := f.cached[action]; ok {
		return c.(T).DeepCopy(), nil
	}
	o, ok := objects[key(namespace, name)]
	if !ok || f.uncached[action] {
		return zero, apierrors.NewNotFound(gr, name)
	}
	o = o.DeepCopy()
	if uid, ok := f.cachedUID[action]; ok {
		o.SetUID(uid)
	}
	return o, nil
}

// fakeRead is the read from the API server.
func fakeRead[T fakeObject[T]](f *fakeClient, kind string, gr schema.GroupResource, objects map[string]T, namespace, name string) (T, error) {
	var zero T
	if err := f.record("read " + kind + " " + key(namespace, name)); err != nil {
		return zero, err
	}
	o, ok := objects[key(namespace, name)]
	if !ok {
		return zero, apierrors.NewNotFound(gr, name)
	}
	return o.DeepCopy(), nil
}

func fakeCreate[T fakeObject[T]](f *fakeClient, kind string, gr schema.GroupResource, objects map[string]T, manifest *unstructured.Unstructured) (T, error) {
	var zero T
	k := key(manifest.GetNamespace(), manifest.GetName())
	if err := f.record("create " + kind + " " + k); err != nil {
		return zero, err
	}
	if _, ok := objects[k]; ok {
		return zero, apierrors.NewAlreadyExists(gr, manifest.GetName())
	}
	var o T
	o = reflect.New(reflect.TypeOf(o).Elem()).Interface().(T)
	if err := setContent(manifest.DeepCopy().Object, o); err != nil {
		return zero, err
	}
	o.SetUID(types.UID("uid-" + kind + "-" + o.GetName()))
	objects[k] = o
	f.created = append(f.created, manifest.DeepCopy())
	return o.DeepCopy(), nil
}

// fakePatch records the patch; it applies JSON patches of whole paths, as
// memcached.JSONPatchSet makes them, to the stored object. A failed test, or a
// patch that does not test uid first, is refused as CachedClient refuses it.
func fakePatch[T fakeObject[T]](f *fakeClient, kind string, gr schema.GroupResource, objects map[string]T, namespace, name string, uid types.UID, patch []byte) error {
	action := "patch " + kind + " " + key(namespace, name)
	if err := f.record(action); err != nil {
		return err
	}
	f.patches[action] = string(patch)
	o, ok := objects[key(namespace, name)]
	if !ok {
		return apierrors.NewNotFound(gr, name)
	}
	if o.GetUID() != uid {
		return fmt.Errorf("%s %s with UID %s was %w", gr.String(), key(namespace, name), uid, kube.ErrReplaced)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.DeepCopy())
	if err != nil {
		return err
	}
	var ops []struct {
		Op    string      `json:"op"`
		Path  string      `json:"path"`
		Value interface{} `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	if len(ops) == 0 || ops[0].Op != "test" || ops[0].Path != "/metadata/uid" || ops[0].Value != string(uid) {
		return fmt.Errorf("fake client: patch %s does not begin by testing that the UID is %s", patch, uid)
	}
	for _, op := range ops[1:] {
		if op.Op == "add" && op.Path == "/metadata/resourceVersion" && op.Value != o.GetResourceVersion() {
			// A resourceVersion in a patch is its precondition, as
			// CachedClient reports its conflict.
			return fmt.Errorf("%s %s %w: %v", gr.String(), key(namespace, name), kube.ErrChanged, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified")))
		}
	}
	for _, op := range ops[1:] {
		fields := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		for i, f := range fields {
			// JSON pointer escapes (RFC 6901), as in an annotation key's "/".
			fields[i] = strings.ReplaceAll(strings.ReplaceAll(f, "~1", "/"), "~0", "~")
		}
		switch op.Op {
		case "add":
			// RFC 6902: the member's parent must exist, as the API server holds it to.
			if _, found, _ := unstructured.NestedFieldNoCopy(content, fields[:len(fields)-1]...); !found {
				return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: kind}, name, nil)
			}
			if err := unstructured.SetNestedField(content, runtime.DeepCopyJSONValue(op.Value), fields...); err != nil {
				return err
			}
		case "remove":
			unstructured.RemoveNestedField(content, fields...)
		default:
			return fmt.Errorf("fake client: unsupported patch op %q", op.Op)
		}
	}
	updated := o.DeepCopy()
	if err := setContent(content, updated); err != nil {
		return err
	}
	if rv, err := strconv.Atoi(updated.GetResourceVersion()); err == nil {
		updated.SetResourceVersion(strconv.Itoa(rv + 1))
	}
	setsPodSpec := false
	for _, op := range ops {
		setsPodSpec = setsPodSpec || op.Path == "/spec/template/spec"
	}
	if d, ok := any(updated).(*appsv1.Deployment); ok && setsPodSpec {
		// The pod spec is the operator's now, in which the cache finds
		// nothing loosened (TestOperatorTemplatesAreNeverLooser). An apply
		// leaves what others added, and so the findings.
		delete(d.Annotations, memcached.LoosenedAnnotation)
	}
	objects[key(namespace, name)] = updated
	return nil
}

func fakeDelete[T fakeObject[T]](f *fakeClient, kind string, gr schema.GroupResource, objects map[string]T, namespace, name string, uid types.UID) error {
	if err := f.record("delete " + kind + " " + key(namespace, name)); err != nil {
		return err
	}
	o, ok := objects[key(namespace, name)]
	if !ok {
		return apierrors.NewNotFound(gr, name)
	}
	if o.GetUID() != uid {
		return apierrors.NewConflict(gr, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", uid, o.GetUID()))
	}
	delete(objects, key(namespace, name))
	return nil
}

func (f *fakeClient) ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error {
	if err := f.record(fmt.Sprintf("scale deployment %s %d", key(namespace, name), replicas)); err != nil {
		return err
	}
	d, ok := f.deployments[key(namespace, name)]
	if !ok {
		return apierrors.NewNotFound(memcached.DeploymentResource, name)
	}
	if d.UID != uid {
		return fmt.Errorf("%s %s with UID %s was %w", memcached.DeploymentResource.String(), key(namespace, name), uid, kube.ErrReplaced)
	}
	d.Spec.Replicas = &replicas
	return nil
}

func (f *fakeClient) ListPods(namespace, name string) ([]*corev1.Pod, error) {
	selector := memcached.Selector(name)
	if err := f.record(fmt.Sprintf("list pods %s %s", namespace, selector)); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Namespace == namespace && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// MountFailure is a cache read, which records no action.
func (f *fakeClient) MountFailure(_ string, uid types.UID) string {
	return f.mountFailures[uid]
}

// checkActions fails t with the actions that were expected but missing and
// those that happened unexpectedly, in order.
func checkActions(t *testing.T, got, want []string) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(want):
			t.Errorf("unexpected action %d: %s", i, got[i])
		case i >= len(got):
			t.Errorf("missing action %d: %s", i, want[i])
		case got[i] != want[i]:
			t.Errorf("action %d: got %q, want %q", i, got[i], want[i])
		}
	}
}
