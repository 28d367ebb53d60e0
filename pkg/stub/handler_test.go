package stub

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
)

// fixture preloads a fake client, runs one event through a Handler and
// keeps what the handler did for the test to check.
type fixture struct {
	t        *testing.T
	client   *fakeClient
	recorder *record.FakeRecorder
	handler  *Handler
}

// newFixture returns a fixture whose client holds objects and whose handler
// has been delivered the Memcached resources among them, as the SDK would.
func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	f := &fixture{t: t, client: newFakeClient(objects...), recorder: record.NewFakeRecorder(10)}
	f.handler = NewHandler(f.client, f.recorder, memcachedtest.Image)
	f.handler.UseSidecarImage(memcachedtest.SidecarImage)
	f.handler.now = func() metav1.Time { return memcachedtest.Now }
	for k, m := range f.client.memcacheds {
		f.handler.memcacheds.store(k, m.DeepCopy())
	}
	return f
}

// handle delivers an SDK event to the handler and, when it queued a
// reconcile, runs it as a worker would and returns its error.
func (f *fixture) handle(obj sdk.Object, deleted bool) error {
	if err := f.handler.Handle(context.Background(), sdk.Event{Object: obj, Deleted: deleted}); err != nil {
		f.t.Fatalf("Handle: got %v, want nil: the handler's queue retries, not the SDK", err)
	}
	return f.reconcileNext()
}

// reconcileNext runs the next queued reconcile, if any, as a worker would,
// and returns its error.
func (f *fixture) reconcileNext() error {
	if f.handler.queue.Len() == 0 {
		return nil
	}
	item, _ := f.handler.queue.Get()
	defer f.handler.queue.Done(item)
	err := f.handler.reconcileKey(item.(string))
	f.handler.handleResult(f.handler.queue, item.(string), err)
	return err
}

// waitQueued waits up to 5 s for the handler's queue to hold a reconcile
// that was queued for later, such as what, and fails the test without one.
func (f *fixture) waitQueued(what string) {
	f.t.Helper()
	err := wait.PollImmediate(5*time.Millisecond, 5*time.Second, func() (bool, error) {
		return f.handler.queue.Len() > 0, nil
	})
	if err != nil {
		f.t.Fatalf("%s never came: %v", what, err)
	}
}

// events drains the Events the handler recorded.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// inSync returns m with the children the operator made for it, with
// replicas in the Deployment: a Deployment, a Service and, with more than
// one pod, a budget; and then more, such as pods.
func inSync(m *v1alpha1.Memcached, replicas int32, more ...runtime.Object) []runtime.Object {
	objs := []runtime.Object{m, memcachedtest.OwnedDeployment(m, replicas), memcachedtest.OwnedService(m)}
	if memcached.WantsPodDisruptionBudget(m) {
		objs = append(objs, memcachedtest.OwnedBudget(m))
	}
	return append(objs, more...)
}

// inSyncStatus is the status the handler writes for m with the named ready
// pods.
func inSyncStatus(m *v1alpha1.Memcached, nodes ...string) v1alpha1.MemcachedStatus {
	return v1alpha1.MemcachedStatus{
		Nodes:              append([]string{}, nodes...),
		Replicas:           int32(len(nodes)),
		ReadyReplicas:      int32(len(nodes)),
		Selector:           "app=memcached,memcached_cr=" + m.Name,
		ObservedGeneration: m.Generation,
		ServiceName:        m.Name,
		Conditions: []v1alpha1.MemcachedCondition{
			{
				Type: v1alpha1.MemcachedAvailable, Status: corev1.ConditionTrue, Reason: memcached.ReasonAllReplicasReady,
				Message: fmt.Sprintf("%d/%d pods ready", len(nodes), m.Spec.Size), LastTransitionTime: memcachedtest.Now,
				ObservedGeneration: m.Generation,
			},
			{
				Type: v1alpha1.MemcachedProgressing, Status: corev1.ConditionFalse, Reason: memcached.ReasonComplete,
				Message: fmt.Sprintf("%d/%d pods ready", len(nodes), m.Spec.Size), LastTransitionTime: memcachedtest.Now,
				ObservedGeneration: m.Generation,
			},
			{Type: v1alpha1.MemcachedDegraded, Status: corev1.ConditionFalse, Reason: memcached.ReasonAsExpected, LastTransitionTime: memcachedtest.Now, ObservedGeneration: m.Generation},
		},
	}
}

// steady returns the calls of a reconcile of example whose children are
// all in place: its cache reads, then writes.
func steady(writes ...string) []string {
	return append([]string{
		"get deployment test/example",
		"get service test/example",
		"get poddisruptionbudget test/example",
		"get networkpolicy test/example",
		"list pods test app=memcached,memcached_cr=example",
		"get service test/example",
	}, writes...)
}

// writesDeployment returns the calls of a reconcile of example whose
// Service and PodDisruptionBudget are in place and whose Deployment it
// changes with the call write (an apply, a patch or a scale): the
// Deployment's read and that write, the other cache reads, then the status
// update.
func writesDeployment(write string) []string {
	return []string{
		"get deployment test/example",
		write,
		"get service test/example",
		"get poddisruptionbudget test/example",
		"get networkpolicy test/example",
		"list pods test app=memcached,memcached_cr=example",
		"get service test/example",
		"update memcached/status test/example",
	}
}

// createActions are the calls of a reconcile that creates the children of
// example, of size 2 or more, without a NetworkPolicy, which it looks for
// in the cache all the same; the status waits for the next reconcile,
// which it queues.
var createActions = []string{
	"get deployment test/example",
	"create deployment test/example",
	"get service test/example",
	"create service test/example",
	"get poddisruptionbudget test/example",
	"create poddisruptionbudget test/example",
	"get networkpolicy test/example",
}

func TestCreatesDeployment(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t, m)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, createActions)
	f.client.actions = nil
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("the reconcile after the create: %v", err)
	}
	checkActions(t, f.client.actions, steady("update memcached/status test/example"))
	if len(f.client.created) != 3 {
		t.Fatalf("created %d objects, want a Deployment, a Service and a PodDisruptionBudget", len(f.client.created))
	}
	want, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err == nil {
		err = memcached.RecordSpec(want, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, obj := range []runtime.Object{memcached.NewService(m), memcached.NewPodDisruptionBudget(m)} {
		manifest, err := memcached.ToManifest(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.client.created[i+1], manifest) {
			t.Errorf("created %s:\n got %v\nwant %v", manifest.GetKind(), f.client.created[i+1], manifest)
		}
	}
	if !reflect.DeepEqual(f.client.created[0], want) {
		t.Errorf("created deployment:\n got %v\nwant %v", f.client.created[0], want)
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none: the Deployment and the status say it", got)
	}
}

func TestScalesToSpecSize(t *testing.T) {
	tests := []struct {
		name     string
		size     int32
		replicas int32
		want     string
	}{
		{name: "up", size: 3, replicas: 1, want: "scale deployment test/example 3"},
		{name: "down", size: 1, replicas: 3, want: "scale deployment test/example 1"},
		{name: "to zero", size: 0, replicas: 2, want: "scale deployment test/example 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)
			f := newFixture(t, inSync(m, tt.replicas)...)

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}

			checkActions(t, f.client.actions, writesDeployment(tt.want))
			wantEvent := fmt.Sprintf("Normal DeploymentScaled Scaled deployment example to %d replicas", tt.size)
			if got := f.events(); !reflect.DeepEqual(got, []string{wantEvent}) {
				t.Errorf("events: got %q, want %q", got, wantEvent)
			}
		})
	}
}

func TestWritesSortedNodes(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t, inSync(m, 3,
		memcachedtest.NewPod(m, "example-c", corev1.PodRunning, true),
		memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
		memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true),
		memcachedtest.NewPod(memcachedtest.NewMemcached("other", 1), "other-a", corev1.PodRunning, true),
	)...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	if len(f.client.statuses) != 1 {
		t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
	}
	if got, want := f.client.statuses[0], inSyncStatus(m, "example-a", "example-b", "example-c"); !reflect.DeepEqual(got, want) {
		t.Errorf("status:\n got %+v\nwant %+v", got, want)
	}
}

func TestWritesNothingWhenInSync(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Status = inSyncStatus(m, "example-a", "example-b")
	f := newFixture(t, inSync(m, 2,
		memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true),
		memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
	)...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, steady())
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none", got)
	}
}

func TestReportsCrashLoopingPods(t *testing.T) {
	tests := []struct {
		name string
		// next is the pod's container status at the second event.
		next corev1.ContainerStatus
	}{
		{name: "identical event", next: memcachedtest.CrashLooping("example-a", "10s", 1)},
		{name: "kubelet doubled its back-off", next: memcachedtest.CrashLooping("example-a", "20s", 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			f := newFixture(t, inSync(m, 1,
				memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, false), memcachedtest.CrashLooping("example-a", "10s", 1)))...)

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}

			checkActions(t, f.client.actions, steady("update memcached/status test/example"))
			if len(f.client.statuses) != 1 {
				t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
			}
			status := f.client.statuses[0]
			if status.ReadyReplicas != 0 || !reflect.DeepEqual(status.Nodes, []string{"example-a"}) {
				t.Errorf("pods: got nodes %v with %d ready, want [example-a] with 0 ready", status.Nodes, status.ReadyReplicas)
			}
			degraded := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded)
			if degraded == nil || degraded.Status != corev1.ConditionTrue || degraded.Reason != "CrashLoopBackOff" ||
				!strings.HasPrefix(degraded.Message, "pod example-a: container memcached: ") {
				t.Errorf("Degraded: got %+v, want True reason CrashLoopBackOff about pod example-a, container memcached", degraded)
			}
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonPodsNotReady {
				t.Errorf("Available: got %+v, want False reason %s", c, memcached.ReasonPodsNotReady)
			}

			// The API server now stores that status, and the next event comes.
			m.Status = status
			f.client.pods[0].Status.ContainerStatuses = []corev1.ContainerStatus{tt.next}
			f.client.actions = nil
			f.handler.now = func() metav1.Time { return metav1.NewTime(memcachedtest.Now.Add(time.Minute)) }

			if err := f.handle(m, false); err != nil {
				t.Fatalf("second Handle: %v", err)
			}

			checkActions(t, f.client.actions, steady())
		})
	}
}

func TestLeavesForeignDeploymentAlone(t *testing.T) {
	tests := []struct {
		name  string
		owner []metav1.OwnerReference
	}{
		{name: "no owner"},
		{name: "another controller", owner: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "someone", UID: "uid-someone", Controller: boolPtr(true),
		}}},
		{name: "same name but another uid", owner: []metav1.OwnerReference{{
			APIVersion: v1alpha1.APIVersion(), Kind: v1alpha1.Kind, Name: "example", UID: "uid-of-a-deleted-memcached", Controller: boolPtr(true),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 3)
			foreign := memcachedtest.OwnedDeployment(m, 1)
			foreign.OwnerReferences = tt.owner
			// The pod's crash loop must not hide that the name is taken.
			crashing := memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-a", corev1.PodRunning, false), memcachedtest.CrashLooping("example-a", "10s", 1))
			f := newFixture(t, m, foreign, crashing)

			err := f.handle(m, false)

			if err == nil || !strings.Contains(err.Error(), "not controlled by memcached example") {
				t.Errorf("Handle: got error %v, want one about the foreign deployment", err)
			}
			checkActions(t, f.client.actions, []string{
				"get deployment test/example",
				// The API server confirms what the cache shows.
				"read deployment test/example",
				"update memcached/status test/example",
			})
			events := f.events()
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+memcached.ReasonDeploymentNotOwned+" ") {
				t.Errorf("events: got %q, want one Warning %s", events, memcached.ReasonDeploymentNotOwned)
			}
			if len(f.client.statuses) != 1 {
				t.Fatalf("wrote status %d times, want 1", len(f.client.statuses))
			}
			status := f.client.statuses[0]
			if len(status.Nodes) != 0 || status.Nodes == nil {
				t.Errorf("status.nodes: got %#v, want an empty list: no pod is the memcached's", status.Nodes)
			}
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonDeploymentNotOwned {
				t.Errorf("Degraded: got %+v, want True reason %s", c, memcached.ReasonDeploymentNotOwned)
			}
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonDeploymentNotOwned {
				t.Errorf("Available: got %+v, want False reason %s", c, memcached.ReasonDeploymentNotOwned)
			}
		})
	}
}

func TestIgnoresDeletedMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	f := newFixture(t)

	if err := f.handle(m, true); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, nil)
}

func TestSkipsMemcachedBeingDeleted(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	now := metav1.Now()
	m.DeletionTimestamp = &now
	f := newFixture(t, m)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, nil)
}

func TestChildChangesReconcileTheirMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Status = inSyncStatus(m, "example-a", "example-b")
	podA := memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true)
	podB := memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)
	tests := []struct {
		name    string
		objects []runtime.Object
		want    []string
		// requeued is whether the reconcile queues another one.
		requeued bool
	}{
		{
			name:     "deleted deployment is recreated",
			objects:  []runtime.Object{m, podA, podB},
			want:     createActions,
			requeued: true,
		},
		{
			name:    "edited replicas are restored",
			objects: inSync(m, 5, podA, podB),
			want: []string{
				"get deployment test/example",
				"scale deployment test/example 2",
				"get service test/example",
				"get poddisruptionbudget test/example",
				"get networkpolicy test/example",
				"list pods test app=memcached,memcached_cr=example",
				"get service test/example",
			},
		},
		{
			name:    "deleted pod updates status",
			objects: inSync(m, 2, podA),
			want:    steady("update memcached/status test/example"),
		},
		{
			name:    "children of a deleted memcached are left to the garbage collector",
			objects: []runtime.Object{memcachedtest.OwnedDeployment(m, 2), podA},
			// The cache read updates the pacing's index; nothing is written.
			want: []string{"get deployment test/example"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objects...)
			f.handler.EnqueueMemcached("test", "example")
			f.handler.EnqueueMemcached("test", "example")

			if !f.handler.processNextItem(f.handler.queue) {
				t.Fatal("queue shut down")
			}

			checkActions(t, f.client.actions, tt.want)
			want := 0
			if tt.requeued {
				want = 1
			}
			if n := f.handler.queue.Len(); n != want {
				t.Errorf("queue holds %d items after a success, want %d: repeated requests must collapse", n, want)
			}
		})
	}
}

func TestChildChangeIsRetriedOnError(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	f.client.failOn["create deployment"] = errors.New("boom")
	f.handler.EnqueueMemcached("test", "example")

	f.handler.processNextItem(f.handler.queue)

	if got := f.handler.queue.NumRequeues("test/example"); got != 1 {
		t.Errorf("requeues: got %d, want 1", got)
	}
}

func TestStaleStatusWriteIsRetriedThroughTheQueue(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, inSync(m, 1)...)
	f.client.failOn["update memcached/status"] = apierrors.NewConflict(
		schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.Resource}, "example", errors.New("modified"))

	if err := f.handle(m, false); !IsStale(err) {
		t.Fatalf("reconcile: got %v, want a stale write", err)
	}
	if got := f.handler.queue.NumRequeues("test/example"); got != 1 {
		t.Errorf("requeues: got %d, want the memcached requeued with backoff", got)
	}
	if evs := f.events(); len(evs) != 0 {
		t.Errorf("events: got %q, want none: a conflict is no failure", evs)
	}
}

func TestStatusWriteForDeletedMemcachedIsNoError(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, inSync(m, 1)...)
	f.client.failOn["update memcached/status"] = apierrors.NewNotFound(
		schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.Resource}, "example")

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: got %v, want nil: a Memcached deleted during its reconcile needs nothing more", err)
	}
	if evs := f.events(); len(evs) != 0 {
		t.Errorf("events: got %q, want none", evs)
	}
	if n := f.handler.queue.Len(); n != 0 {
		t.Errorf("queue: got %d items, want none", n)
	}
}

func TestToleratesConcurrentCreate(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, m, memcachedtest.OwnedService(m))
	// Another reconcile creates the Deployment between our read and our create.
	first := true
	f.handler.client = &racingClient{fakeClient: f.client, beforeCreate: func() {
		if first {
			first = false
			f.client.deployments[key(m.Namespace, m.Name)] = memcachedtest.OwnedDeployment(m, 1)
		}
	}}

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, []string{
		"get deployment test/example",
		"create deployment test/example",
		"read deployment test/example",
		"get service test/example",
		"get poddisruptionbudget test/example",
		"get networkpolicy test/example",
		"list pods test app=memcached,memcached_cr=example",
		"get service test/example",
		"update memcached/status test/example",
	})
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none: this reconcile created nothing", got)
	}
}

// racingClient runs beforeCreate just before each create of a Deployment.
type racingClient struct {
	*fakeClient
	beforeCreate func()
}

func (r *racingClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	r.beforeCreate()
	return r.fakeClient.ApplyNew(k, manifest)
}

func TestReturnsWrappedErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		failOn string
		want   string
	}{
		{failOn: "get deployment", want: "failed to get deployment test/example: boom"},
		{failOn: "create deployment", want: "failed to create deployment test/example: boom"},
		{failOn: "scale deployment", want: "failed to scale deployment test/example to 3: boom"},
		{failOn: "list pods", want: "failed to list pods of memcached test/example: boom"},
		{failOn: "update memcached/status", want: "failed to update status of memcached test/example: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.failOn, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 3)
			objects := []runtime.Object{m}
			switch tt.failOn {
			case "scale deployment":
				objects = append(objects, memcachedtest.OwnedDeployment(m, 1))
			case "list pods", "update memcached/status":
				objects = append(objects, memcachedtest.OwnedDeployment(m, 3))
			}
			f := newFixture(t, objects...)
			f.client.failOn[tt.failOn] = boom

			err := f.handle(m, false)

			if err == nil || err.Error() != tt.want {
				t.Errorf("got error %v, want %q", err, tt.want)
			}
		})
	}
}

func boolPtr(b bool) *bool { return &b }

func TestStatusWriteUpdatesTheStoredMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	m.ResourceVersion = "1"
	f := newFixture(t, inSync(m, 1, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true))...)

	if err := f.handle(m, false); err != nil {
		t.Fatal(err)
	}

	// The next reconcile, before the SDK delivers the write, starts from it.
	got, ok := f.handler.memcacheds.get("test/example")
	if !ok || got.ResourceVersion == "1" || !reflect.DeepEqual(got.Status, f.client.statuses[0]) {
		t.Errorf("stored memcached: got %+v, want the version the status write returned", got)
	}
}

func TestMemcachedStoreUpdateKeepsWhatTheSDKDeliveredSince(t *testing.T) {
	version := func(rv string, size int32) *v1alpha1.Memcached {
		m := memcachedtest.NewMemcached("example", size)
		m.ResourceVersion = rv
		return m
	}
	tests := []struct {
		name string
		// stored is what the store holds when the write returns; nil for
		// a Memcached whose deletion the SDK has delivered.
		stored *v1alpha1.Memcached
		want   *v1alpha1.Memcached
	}{
		{name: "nothing newer", stored: version("1", 1), want: version("2", 1)},
		{name: "a newer change delivered meanwhile", stored: version("3", 5), want: version("3", 5)},
		{name: "deleted meanwhile", stored: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemcachedStore()
			if tt.stored != nil {
				s.store("test/example", tt.stored)
			}

			// A status write made from version 1 returned version 2.
			s.update("test/example", "1", version("2", 1))

			got, ok := s.get("test/example")
			if tt.want == nil {
				if ok {
					t.Errorf("store holds %+v, want nothing: the update resurrected a deleted memcached", got)
				}
				return
			}
			if !ok || got.ResourceVersion != tt.want.ResourceVersion || got.Spec.Size != tt.want.Spec.Size {
				t.Errorf("store holds %+v, want version %s of size %d", got, tt.want.ResourceVersion, tt.want.Spec.Size)
			}
		})
	}
}

func TestChildUpdatesAreBatched(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, inSync(m, 2)...)
	f.handler.BatchChildUpdates(50 * time.Millisecond)

	for range 5 {
		f.handler.EnqueueMemcached("test", "example")
	}

	if n := f.handler.queue.Len(); n != 0 {
		t.Fatalf("queue holds %d items at once, want none before the batch period", n)
	}
	f.waitQueued("the batched reconcile")
	if n := f.handler.queue.Len(); n != 1 {
		t.Errorf("queue holds %d items after the batch period, want the 5 requests as 1", n)
	}
}
