package stub

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// statusOf returns the status the handler computes for m over pods.
func statusOf(m *v1alpha1.Memcached, pods ...*corev1.Pod) v1alpha1.MemcachedStatus {
	return memcached.ComputeStatus(m, memcached.Observation{Pods: pods, TemplateHash: memcachedtest.CurrentHash(m), ServiceName: m.Name}, memcachedtest.Now)
}

func TestProgressOnly(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	starting := []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodPending, false), memcachedtest.NewPod(m, "example-b", corev1.PodPending, false)}
	halfReady := []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodPending, false)}
	ready := []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)}
	crashing := []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
		memcachedtest.WithContainers(memcachedtest.NewPod(m, "example-b", corev1.PodRunning, false), memcachedtest.CrashLooping("example-b", "10s", 1))}

	withStored := func(pods ...*corev1.Pod) *v1alpha1.Memcached {
		stored := m.DeepCopy()
		stored.Status = statusOf(m, pods...)
		return stored
	}
	resized := withStored(ready...)
	resized.Generation, resized.Spec.Size = 2, 3
	// A roll of ready's two pods: both old, then one replaced.
	rollStart := []*corev1.Pod{stalePod(m, "example-a", true), stalePod(m, "example-b", true)}
	rollHalf := []*corev1.Pod{memcachedtest.NewPod(m, "example-c", corev1.PodRunning, true), stalePod(m, "example-b", true)}
	pending := statusOf(m, ready...)
	pending.Conditions = setProgressing(pending.Conditions, corev1.ConditionTrue, memcached.ReasonRollPending)

	tests := []struct {
		name   string
		stored v1alpha1.MemcachedStatus
		next   v1alpha1.MemcachedStatus
		want   bool
	}{
		{name: "a new memcached's first pods", next: statusOf(m, starting...), want: true},
		{name: "a new memcached's pods all ready", next: statusOf(m, ready...), want: false},
		{name: "one more pod ready", stored: statusOf(m, starting...), next: statusOf(m, halfReady...), want: true},
		{name: "the last pod ready", stored: statusOf(m, halfReady...), next: statusOf(m, ready...), want: false},
		{name: "a pod fails", stored: statusOf(m, halfReady...), next: statusOf(m, crashing...), want: false},
		{name: "a ready pod is lost", stored: statusOf(m, ready...), next: statusOf(m, halfReady...), want: false},
		{name: "a new generation", stored: m.Status, next: statusOf(resized, ready...), want: true},
		{name: "a new generation over an observed one", stored: statusOf(m, ready...), next: statusOf(resized, ready...), want: false},
		{name: "a paced roll gets its slot", stored: pending, next: statusOf(m, rollStart...), want: false},
		{name: "a roll's first status", stored: m.Status, next: statusOf(m, rollStart...), want: false},
		{name: "a roll replaces a pod", stored: statusOf(m, rollStart...), next: statusOf(m, rollHalf...), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressOnly(tt.stored, tt.next); got != tt.want {
				t.Errorf("progressOnly = %v, want %v\nstored: %+v\nnext:   %+v", got, tt.want, tt.stored, tt.next)
			}
		})
	}
}

// setProgressing returns conditions with the Progressing condition's
// status and reason replaced.
func setProgressing(conditions []v1alpha1.MemcachedCondition, status corev1.ConditionStatus, reason string) []v1alpha1.MemcachedCondition {
	out := append([]v1alpha1.MemcachedCondition(nil), conditions...)
	for i := range out {
		if out[i].Type == v1alpha1.MemcachedProgressing {
			out[i].Status, out[i].Reason = status, reason
		}
	}
	return out
}

func TestProgressReportsHold(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	starting := statusOf(m, memcachedtest.NewPod(m, "example-a", corev1.PodPending, false))
	halfReady := statusOf(m, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodPending, false))
	ready := statusOf(m, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true))
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := start
	p := newProgressReports(5 * time.Second)
	p.clock = func() time.Time { return now }

	if got := p.hold("test/example", v1alpha1.MemcachedStatus{}, starting); got != 0 {
		t.Errorf("before the Deployment's creation: hold %v, want 0: the operator does not know when the progress began", got)
	}
	p.started("test/example")
	now = start.Add(2 * time.Second)
	if got := p.hold("test/example", v1alpha1.MemcachedStatus{}, starting); got != 3*time.Second {
		t.Errorf("2s after the create: hold %v, want the 3s left of the interval", got)
	}
	if got := p.hold("test/example", v1alpha1.MemcachedStatus{}, ready); got != 0 {
		t.Errorf("all pods ready 2s after the create: hold %v, want 0", got)
	}
	if got := p.hold("test/other", v1alpha1.MemcachedStatus{}, starting); got != 0 {
		t.Errorf("another memcached: hold %v, want 0", got)
	}
	now = start.Add(5 * time.Second)
	if got := p.hold("test/example", v1alpha1.MemcachedStatus{}, starting); got != 0 {
		t.Errorf("an interval after the create: hold %v, want 0", got)
	}
	p.wrote("test/example", starting)
	now = start.Add(6 * time.Second)
	if got := p.hold("test/example", starting, halfReady); got != 4*time.Second {
		t.Errorf("1s after a progress report: hold %v, want 4s", got)
	}
	p.wrote("test/example", ready)
	if got := p.hold("test/example", ready, halfReady); got != 0 {
		t.Errorf("after a settled status: hold %v, want 0", got)
	}
	p.wrote("test/example", starting)
	p.forget("test/example")
	if got := p.hold("test/example", starting, halfReady); got != 0 {
		t.Errorf("after forget: hold %v, want 0", got)
	}
	if got := newProgressReports(0).hold("test/example", starting, halfReady); got != 0 {
		t.Errorf("with an interval of 0: hold %v, want 0", got)
	}
}

// TestNewMemcachedGetsOneStatusWrite follows a Memcached from its create
// until its pods are Ready within the interval: the progress between is
// never written, the end is written at once.
func TestNewMemcachedGetsOneStatusWrite(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	f.handler.ReportProgressEvery(time.Hour)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkActions(t, f.client.actions, createActions)

	f.client.pods = []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodPending, false), memcachedtest.NewPod(m, "example-b", corev1.PodPending, false)}
	if err := f.handler.reconcileKey("test/example"); err != nil {
		t.Fatalf("reconcile with the pods starting: %v", err)
	}
	if len(f.client.statuses) != 0 {
		t.Fatalf("wrote %+v while the pods start, want nothing within the interval", f.client.statuses)
	}

	f.client.pods = []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true)}
	if err := f.handler.reconcileKey("test/example"); err != nil {
		t.Fatalf("reconcile with the pods ready: %v", err)
	}
	if len(f.client.statuses) != 1 {
		t.Fatalf("wrote %d statuses, want one", len(f.client.statuses))
	}
	if c := memcached.FindCondition(f.client.statuses[0].Conditions, v1alpha1.MemcachedProgressing); c == nil || c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonComplete {
		t.Fatalf("wrote Progressing %+v, want False with reason %s", c, memcached.ReasonComplete)
	}
}

// TestHeldProgressIsWrittenLater checks that a held progress report is
// not lost: the reconcile queues itself for the end of the interval, and
// that one writes it.
func TestHeldProgressIsWrittenLater(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	f.handler.ReportProgressEvery(100 * time.Millisecond)
	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	f.client.pods = []*corev1.Pod{memcachedtest.NewPod(m, "example-a", corev1.PodPending, false)}
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("the reconcile the create queued: %v", err)
	}
	if len(f.client.statuses) != 0 {
		t.Fatalf("wrote %+v within the interval, want nothing yet", f.client.statuses)
	}
	if n := f.handler.queue.Len(); n != 0 {
		t.Fatalf("queue holds %d items at once, want the next reconcile only at the end of the interval", n)
	}

	f.waitQueued("the reconcile at the end of the interval")
	if err := f.reconcileNext(); err != nil {
		t.Fatalf("the queued reconcile: %v", err)
	}
	if len(f.client.statuses) != 1 || !inProgress(f.client.statuses[0]) || len(f.client.statuses[0].Nodes) != 1 {
		t.Fatalf("wrote %+v, want the progress: one pod listed, Progressing True", f.client.statuses)
	}
}

// TestARollStartIsWrittenAtOnce follows a paced roll under an interval of
// an hour: a waits for b's slot (RollPending), and once b's roll ends and a
// gets the slot, a's RollingUpdate is written at once, not an hour later.
// The steps of its roll after that are held.
func TestARollStartIsWrittenAtOnce(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	f.handler.ReportProgressEvery(time.Hour)

	f.handleAll(ms[1], ms[0])
	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	if c := f.progressing("a"); c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRollPending {
		t.Fatalf("memcached a: Progressing %s %s, want True %s while b holds the slot", c.Status, c.Reason, memcached.ReasonRollPending)
	}
	if c := f.progressing("b"); c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRollingUpdate {
		t.Fatalf("memcached b: Progressing %s %s, want True %s", c.Status, c.Reason, memcached.ReasonRollingUpdate)
	}

	f.finishRoll(ms[1])
	f.handleAll(ms[1])
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after b's roll patched %v, want %v", got, want)
	}
	c := f.progressing("a")
	if c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRollingUpdate {
		t.Fatalf("memcached a: Progressing %s %s once it has the slot, want True %s written at once", c.Status, c.Reason, memcached.ReasonRollingUpdate)
	}

	// One of a's two old pods replaced: progress only, held.
	f.client.pods = slices.DeleteFunc(f.client.pods, func(p *corev1.Pod) bool { return p.Name == "a-old-a" })
	f.client.pods = append(f.client.pods, memcachedtest.NewPod(ms[0], "a-new-0", corev1.PodRunning, true))
	f.handleAll(f.client.memcacheds["test/a"])
	if now := f.progressing("a"); now.Message != c.Message {
		t.Errorf("memcached a: Progressing message %q after one pod of its roll, want %q held for the interval", now.Message, c.Message)
	}
}
