package stub

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
)

var deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}

// quotaExceeded is how the API server refuses a Deployment that a
// ResourceQuota of count/deployments.apps: 0 does not allow.
var quotaExceeded = apierrors.NewForbidden(deployments, "example", errors.New(
	"exceeded quota: no-deployments, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0"))

// labelTooLong is how the API server refuses a Deployment whose
// memcached_cr label would be longer than 63 characters.
var labelTooLong = apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "example", field.ErrorList{
	field.Invalid(field.NewPath("metadata", "labels"), "example", "must be no more than 63 bytes"),
})

// forbidden is how the API server refuses a request that RBAC does not allow.
func forbidden(verb string) error {
	return apierrors.NewForbidden(deployments, "example", fmt.Errorf(
		"User \"system:serviceaccount:test:memcached-operator\" cannot %s resource \"deployments\" in API group \"apps\" in the namespace \"test\"", verb))
}

// storeStatus stands in for the API server and the cache: the next event
// brings m with the status that the handler wrote last, if any.
func (f *fixture) storeStatus(m *v1alpha1.Memcached) {
	if n := len(f.client.statuses); n > 0 {
		m.Status = f.client.statuses[n-1]
	}
}

func TestReportsFailedSteps(t *testing.T) {
	tests := []struct {
		name   string
		failOn string
		err    error
		// replicas, unless 0, are those of the Memcached's existing Deployment.
		replicas int32
		reason   string
		message  string
	}{
		{
			name: "create refused by a quota", failOn: "create deployment", err: quotaExceeded,
			reason:  memcached.ReasonDeploymentCreateFailed,
			message: "failed to create deployment test/example: " + quotaExceeded.Error(),
		},
		{
			name: "create refused as invalid", failOn: "create deployment", err: labelTooLong,
			reason:  memcached.ReasonDeploymentCreateFailed,
			message: "failed to create deployment test/example: " + labelTooLong.Error(),
		},
		{
			name: "read forbidden", failOn: "get deployment", err: forbidden("get"),
			reason:  memcached.ReasonDeploymentReadFailed,
			message: "failed to get deployment test/example: " + forbidden("get").Error(),
		},
		{
			name: "scale forbidden", failOn: "scale deployment", err: forbidden("patch"), replicas: 1,
			reason:  memcached.ReasonDeploymentScaleFailed,
			message: "failed to scale deployment test/example to 3: " + forbidden("patch").Error(),
		},
		{
			name: "pods cannot be listed", failOn: "list pods", err: errors.New("index missing"), replicas: 3,
			reason:  memcached.ReasonPodListFailed,
			message: "failed to list pods of memcached test/example: index missing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 3)
			objects := []runtime.Object{m}
			if tt.replicas != 0 {
				objects = append(objects, memcachedtest.OwnedDeployment(m, tt.replicas))
			}
			f := newFixture(t, objects...)
			f.client.failOn[tt.failOn] = tt.err

			err := f.handle(m, false)

			if err == nil || err.Error() != tt.message {
				t.Errorf("Handle: got error %v, want %q", err, tt.message)
			}
			if len(f.client.statuses) != 1 {
				t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
			}
			status := f.client.statuses[0]
			degraded := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded)
			want := v1alpha1.MemcachedCondition{
				Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue,
				Reason: tt.reason, Message: tt.message, LastTransitionTime: memcachedtest.Now, ObservedGeneration: m.Generation,
			}
			if degraded == nil || *degraded != want {
				t.Errorf("Degraded:\n got %+v\nwant %+v", degraded, want)
			}
			if status.Nodes == nil {
				t.Errorf("status.nodes is nil, want a list: the schema refuses null")
			}
			if got, want := f.events(), []string{"Warning " + tt.reason + " " + tt.message}; !reflect.DeepEqual(got, want) {
				t.Errorf("events:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestFailureKeepsReportingPods(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t, inSync(m, 1, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true))...)
	f.client.failOn["scale deployment"] = forbidden("patch")

	if err := f.handle(m, false); err == nil {
		t.Fatal("Handle: got nil, want the scale failure")
	}

	if len(f.client.statuses) != 1 {
		t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
	}
	status := f.client.statuses[0]
	if !reflect.DeepEqual(status.Nodes, []string{"example-a"}) || status.ReadyReplicas != 1 {
		t.Errorf("pods: got nodes %v with %d ready, want [example-a] with 1 ready", status.Nodes, status.ReadyReplicas)
	}
	if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Message != "1/3 pods ready" {
		t.Errorf("Available: got %+v, want False with 1/3 pods ready", c)
	}
}

func TestRepeatedFailureIsReportedOnce(t *testing.T) {
	const retries = 5
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t, m)
	f.client.failOn["create deployment"] = quotaExceeded

	for i := 0; i < retries; i++ {
		f.storeStatus(m)
		f.client.actions = nil
		f.handler.now = func() metav1.Time { return metav1.NewTime(memcachedtest.Now.Add(time.Duration(i) * time.Minute)) }

		if err := f.handle(m, false); err == nil {
			t.Fatalf("retry %d: Handle returned nil, want the create failure", i)
		}
	}

	// The last retry only tried again and found the failure reported.
	checkActions(t, f.client.actions, []string{
		"get deployment test/example",
		"create deployment test/example",
		"list pods test app=memcached,memcached_cr=example",
		"get service test/example",
	})
	if len(f.client.statuses) != 1 {
		t.Errorf("wrote status %d times in %d attempts, want 1", len(f.client.statuses), retries)
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+memcached.ReasonDeploymentCreateFailed+" ") {
		t.Errorf("events of %d attempts: got %q, want one Warning %s", retries, got, memcached.ReasonDeploymentCreateFailed)
	}
}

func TestChangedFailureIsReportedAgain(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t, m)
	f.client.failOn["create deployment"] = quotaExceeded
	_ = f.handle(m, false)
	f.storeStatus(m)
	f.client.failOn["create deployment"] = forbidden("create")

	if err := f.handle(m, false); err == nil {
		t.Fatal("Handle: got nil, want the create failure")
	}

	if len(f.client.statuses) != 2 {
		t.Fatalf("wrote status %d times, want 2", len(f.client.statuses))
	}
	if c := memcached.FindCondition(f.client.statuses[1].Conditions, v1alpha1.MemcachedDegraded); c == nil || !strings.Contains(c.Message, "cannot create resource") {
		t.Errorf("Degraded: got %+v, want the RBAC message", c)
	}
	if got := f.events(); len(got) != 2 || got[0] == got[1] {
		t.Errorf("events: got %q, want two different Warnings", got)
	}
}

func TestFailureClearsOnceFixed(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	f.client.failOn["create deployment"] = quotaExceeded
	_ = f.handle(m, false)
	f.storeStatus(m)
	f.events()
	delete(f.client.failOn, "create deployment")
	later := metav1.NewTime(memcachedtest.Now.Add(time.Minute))
	f.handler.now = func() metav1.Time { return later }

	if err := f.handle(m, false); err != nil {
		t.Fatalf("reconcile that creates the deployment: %v", err)
	}
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("reconcile after the create: %v", err)
	}

	if len(f.client.statuses) != 2 {
		t.Fatalf("wrote status %d times, want 2", len(f.client.statuses))
	}
	want := v1alpha1.MemcachedCondition{
		Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse,
		Reason: memcached.ReasonPodsStarting, Message: "0/2 pods ready", LastTransitionTime: later, ObservedGeneration: m.Generation,
	}
	if c := memcached.FindCondition(f.client.statuses[1].Conditions, v1alpha1.MemcachedDegraded); c == nil || *c != want {
		t.Errorf("Degraded:\n got %+v\nwant %+v", c, want)
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none: a cleared failure needs no Event", got)
	}
}

func TestFailedStatusWriteIsAnEvent(t *testing.T) {
	writeErr := apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.Resource + "/status"}, "example", errors.New("RBAC says no"))
	statusEvent := "Warning " + memcached.ReasonStatusUpdateFailed + " failed to update status of memcached test/example: " + writeErr.Error()
	createFailure := "failed to create deployment test/example: " + quotaExceeded.Error()
	tests := []struct {
		name       string
		failCreate bool
		wantErr    string
		wantEvents []string
	}{
		{
			name:       "after the steps succeeded",
			wantErr:    "failed to update status of memcached test/example: " + writeErr.Error(),
			wantEvents: []string{statusEvent},
		},
		{
			name:       "reporting a failed step",
			failCreate: true,
			wantErr:    createFailure + "; failed to update status of memcached test/example: " + writeErr.Error(),
			wantEvents: []string{statusEvent, "Warning " + memcached.ReasonDeploymentCreateFailed + " " + createFailure},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			f := newFixture(t, inSync(m, 1)...)
			f.client.failOn["update memcached/status"] = writeErr
			if tt.failCreate {
				f = newFixture(t, m)
				f.client.failOn["update memcached/status"] = writeErr
				f.client.failOn["create deployment"] = quotaExceeded
			}

			err := f.handle(m, false)

			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Handle: got error %v, want %q", err, tt.wantErr)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events:\n got %q\nwant %q", got, tt.wantEvents)
			}
		})
	}
}

func TestStaleStatusWriteRecordsNoFailureEvent(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, m)
	f.client.failOn["create deployment"] = quotaExceeded
	f.client.failOn["update memcached/status"] = apierrors.NewConflict(
		schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.Resource}, "example", errors.New("modified"))

	if err := f.handle(m, false); !IsStale(err) {
		t.Fatalf("reconcile: got %v, want a stale write, which is retried quietly", err)
	}

	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none: the retry on the newer Memcached decides", got)
	}
	if n := f.handler.queue.NumRequeues("test/example"); n != 1 {
		t.Errorf("requeues: got %d, want the memcached requeued", n)
	}
}

func TestForeignDeploymentIsReportedOnce(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	foreign := memcachedtest.OwnedDeployment(m, 1)
	foreign.OwnerReferences = nil
	f := newFixture(t, m, foreign)

	for i := 0; i < 3; i++ {
		f.storeStatus(m)
		if err := f.handle(m, false); err == nil {
			t.Fatalf("attempt %d: Handle returned nil, want the foreign deployment reported", i)
		}
	}

	if len(f.client.statuses) != 1 {
		t.Errorf("wrote status %d times, want 1", len(f.client.statuses))
	}
	if got := f.events(); len(got) != 1 {
		t.Errorf("events: got %q, want one", got)
	}
}

// countingSink is an EventSink that keeps the Events it is sent, as the
// API server would: Create adds one, Patch updates one.
type countingSink struct {
	mu      sync.Mutex
	creates int
	patches int
	count   int32 // the count of the last Event written
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates++
	s.count = e.Count
	return e, nil
}

func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return e, nil
}

func (s *countingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patches++
	s.count = e.Count
	return e, nil
}

func (s *countingSink) get() (creates, patches int, count int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates, s.patches, s.count
}

// TestRecorderFoldsIdenticalEvents checks what the status-write fallback
// relies on: the recorder main.go builds (client-go 1.11's broadcaster and
// its event correlator) turns identical Events about one object into one
// Event with a count, not into one Event each.
func TestRecorderFoldsIdenticalEvents(t *testing.T) {
	const repeats = 20
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{}
	broadcaster := record.NewBroadcaster()
	defer broadcaster.StartRecordingToSink(sink).Stop()
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "memcached-operator"})
	m := memcachedtest.NewMemcached("example", 1)

	for i := 0; i < repeats; i++ {
		recorder.Event(m, corev1.EventTypeWarning, memcached.ReasonStatusUpdateFailed, "failed to update status of memcached test/example: forbidden")
	}

	err := wait.PollImmediate(10*time.Millisecond, 10*time.Second, func() (bool, error) {
		creates, patches, _ := sink.get()
		return creates+patches == repeats, nil
	})
	creates, patches, count := sink.get()
	if err != nil {
		t.Fatalf("the sink got %d creates and %d patches, want %d writes in all", creates, patches, repeats)
	}
	if creates != 1 || count != repeats {
		t.Errorf("got %d Events created, the last with count %d; want 1 Event with count %d", creates, count, repeats)
	}
}

// TestReportsWhatTheDeploymentControllerKnows: the conditions of the
// Memcached's Deployment reach its status through the reconcile, with the
// controller's reason and message, and without a Warning Event: no step of
// the operator failed.
func TestReportsWhatTheDeploymentControllerKnows(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	d := memcachedtest.OwnedDeployment(m, 2)
	d.Status.Conditions = []appsv1.DeploymentCondition{memcachedtest.ReplicaFailure(memcachedtest.QuotaRefusal)}
	objects := inSync(m, 2)
	objects[1] = d
	f := newFixture(t, objects...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, steady("update memcached/status test/example"))
	want := v1alpha1.MemcachedCondition{
		Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: memcachedtest.QuotaRefusal, LastTransitionTime: memcachedtest.Now,
		ObservedGeneration: m.Generation,
	}
	if c := memcached.FindCondition(f.client.statuses[0].Conditions, v1alpha1.MemcachedDegraded); c == nil || *c != want {
		t.Errorf("Degraded:\n got %+v\nwant %+v", c, want)
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none", got)
	}
}
