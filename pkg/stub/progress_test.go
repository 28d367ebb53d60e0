package stub

import (
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressOnly(tt.stored, tt.next); got != tt.want {
				t.Errorf("progressOnly = %v, want %v\nstored: %+v\nnext:   %+v", got, tt.want, tt.stored, tt.next)
			}
		})
	}
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
