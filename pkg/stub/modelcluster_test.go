package stub

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The cluster of the model test (model_test.go): the fake client with what
// the API server and the controllers add to it. The fake client gives every
// created object the same UID for a name and keeps a status write's spec; the
// model's client gives each object a UID of its own, bumps a Deployment's
// generation when its spec changes, refuses a status write from an older
// version of the Memcached, and checks each write of a status or of a
// discovery ConfigMap as the API server stores it.

// memcachedResource is the Memcached API's resource, for the API errors.
var memcachedResource = schema.GroupResource{Group: v1alpha1.GroupName, Resource: "memcacheds"}

// modelClient is the fake client of the model's cluster.
type modelClient struct {
	*fakeClient
	md *model
}

// MemcachedAPIServed records no action: the handler's API monitor asks it
// from a goroutine of its own.
func (c *modelClient) MemcachedAPIServed() error { return nil }

// UpdateMemcachedStatus stores m's status on the stored Memcached while m is
// its current version, as the status subresource does, and queues the new
// version for the handlers' SDK.
func (c *modelClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error) {
	k := key(m.Namespace, m.Name)
	if err := c.record("update memcached/status " + k); err != nil {
		return nil, err
	}
	stored, ok := c.memcacheds[k]
	if !ok {
		return nil, apierrors.NewNotFound(memcachedResource, m.Name)
	}
	if stored.UID != m.UID || stored.ResourceVersion != m.ResourceVersion {
		return nil, apierrors.NewConflict(memcachedResource, m.Name, fmt.Errorf("the object has been modified"))
	}
	c.md.checkStatusWrite(stored, m.Status)
	updated := stored.DeepCopy()
	updated.Status = *m.Status.DeepCopy()
	updated.ResourceVersion = c.md.nextVersion()
	c.memcacheds[k] = updated
	c.md.deliver = append(c.md.deliver, updated.DeepCopy())
	return updated.DeepCopy(), nil
}

func (c *modelClient) Create(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	o, err := c.fakeClient.Create(k, manifest)
	if err != nil {
		return o, err
	}
	o.SetUID(c.md.renameUID(c.stored(k.Resource.GroupResource(), manifest.GetNamespace(), manifest.GetName())))
	if k == configMapKind {
		c.md.checkDiscoveryWrite(manifest.GetName(), c.configMaps[key(manifest.GetNamespace(), manifest.GetName())])
	}
	return o, nil
}

func (c *modelClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	o, err := c.fakeClient.ApplyNew(k, manifest)
	if err != nil {
		return o, err
	}
	d := c.deployments[key(manifest.GetNamespace(), manifest.GetName())]
	d.Generation = 1
	o.SetUID(c.md.renameUID(d))
	o.(*appsv1.Deployment).Generation = 1
	return o, nil
}

func (c *modelClient) Apply(k *kube.Kind, manifest *unstructured.Unstructured, uid types.UID) error {
	before := c.deployments[key(manifest.GetNamespace(), manifest.GetName())].DeepCopy()
	err := c.fakeClient.Apply(k, manifest, uid)
	if err == nil {
		c.bumpGeneration(before)
	}
	return err
}

func (c *modelClient) Patch(k *kube.Kind, namespace, name string, uid types.UID, patch []byte) error {
	var before *appsv1.Deployment
	if k == kube.DeploymentKind {
		before = c.deployments[key(namespace, name)].DeepCopy()
	}
	err := c.fakeClient.Patch(k, namespace, name, uid, patch)
	if err == nil && before != nil {
		c.bumpGeneration(before)
	}
	if err == nil && k == configMapKind {
		c.md.checkDiscoveryWrite(name, c.configMaps[key(namespace, name)])
	}
	return err
}

func (c *modelClient) ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error {
	before := c.deployments[key(namespace, name)].DeepCopy()
	err := c.fakeClient.ScaleDeployment(namespace, name, uid, replicas)
	if err == nil {
		c.bumpGeneration(before)
	}
	return err
}

// bumpGeneration moves the generation of the Deployment that was before
// on when its spec changed, as the API server does.
func (c *modelClient) bumpGeneration(before *appsv1.Deployment) {
	if before == nil {
		return
	}
	after := c.deployments[key(before.Namespace, before.Name)]
	if after != nil && !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
		after.Generation = before.Generation + 1
	}
}

// stored returns the stored object of resource gr, or nil.
func (c *modelClient) stored(gr schema.GroupResource, namespace, name string) metav1.Object {
	k := key(namespace, name)
	var o metav1.Object
	switch gr {
	case memcached.DeploymentResource:
		if d, ok := c.deployments[k]; ok {
			o = d
		}
	case memcached.ServiceResource:
		if s, ok := c.services[k]; ok {
			o = s
		}
	case memcached.PodDisruptionBudgetResource:
		if p, ok := c.pdbs[k]; ok {
			o = p
		}
	case memcached.NetworkPolicyResource:
		if p, ok := c.networkPolicies[k]; ok {
			o = p
		}
	case memcached.ConfigMapResource:
		if cm, ok := c.configMaps[k]; ok {
			o = cm
		}
	case memcached.ServiceMonitorGVR.GroupResource():
		if u, ok := c.serviceMonitors[k]; ok {
			o = u
		}
	case memcached.PrometheusRuleGVR.GroupResource():
		if u, ok := c.prometheusRules[k]; ok {
			o = u
		}
	}
	return o
}

// childResources are the resources of a Memcached's children, by the kind
// that the fake client's actions name.
var childResources = map[string]schema.GroupResource{
	"deployment":          memcached.DeploymentResource,
	"service":             memcached.ServiceResource,
	"poddisruptionbudget": memcached.PodDisruptionBudgetResource,
	"configmap":           memcached.ConfigMapResource,
	"networkpolicy":       memcached.NetworkPolicyResource,
	"servicemonitor":      memcached.ServiceMonitorGVR.GroupResource(),
	"prometheusrule":      memcached.PrometheusRuleGVR.GroupResource(),
}

// childKinds are the keys of childResources, sorted.
var childKinds = func() []string {
	var out []string
	for k := range childResources {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}()

// controllerUID returns the UID of o's controller, "" for a nil o and
// "none" for an o without one.
func controllerUID(o metav1.Object) types.UID {
	if o == nil {
		return ""
	}
	if c := metav1.GetControllerOf(o); c != nil {
		return c.UID
	}
	return "none"
}

// modelQueue is a handler's work queue in the model: deterministic, on the
// model's clock. AddAfter holds a key until the clock reaches its time;
// AddRateLimited until the next round of the drain (see model.drain). A
// standby's queue, inactive, takes nothing, as between two terms of Run.
type modelQueue struct {
	md     *model
	active bool
	shut   bool
	ready  []string
	queued map[string]bool
	later  map[string]time.Time
	retry  map[string]bool
}

func newModelQueue(md *model, active bool) *modelQueue {
	return &modelQueue{md: md, active: active, queued: map[string]bool{}, later: map[string]time.Time{}, retry: map[string]bool{}}
}

func (q *modelQueue) Add(item interface{}) {
	k := item.(string)
	if !q.active || q.shut || q.queued[k] {
		return
	}
	q.queued[k] = true
	q.ready = append(q.ready, k)
}

func (q *modelQueue) Len() int { return len(q.ready) }

func (q *modelQueue) Get() (interface{}, bool) {
	if len(q.ready) == 0 {
		return nil, true
	}
	k := q.ready[0]
	q.ready = q.ready[1:]
	delete(q.queued, k)
	return k, false
}

func (q *modelQueue) Done(interface{})   {}
func (q *modelQueue) ShutDown()          { q.shut = true }
func (q *modelQueue) ShuttingDown() bool { return q.shut }
func (q *modelQueue) Forget(interface{}) {}

func (q *modelQueue) NumRequeues(interface{}) int { return 0 }

func (q *modelQueue) AddAfter(item interface{}, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	if !q.active || q.shut {
		return
	}
	k, due := item.(string), q.md.clock.Add(d)
	if cur, ok := q.later[k]; !ok || due.Before(cur) {
		q.later[k] = due
	}
}

func (q *modelQueue) AddRateLimited(item interface{}) {
	if q.active && !q.shut {
		q.retry[item.(string)] = true
	}
}

// release queues the keys whose time has come, and those to retry.
func (q *modelQueue) release() {
	for _, k := range sortedKeys(q.later) {
		if !q.later[k].After(q.md.clock) {
			delete(q.later, k)
			q.Add(k)
		}
	}
	q.releaseRetries()
}

// releaseRetries queues the keys to retry, by name.
func (q *modelQueue) releaseRetries() {
	for _, k := range sortedKeys(q.retry) {
		delete(q.retry, k)
		q.Add(k)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The Deployment controller of the model. The fake client runs no
// controller, so the model's steps do what the Deployment and ReplicaSet
// controllers would, one pod at a time: a rolling update with maxSurge 1 and
// maxUnavailable 0, whatever the Deployment's strategy says, and pods of a
// ReplicaSet named after the hash of the whole pod template, as the
// controller's pod-template-hash is, so that a hand edit of the template
// rolls the pods as it would in a cluster, while their template-hash
// annotation, the operator's, stays.

// controllerHash is the pod-template-hash of d's pod template.
func controllerHash(d *appsv1.Deployment) string {
	b, err := json.Marshal(d.Spec.Template)
	if err != nil {
		panic(err)
	}
	h := fnv.New32a()
	h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// podsOf returns the live pods of d's ReplicaSets, by name.
func (md *model) podsOf(d *appsv1.Deployment) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range memcached.OwnPods(d.Name, md.client.pods) {
		if p.Namespace == d.Namespace && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// newPod adds a pod of d's current template, not Ready yet, at an IP of its
// own.
func (md *model) newPod(d *appsv1.Deployment) {
	md.seq++
	hash := controllerHash(d)
	labels := memcached.Labels(d.Name)
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	annotations := map[string]string{}
	for k, v := range d.Spec.Template.Annotations {
		annotations[k] = v
	}
	controller := true
	name := fmt.Sprintf("%s-%s-%d", d.Name, hash, md.seq)
	md.client.pods = append(md.client.pods, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.Namespace, UID: types.UID("uid-" + name), Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.Name + "-" + hash, UID: types.UID("uid-rs-" + d.Name + "-" + hash), Controller: &controller}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      fmt.Sprintf("10.%d.%d.%d", md.seq>>16&255, md.seq>>8&255, md.seq&255),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		},
	})
}

// removePod deletes the pod p.
func (md *model) removePod(p *corev1.Pod) {
	var out []*corev1.Pod
	for _, q := range md.client.pods {
		if q != p {
			out = append(out, q)
		}
	}
	md.client.pods = out
}

// setReady sets p's Ready condition.
func setReady(p *corev1.Pod, ready bool) {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
}

// tick takes one step of d's controller: it creates or deletes one pod,
// if the rolling update or the scale allows one, and then writes d's status
// as the controller does, having observed d's generation. It reports
// whether it changed a pod.
func (md *model) tick(d *appsv1.Deployment) bool {
	want := controllerHash(d)
	r := replicas(d)
	var current, old []*corev1.Pod
	ready := int32(0)
	for _, p := range md.podsOf(d) {
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == want {
			current = append(current, p)
		} else {
			old = append(old, p)
		}
		if podIsReady(p) {
			ready++
		}
	}
	changed := true
	switch {
	case int32(len(current)) > r:
		md.removePod(pickUnready(current))
	case len(old) > 0 && int32(len(current)) < r && int32(len(current)+len(old)) < r+1:
		md.newPod(d)
	case len(old) > 0 && (anyUnready(old) || ready > r):
		md.removePod(pickUnready(old))
	case len(old) == 0 && int32(len(current)) < r:
		md.newPod(d)
	default:
		changed = false
	}
	md.observe(d)
	return changed
}

// observe writes d's status as its controller does.
func (md *model) observe(d *appsv1.Deployment) {
	want := controllerHash(d)
	s := appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	for _, p := range md.podsOf(d) {
		s.Replicas++
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == want {
			s.UpdatedReplicas++
		}
		if podIsReady(p) {
			s.ReadyReplicas++
		}
	}
	d.Status = s
}

// settle runs d's controller, with every new pod becoming Ready, until its
// rollout is complete.
func (md *model) settle(d *appsv1.Deployment) {
	for range 64 {
		want := controllerHash(d)
		for _, p := range md.podsOf(d) {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == want {
				setReady(p, true)
			}
		}
		if !md.tick(d) {
			break
		}
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func anyUnready(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if !podIsReady(p) {
			return true
		}
	}
	return false
}

// pickUnready returns the first pod that is not Ready, else the first.
func pickUnready(pods []*corev1.Pod) *corev1.Pod {
	for _, p := range pods {
		if !podIsReady(p) {
			return p
		}
	}
	return pods[0]
}

// discoveryText returns the membership the discovery ConfigMap of cm
// holds, and whether it holds one.
func discoveryText(cm *corev1.ConfigMap) (sidecar.Cluster, bool) {
	if cm == nil {
		return sidecar.Cluster{}, false
	}
	return memcached.DiscoveryCluster(cm)
}
