package kube

import (
	"strings"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The kubelet tells a volume it cannot mount, such as a Secret of spec.tls
// or spec.auth that is missing or lacks a key (see memcached's
// secretVolumes), only in a Warning Event FailedMount on the pod: the pod's
// status shows its containers waiting in ContainerCreating, without a
// message. The operator may not read Secrets, so it reads those Events, and
// those alone: the API server filters them by field (mountEventSelector),
// so the cache holds one Event per pod and cause, which the kubelet updates
// in place on every retry, and not the namespace's other Events.

// mountEventSelector is the field selector of the kubelet's Events of a
// volume it could not mount on a pod.
const mountEventSelector = "involvedObject.kind=Pod,reason=" + memcached.ReasonFailedMount

// byPodUIDIndex names the Event cache's index by the UID of the pod an
// Event is about.
const byPodUIDIndex = "pod"

// newMountEventInformer returns an informer on the Events of
// mountEventListWatch, indexed by pod UID.
func newMountEventInformer(kube kubernetes.Interface, namespace string) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(mountEventListWatch(kube, namespace), &corev1.Event{}, 0, cache.Indexers{byPodUIDIndex: indexByPodUID})
}

// mountEventListWatch lists and watches the Events in namespace that
// mountEventSelector selects, trimmed by trimEvent.
func mountEventListWatch(kube kubernetes.Interface, namespace string) *cache.ListWatch {
	events := kube.CoreV1().Events(namespace)
	return trimmedListWatch(fieldSelector(mountEventSelector),
		func(o metav1.ListOptions) (runtime.Object, error) { return events.List(o) },
		events.Watch,
		TrimOf(trimEvent))
}

// indexByPodUID is the index function of byPodUIDIndex: the Event's own
// namespace and the UID of the pod it is about. Whoever may create Events
// in a namespace may write any UID into one, another tenant's pod's among
// them; the Event's own namespace, which the API server sets, keeps such
// an Event from the pods of every other namespace (see MountFailure).
func indexByPodUID(obj interface{}) ([]string, error) {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.UID == "" {
		return nil, nil
	}
	return []string{e.Namespace + "/" + string(e.InvolvedObject.UID)}, nil
}

// maxEventMessage bounds the message that the Event cache keeps, and so
// the one a status shows: the kubelet's FailedMount messages take a line.
const maxEventMessage = 1024

// truncate returns s cut to at most n bytes, between runes, with a mark
// that says so.
func truncate(s string, n int) string {
	const mark = " [truncated]"
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len(mark)], "") + mark
}

// trimEvent keeps what the status reads and what tells the newest of a
// pod's Events (see newestEvent): the Event's name, namespace and
// resourceVersion, which the cache needs; the pod's namespace, name and
// UID; the reason, type and message; and in LastTimestamp, the last time the
// kubelet saw it happen, whichever field holds it (see eventTime). The
// count, source and first time, which every retry of the kubelet's moves or
// which say nothing the status needs, are dropped.
func trimEvent(e *corev1.Event) {
	when := eventTime(e)
	*e = corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, ResourceVersion: e.ResourceVersion},
		InvolvedObject: corev1.ObjectReference{
			Kind: e.InvolvedObject.Kind, Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID,
		},
		Reason:        e.Reason,
		Message:       truncate(e.Message, maxEventMessage),
		Type:          e.Type,
		LastTimestamp: when,
	}
}

// eventTime returns when e last happened: the kubelet's recorder sets
// lastTimestamp, the events.k8s.io API's recorders the series' last
// observation or eventTime instead; the latest of them, or of
// firstTimestamp, which every recorder may leave out but one.
func eventTime(e *corev1.Event) metav1.Time {
	latest := e.FirstTimestamp
	later := func(t metav1.Time) {
		if latest.Before(&t) {
			latest = t
		}
	}
	later(e.LastTimestamp)
	later(metav1.Time{Time: e.EventTime.Time})
	if e.Series != nil {
		later(metav1.Time{Time: e.Series.LastObservedTime.Time})
	}
	return latest
}

// newestEvent returns the Event among events that happened last, by
// eventTime (LastTimestamp once trimmed); of two at the same time, the one
// whose name sorts last, which the kubelet's recorder makes after it (it
// names an Event after its object and, in hexadecimal, the nanosecond it
// made it). nil without events.
func newestEvent(events []*corev1.Event) *corev1.Event {
	var newest *corev1.Event
	var at metav1.Time
	for _, e := range events {
		t := eventTime(e)
		if newest == nil || at.Before(&t) || t.Equal(&at) && e.Name > newest.Name {
			newest, at = e, t
		}
	}
	return newest
}

// MountFailure returns the message of the newest FailedMount Event that
// the kubelet recorded on the pod of uid in namespace, as the cache shows
// it among the Events of that namespace (see
// newestEvent), or "" without one. Whether it still tells why the pod does
// not start is for the status to decide (memcached.Observation.MountFailures):
// an Event stays until it expires, an hour after its last update.
func (c *CachedClient) MountFailure(namespace string, uid types.UID) string {
	objs, err := c.mountEvents.byIndex(byPodUIDIndex, namespace+"/"+string(uid))
	if err != nil {
		// Only an unknown index fails, and byPodUIDIndex is the cache's.
		return ""
	}
	events := make([]*corev1.Event, 0, len(objs))
	for _, obj := range objs {
		if e, ok := obj.(*corev1.Event); ok {
			events = append(events, e)
		}
	}
	if e := newestEvent(events); e != nil {
		return e.Message
	}
	return ""
}

// enqueuePodOwner passes to enqueue the Memcached of the pod that a cached
// Event, or the last known state of a deleted one, is about, when the pod
// cache holds that pod, with the Event's UID: an Event of a pod the cache
// has not seen yet needs no reconcile of its own, since the pod's arrival
// brings one, which reads the Event.
func (c *CachedClient) enqueuePodOwner(obj interface{}, enqueue func(namespace, name string)) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	e, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	pod, exists, err := c.pods.getByKey(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name)
	if err != nil || !exists {
		return
	}
	if p, ok := pod.(*corev1.Pod); ok && p.UID == e.InvolvedObject.UID {
		enqueueOwner(p, enqueue)
	}
}
