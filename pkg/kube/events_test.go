package kube

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// at is a time of the tests' Events, seconds after memcachedtest.Now.
func at(seconds int) time.Time {
	return memcachedtest.Now.Add(time.Duration(seconds) * time.Second)
}

func TestTrimmedEventKeepsWhatTheStatusReads(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	p := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	e := memcachedtest.FailedMountEvent(p, memcachedtest.MissingSecret("tls", "cert"), 5, at(0), at(30))
	e.ReportingController, e.ReportingInstance = "kubelet", "node-1"

	trimEvent(e)

	want := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: e.Name, Namespace: "test", ResourceVersion: "7"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "test", Name: "example-a", UID: "uid-example-a"},
		Reason:         memcached.ReasonFailedMount,
		Message:        `MountVolume.SetUp failed for volume "tls" : secret "cert" not found`,
		Type:           corev1.EventTypeWarning,
		LastTimestamp:  metav1.NewTime(at(30)),
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("trimmed event:\n got %+v\nwant %+v", e, want)
	}
}

func TestNewestEvent(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	p := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	event := func(message string, first, last int) *corev1.Event {
		return memcachedtest.FailedMountEvent(p, message, 1, at(first), at(last))
	}
	// seriesOnly is an Event of the events.k8s.io API's recorders, which
	// leave the legacy timestamps out.
	seriesOnly := func(message string, first, last int) *corev1.Event {
		e := event(message, first, last)
		e.FirstTimestamp, e.LastTimestamp = metav1.Time{}, metav1.Time{}
		e.EventTime = metav1.NewMicroTime(at(first))
		e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at(last))}
		return e
	}
	missing, noKey := memcachedtest.MissingSecret("tls", "cert"), memcachedtest.MissingSecretKey("tls", "tls.key")
	tests := []struct {
		name   string
		events []*corev1.Event
		want   string
	}{
		{name: "none"},
		{name: "one", events: []*corev1.Event{event(missing, 0, 30)}, want: missing},
		{name: "the Secret came without a key", events: []*corev1.Event{event(missing, 0, 30), event(noKey, 40, 40)}, want: noKey},
		{name: "in any order", events: []*corev1.Event{event(noKey, 40, 40), event(missing, 0, 30)}, want: noKey},
		{name: "an older Event seen again last", events: []*corev1.Event{event(noKey, 40, 50), event(missing, 0, 60)}, want: missing},
		{name: "at the same time, the one made later", events: []*corev1.Event{event(noKey, 1, 30), event(missing, 0, 30)}, want: noKey},
		{name: "events.k8s.io series", events: []*corev1.Event{seriesOnly(missing, 0, 60), event(noKey, 40, 50)}, want: missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			if e := newestEvent(tt.events); e != nil {
				got = e.Message
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			// The cache holds them trimmed: the same one must win.
			trimmed := make([]*corev1.Event, len(tt.events))
			for i, e := range tt.events {
				trimmed[i] = e.DeepCopy()
				trimEvent(trimmed[i])
			}
			got = ""
			if e := newestEvent(trimmed); e != nil {
				got = e.Message
			}
			if got != tt.want {
				t.Errorf("trimmed: got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMountFailureReadsTheCache: the newest FailedMount Event of each pod,
// by the pod's UID, from the cache and without a request.
func TestMountFailureReadsTheCache(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	a := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	b := memcachedtest.NewPod(m, "example-b", corev1.PodPending, false)
	missing, noKey := memcachedtest.MissingSecret("tls", "cert"), memcachedtest.MissingSecretKey("tls", "tls.key")
	var cached []runtime.Object
	for _, e := range []*corev1.Event{
		memcachedtest.FailedMountEvent(a, missing, 4, at(0), at(20)),
		memcachedtest.FailedMountEvent(a, noKey, 1, at(25), at(25)),
		memcachedtest.FailedMountEvent(b, missing, 4, at(0), at(20)),
	} {
		trimEvent(e)
		cached = append(cached, e)
	}
	c, api := newTestCachedClient(t, cached, nil)

	for uid, want := range map[types.UID]string{a.UID: noKey, b.UID: missing, "uid-example-c": ""} {
		if got := c.MountFailure(m.Namespace, uid); got != want {
			t.Errorf("MountFailure(%s): got %q, want %q", uid, got, want)
		}
	}
	if reqs := api.Got(); len(reqs) != 0 {
		t.Errorf("API requests: got %v, want none", reqs)
	}
}

// TestMountFailureKeepsToThePodsNamespace: an Event that another namespace
// holds, such as one a tenant wrote with another tenant's pod's UID, is no
// mount failure of that pod; and a message is kept to maxEventMessage.
func TestMountFailureKeepsToThePodsNamespace(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	a := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	forged := memcachedtest.FailedMountEvent(a, "your cache is gone, see http://evil.example", 1, at(30), at(30))
	forged.Namespace, forged.InvolvedObject.Namespace = "tenant", "tenant"
	long := memcachedtest.FailedMountEvent(a, strings.Repeat("é", 2*maxEventMessage), 1, at(0), at(0))
	var cached []runtime.Object
	for _, e := range []*corev1.Event{forged, long} {
		trimEvent(e)
		cached = append(cached, e)
	}
	c, _ := newScopedTestCachedClient(t, NewScope(a.Namespace, "tenant"), cached, nil)

	got := c.MountFailure(a.Namespace, a.UID)
	if !strings.HasPrefix(got, "éé") || len(got) > maxEventMessage || !utf8.ValidString(got) {
		t.Errorf("MountFailure: got %d bytes %.40q..., want the pod's own Event cut to at most %d bytes of valid UTF-8", len(got), got, maxEventMessage)
	}
	if got := c.MountFailure("tenant", a.UID); !strings.Contains(got, "evil") {
		t.Errorf("MountFailure in tenant: got %q, want the Event of that namespace", got)
	}
}

// TestMountEventsSelectTheKubeletsFailedMounts: the Event cache lists and
// watches the FailedMount Events of pods alone, selected by the API
// server, and trims them.
func TestMountEventsSelectTheKubeletsFailedMounts(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	p := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	e := memcachedtest.FailedMountEvent(p, memcachedtest.MissingSecret("tls", "cert"), 3, at(0), at(20))
	api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
		return &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, Items: []corev1.Event{*e}}
	})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	list, err := mountEventListWatch(kube, "test").List(metav1.ListOptions{})

	if err != nil {
		t.Fatal(err)
	}
	if got := list.(*corev1.EventList).Items; len(got) != 1 || got[0].Count != 0 || got[0].Source != (corev1.EventSource{}) || got[0].Message != e.Message {
		t.Errorf("listed events: got %+v, want the one trimmed", got)
	}
	reqs := api.Got()
	if len(reqs) != 1 || reqs[0].Path != "/api/v1/namespaces/test/events" {
		t.Fatalf("requests: got %+v, want one list of the namespace's events", reqs)
	}
	q, err := url.ParseQuery(reqs[0].Query)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.Get("fieldSelector"), "involvedObject.kind=Pod,reason=FailedMount"; got != want {
		t.Errorf("fieldSelector: got %q, want %q", got, want)
	}
}

func TestMountEventEnqueuesThePodsMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	p := memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)
	missing := memcachedtest.MissingSecret("tls", "cert")
	e := memcachedtest.FailedMountEvent(p, missing, 1, at(0), at(0))
	replaced := p.DeepCopy()
	replaced.UID = "uid-example-a-2"
	tests := []struct {
		name   string
		cached []runtime.Object
		obj    interface{}
		want   []string
	}{
		{name: "an Event of a cached pod", cached: []runtime.Object{p}, obj: e, want: []string{"test/example"}},
		{name: "a deleted Event's tombstone", cached: []runtime.Object{p}, obj: cache.DeletedFinalStateUnknown{Key: "test/" + e.Name, Obj: e}, want: []string{"test/example"}},
		{name: "an Event of a pod the cache has not seen: its arrival reconciles", obj: e},
		{name: "an Event of an earlier pod of the same name", cached: []runtime.Object{replaced}, obj: e},
		{name: "not an Event", cached: []runtime.Object{p}, obj: p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestCachedClient(t, tt.cached, nil)
			var got []string

			c.enqueuePodOwner(tt.obj, func(namespace, name string) { got = append(got, namespace+"/"+name) })

			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
