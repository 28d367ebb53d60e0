package kube

import (
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The operator's caches hold trimmed copies of its Deployments and pods:
// only the fields that the reconcile reads. With a thousand Memcached
// resources, the pod specs alone (containers, probes, volumes, the projected
// ServiceAccount token) were most of the operator's memory. Each object is
// trimmed as it arrives, before the informer stores it, so no cached object
// is ever changed.

// newPodInformer returns an informer on the pods in namespace that selector
// matches, trimmed by trimPod, indexed by namespace and by Memcached.
func newPodInformer(kube kubernetes.Interface, namespace, selector string) cache.SharedIndexInformer {
	pods := kube.CoreV1().Pods(namespace)
	lw := trimmedListWatch(labelSelector(selector),
		func(o metav1.ListOptions) (runtime.Object, error) { return pods.List(o) },
		pods.Watch,
		func(obj runtime.Object) {
			if p, ok := obj.(*corev1.Pod); ok {
				trimPod(p)
			}
		})
	return cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		byMemcachedIndex:     indexByMemcached,
	})
}

// newTrimmedInformer returns an informer on the objects of one kind, such
// as example, that list and watchFn return, among those labelled
// app=memcached (see memcached.ManagedSelector), trimmed by trim unless it
// is nil, indexed by namespace.
func newTrimmedInformer(example runtime.Object, list func(metav1.ListOptions) (runtime.Object, error), watchFn func(metav1.ListOptions) (watch.Interface, error), trim func(runtime.Object)) cache.SharedIndexInformer {
	if trim == nil {
		trim = func(runtime.Object) {}
	}
	lw := trimmedListWatch(labelSelector(memcached.ManagedSelector), list, watchFn, trim)
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
	})
}

// listPage is how many objects one page of a cache's list holds, as
// client-go's pager pages by default.
const listPage = 500

// trimmedListWatch lists and watches, with list and watchFn, the objects
// that the options selectWith sets select, and passes each object it
// returns, in a list or a watch event, to trim before the informer stores
// it.
//
// It lists page by page, each page trimmed before the next is asked for, so
// that a starting replica holds one page of objects as the API server sent
// them at a time, not every object's, such as twenty thousand untrimmed
// pods for ten thousand Memcacheds. The pages of one list are one
// snapshot, that of the first page. They are read at the latest version:
// client-go 1.11's reflector lists at resourceVersion 0, which the API
// server serves whole from its cache, whatever the limit.
func trimmedListWatch(selectWith func(*metav1.ListOptions), list func(metav1.ListOptions) (runtime.Object, error), watchFn func(metav1.ListOptions) (watch.Interface, error), trim func(runtime.Object)) *cache.ListWatch {
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			selectWith(&o)
			o.ResourceVersion = ""
			o.Limit = listPage
			var first runtime.Object
			var items []runtime.Object
			for {
				l, err := list(o)
				if err != nil {
					return nil, err
				}
				err = meta.EachListItem(l, func(obj runtime.Object) error {
					trim(obj)
					items = append(items, obj)
					return nil
				})
				if err != nil {
					return nil, err
				}
				if first == nil {
					first = l
				}
				page, err := meta.ListAccessor(l)
				if err != nil {
					return nil, err
				}
				if o.Continue = page.GetContinue(); o.Continue == "" {
					break
				}
			}
			if err := meta.SetList(first, items); err != nil {
				return nil, err
			}
			snapshot, err := meta.ListAccessor(first)
			if err != nil {
				return nil, err
			}
			snapshot.SetContinue("")
			return first, nil
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			selectWith(&o)
			w, err := watchFn(o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				trim(e.Object)
				return e, true
			}), nil
		},
	}
}

// labelSelector selects the objects that the label selector s matches.
func labelSelector(s string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = s }
}

// fieldSelector selects the objects that the field selector s matches.
func fieldSelector(s string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.FieldSelector = s }
}

// trimPod keeps what the status is computed from (see memcached.ComputeStatus):
// the pod's name, UID, the labels that podLabels keeps, controller, template
// hash and deletion; its
// phase, its Ready and PodReadyToStartContainers conditions, a PodScheduled
// condition that is False, and of its containers' states the reasons,
// messages and exit codes; and its IP, where the
// operator asks the pod's sidecar for its report (package sidecarpoll).
// Two versions of a pod that differ only in what is dropped, such as its
// binding to a node or its start time, then compare equal (see podChanged).
func trimPod(p *corev1.Pod) {
	p.GenerateName = ""
	p.Labels = podLabels(p.Labels)
	p.OwnerReferences = controllerOnly(p.OwnerReferences)
	p.Annotations = onlyAnnotations(p.Annotations, memcached.TemplateHashAnnotation)
	p.Spec = corev1.PodSpec{}
	var conditions []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady, c.Type == memcached.PodReadyToStartContainers:
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	p.Status = corev1.PodStatus{
		Phase:                 p.Status.Phase,
		PodIP:                 p.Status.PodIP,
		Conditions:            conditions,
		InitContainerStatuses: trimContainerStatuses(p.Status.InitContainerStatuses),
		ContainerStatuses:     trimContainerStatuses(p.Status.ContainerStatuses),
	}
}

// podLabels returns the labels of a pod that the operator reads: the
// operator's (memcached.Labels), which the cache selects and indexes pods
// by, and the pod template hash, which tells the pods of a Memcached's own
// ReplicaSets (memcached.OwnPods). The cache holds every pod with the
// operator's labels in the watched namespaces, a tenant's too, and a pod
// may carry hundreds of labels of its own.
func podLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, 3)
	for _, k := range []string{memcached.AppLabel, memcached.CRLabel, appsv1.DefaultDeploymentUniqueLabelKey} {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// controllerOnly returns the controller reference among refs, its kind and
// name alone, which tell whether a pod is one the Memcached's Deployment runs
// (see memcached.OwnPods); nil without one.
func controllerOnly(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			controller := true
			return []metav1.OwnerReference{{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: &controller}}
		}
	}
	return nil
}

// trimContainerStatuses keeps what containerFailed reads: each container's
// name and readiness, why it waits, and how it or its last run terminated.
func trimContainerStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(statuses) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(statuses))
	for i, s := range statuses {
		out[i] = corev1.ContainerStatus{
			Name:                 s.Name,
			Ready:                s.Ready,
			State:                corev1.ContainerState{Waiting: s.State.Waiting, Terminated: trimTerminated(s.State.Terminated)},
			LastTerminationState: corev1.ContainerState{Terminated: trimTerminated(s.LastTerminationState.Terminated)},
		}
	}
	return out
}

// trimTerminated keeps a termination's exit code, reason and message.
func trimTerminated(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	if t == nil {
		return nil
	}
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}
}

// trimDeployment keeps what the reconcile reads: the Deployment's name,
// labels, owner references, deletion, the digest of what the operator
// applied and the findings of a loosened pod template that
// observeDeployment records (memcached.ObservedDigestAnnotation, which
// stands for the fields the operator set, and memcached.LoosenedAnnotation,
// for what others added to the template) with the fingerprint of what they
// were computed from (observedInputsAnnotation), spec.replicas,
// spec.progressDeadlineSeconds, the hash of its pod template, which stands
// for the template (see memcached.TemplateHashAnnotation), the template's
// record of the roll that set it (see memcached.RollAnnotations), how far
// its controller has rolled it (see memcached.RolloutComplete), and the
// conditions that say its rollout is stuck (see deploymentStuckConditions).
func trimDeployment(d *appsv1.Deployment) {
	d.Annotations = onlyAnnotations(d.Annotations, memcached.ObservedDigestAnnotation, memcached.LoosenedAnnotation, observedInputsAnnotation)
	d.Spec.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: memcached.RollAnnotations(d.Spec.Template.Annotations)},
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Status.ObservedGeneration,
		Replicas:           d.Status.Replicas,
		UpdatedReplicas:    d.Status.UpdatedReplicas,
		Conditions:         deploymentStuckConditions(d.Status.Conditions),
	}
}

// deploymentStuckConditions returns the type, status, reason and message of
// the conditions among conditions that the status reads (see stuck): a
// ReplicaFailure that is True and a Progressing that is False. A
// Progressing that is True, whose reason and message follow every step of a
// roll, and the conditions' times, which move on every status update of the
// Deployment controller, are left out, so that such updates compare equal
// (see deploymentChanged).
func deploymentStuckConditions(conditions []appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	for _, c := range conditions {
		if (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
			(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse) {
			out = append(out, appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	return out
}

// onlyAnnotations returns annotations with the annotations keys alone, or
// nil without any of them.
func onlyAnnotations(annotations map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
