package stub

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// oldImage is the operator's default image before the change the tests
// roll to memcachedtest.Image.
const oldImage = "example.com/memcached:old"

func TestParseMaxConcurrentRolls(t *testing.T) {
	tests := []struct {
		in      string
		want    intstr.IntOrString
		wantErr bool
	}{
		{in: "1", want: intstr.FromInt(1)},
		{in: "25", want: intstr.FromInt(25)},
		{in: "10%", want: intstr.FromString("10%")},
		{in: "100%", want: intstr.FromString("100%")},
		{in: "0", wantErr: true},
		{in: "-2", wantErr: true},
		{in: "0%", wantErr: true},
		{in: "101%", wantErr: true},
		{in: "1.5%", wantErr: true},
		{in: "all", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseMaxConcurrentRolls(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseMaxConcurrentRolls(%q): got %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMaxConcurrentRolls(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestRollSlots(t *testing.T) {
	tests := []struct {
		limit intstr.IntOrString
		total int
		want  int
	}{
		{limit: intstr.FromString("10%"), total: 0, want: 1},
		{limit: intstr.FromString("10%"), total: 9, want: 1},
		{limit: intstr.FromString("10%"), total: 20, want: 2},
		{limit: intstr.FromString("10%"), total: 21, want: 3},
		{limit: intstr.FromString("100%"), total: 7, want: 7},
		{limit: intstr.FromInt(3), total: 1, want: 3},
		{limit: intstr.FromInt(3), total: 1000, want: 3},
	}
	for _, tt := range tests {
		if got := rollSlots(tt.limit, tt.total); got != tt.want {
			t.Errorf("rollSlots(%v, %d): got %d, want %d", tt.limit.String(), tt.total, got, tt.want)
		}
	}
}

func TestMayStartRoll(t *testing.T) {
	tests := []struct {
		name     string
		inFlight []string
		slots    int
		want     bool
	}{
		{name: "nothing in flight", slots: 1, want: true},
		{name: "a slot free", inFlight: []string{"test/a"}, slots: 2, want: true},
		{name: "every slot held", inFlight: []string{"test/a", "test/b"}, slots: 2, want: false},
		{name: "more held than slots, after the limit was lowered", inFlight: []string{"test/a", "test/b", "test/c"}, slots: 1, want: false},
		{name: "it holds a slot itself", inFlight: []string{"test/a", "test/k"}, slots: 2, want: true},
		{name: "it holds one of too many", inFlight: []string{"test/a", "test/b", "test/k"}, slots: 1, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayStartRoll("test/k", set(tt.inFlight...), tt.slots); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestToWake(t *testing.T) {
	tests := []struct {
		name     string
		waiting  []string
		inFlight []string
		slots    int
		want     []string
	}{
		{name: "no slot free", waiting: []string{"test/c"}, inFlight: []string{"test/a"}, slots: 1},
		{name: "first by name", waiting: []string{"test/d", "test/c", "test/e"}, inFlight: []string{"test/a"}, slots: 3, want: []string{"test/c", "test/d"}},
		{name: "fewer waiting than free", waiting: []string{"test/c"}, slots: 4, want: []string{"test/c"}},
		{name: "one that holds a slot is not woken", waiting: []string{"test/a", "test/c"}, inFlight: []string{"test/a"}, slots: 2, want: []string{"test/c"}},
		{name: "nobody waits", inFlight: []string{"test/a"}, slots: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waiting := slices.Sorted(maps.Keys(set(tt.waiting...)))
			got := toWake(waiting, set(tt.inFlight...), tt.slots)
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestOperatorChanged(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Status.ObservedGeneration = 1
	specChanged := m.DeepCopy()
	specChanged.Generation = 2
	specChanged.Spec.ExtraArgs = []string{"--threads=2"}
	scaled := m.DeepCopy()
	scaled.Generation = 2
	scaled.Spec.Size = 5
	legacy := func(m *v1alpha1.Memcached) *appsv1.Deployment {
		d := staleDeployment(m, 2)
		delete(d.Spec.Template.Annotations, memcached.SpecHashAnnotation)
		return d
	}
	unseen := m.DeepCopy()
	unseen.Generation = 2
	windowed := m.DeepCopy()
	windowed.Generation = 2
	windowed.Spec.MaintenanceWindow = windowOf(tuesday3am)
	tests := []struct {
		name string
		m    *v1alpha1.Memcached
		d    *appsv1.Deployment
		want bool
	}{
		{name: "same spec, another default image", m: m, d: staleDeployment(m, 2), want: true},
		{name: "a spec change", m: specChanged, d: staleDeployment(m, 2), want: false},
		{name: "a scale is no spec change of the template", m: scaled, d: staleDeployment(m, 2), want: true},
		{name: "nor is a new maintenance window", m: windowed, d: staleDeployment(m, 2), want: true},
		{name: "no record, generation already seen", m: m, d: legacy(m), want: true},
		{name: "no record, generation not seen yet", m: unseen, d: legacy(m), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.OperatorChanged(tt.m, tt.d); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPacedRollInFlight(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	marked := memcachedtest.PacedDeployment(m, 2)
	old := func(name string) *corev1.Pod { return stalePod(m, name, true) }
	current := func(name string, ready bool) *corev1.Pod {
		return memcachedtest.NewPod(m, name, corev1.PodRunning, ready)
	}
	terminating := old("example-old-b")
	terminating.DeletionTimestamp = &memcachedtest.Now
	tests := []struct {
		name string
		d    *appsv1.Deployment
		pods []*corev1.Pod
		want bool
	}{
		{name: "not a paced roll", d: memcachedtest.OwnedDeployment(m, 2), pods: []*corev1.Pod{old("example-old-a")}, want: false},
		{name: "just patched", d: marked, pods: []*corev1.Pod{old("example-old-a"), old("example-old-b")}, want: true},
		{name: "half way", d: marked, pods: []*corev1.Pod{old("example-old-a"), current("example-new-a", true), current("example-new-b", false)}, want: true},
		{name: "a new pod that never gets Ready holds it", d: marked, pods: []*corev1.Pod{old("example-old-a"), old("example-old-b"), memcachedtest.WithContainers(current("example-new-a", false), memcachedtest.Waiting("memcached", "ImagePullBackOff", "Back-off pulling image"))}, want: true},
		{name: "the last old pod is terminating", d: marked, pods: []*corev1.Pod{terminating, current("example-new-a", true), current("example-new-b", true)}, want: false},
		{name: "done", d: marked, pods: []*corev1.Pod{current("example-new-a", true), current("example-new-b", true)}, want: false},
		{name: "size 0", d: marked, want: false},
		{name: "the controller is rolling", d: rolled(marked, 2, 2, 1), pods: []*corev1.Pod{old("example-old-a"), current("example-new-a", true)}, want: true},
		{name: "the controller says the roll is over, whatever pods claim its ReplicaSet", d: rolled(marked, 2, 2, 2), pods: []*corev1.Pod{old("example-old-a"), current("example-new-a", true), current("example-new-b", true)}, want: false},
		{name: "the controller has not seen the patch", d: rolled(marked, 1, 2, 2), pods: []*corev1.Pod{old("example-old-a")}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.PacedRollInFlight(tt.d, tt.pods); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// rolled returns a copy of d of generation 2 whose controller has
// observed generation observed and counts replicas pods, updated of them of
// its template.
func rolled(d *appsv1.Deployment, observed int64, replicas, updated int32) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Generation = 2
	d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas = observed, replicas, updated
	return d
}

func TestRollPendingMessage(t *testing.T) {
	got := rollPendingMessage(set("test/e", "test/a", "test/d", "test/b"), 4)
	want := "the operator's pod template changed (a new default image or operator version); waiting for one of 4 roll slots (--max-concurrent-rolls), held by a, b, d and 1 more"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The fixture tests below run a fleet whose Deployments were made with
// oldImage by a handler whose default is now memcachedtest.Image.

// fleet returns Memcacheds of size 2, each settled on oldImage: its
// Deployment, Service, budget and two Ready pods, and a status that has
// seen its generation.
func fleet(names ...string) ([]*v1alpha1.Memcached, []runtime.Object) {
	var ms []*v1alpha1.Memcached
	var objs []runtime.Object
	for _, name := range names {
		m := memcachedtest.NewMemcached(name, 2)
		m.Status.ObservedGeneration = 1
		ms = append(ms, m)
		objs = append(objs, m, staleDeployment(m, 2), memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m),
			stalePod(m, name+"-old-a", true), stalePod(m, name+"-old-b", true))
	}
	return ms, objs
}

// staleDeployment is m's Deployment as a handler with oldImage made it.
func staleDeployment(m *v1alpha1.Memcached, replicas int32) *appsv1.Deployment {
	d := memcached.NewDeployment(m, oldImage, memcachedtest.SidecarImage)
	d.UID = "uid-deployment"
	d.Spec.Replicas = &replicas
	d.Spec.Template.Annotations = map[string]string{memcached.TemplateHashAnnotation: staleHash(m), memcached.SpecHashAnnotation: memcachedtest.MustSpecHash(m)}
	return d
}

// staleHash is the hash of m's pod template with oldImage.
func staleHash(m *v1alpha1.Memcached) string {
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, oldImage, memcachedtest.SidecarImage))
	if err != nil {
		panic(err)
	}
	return memcached.ManifestTemplateHash(u)
}

// stalePod is a pod of m's Deployment of the oldImage template.
func stalePod(m *v1alpha1.Memcached, name string, ready bool) *corev1.Pod {
	p := memcachedtest.NewPod(m, name, corev1.PodRunning, ready)
	p.Annotations[memcached.TemplateHashAnnotation] = staleHash(m)
	return p
}

// reconcileAll runs every queued reconcile until the queue is empty,
// failing the test on an error.
func (f *fixture) reconcileAll() {
	f.t.Helper()
	for f.handler.queue.Len() > 0 {
		if err := f.reconcileNext(); err != nil {
			f.t.Fatalf("reconcile: %v", err)
		}
	}
}

// handleAll delivers each of ms to the handler and runs the reconciles.
func (f *fixture) handleAll(ms ...*v1alpha1.Memcached) {
	f.t.Helper()
	for _, m := range ms {
		if err := f.handle(m, false); err != nil {
			f.t.Fatalf("Handle %s: %v", m.Name, err)
		}
	}
	f.reconcileAll()
}

// templatePatches returns the names of the Deployments whose template the
// handler patched, in order, and empties the record.
func (f *fixture) templatePatches() []string {
	var out []string
	for _, a := range f.client.actions {
		if strings.HasPrefix(a, "apply deployment test/") {
			out = append(out, strings.TrimPrefix(a, "apply deployment test/"))
		}
	}
	f.client.actions = nil
	return out
}

// progressing returns the stored Progressing condition of Memcached name.
func (f *fixture) progressing(name string) v1alpha1.MemcachedCondition {
	f.t.Helper()
	m := f.client.memcacheds["test/"+name]
	c := memcached.FindCondition(m.Status.Conditions, v1alpha1.MemcachedProgressing)
	if c == nil {
		f.t.Fatalf("memcached %s has no Progressing condition: %+v", name, m.Status)
	}
	return *c
}

// checkRollPending fails t unless memcached name of f reports Progressing
// RollPending, its roll waiting for the slots that holders hold.
func checkRollPending(t *testing.T, f *fixture, name, holders string) {
	t.Helper()
	if c := f.progressing(name); c.Reason != memcached.ReasonRollPending || !strings.HasSuffix(c.Message, "held by "+holders) {
		t.Errorf("memcached %s: Progressing %s %q, want %s held by %s", name, c.Reason, c.Message, memcached.ReasonRollPending, holders)
	}
}

// finishRoll replaces the pods of m with size Ready pods of the current
// template, as the Deployment controller does at the end of a roll.
func (f *fixture) finishRoll(m *v1alpha1.Memcached) {
	var pods []*corev1.Pod
	for _, p := range f.client.pods {
		if p.Labels[memcached.CRLabel] != m.Name {
			pods = append(pods, p)
		}
	}
	for i := range m.Spec.Size {
		pods = append(pods, memcachedtest.NewPod(m, fmt.Sprintf("%s-new-%d", m.Name, i), corev1.PodRunning, true))
	}
	f.client.pods = pods
}

func TestPacesAFleetRoll(t *testing.T) {
	ms, objs := fleet("a", "b", "c", "d", "e")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(2))

	f.handleAll(ms[4], ms[3], ms[2], ms[1], ms[0])

	// Slots go as reconciles come: the first two, e and d, take them.
	if got, want := f.templatePatches(), []string{"e", "d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	for _, m := range ms[3:] {
		name := m.Name
		d := f.client.deployments["test/"+name]
		if d.Spec.Template.Annotations[memcached.PacedRollAnnotation] != "true" || memcached.TemplateOf(d) != memcachedtest.CurrentHash(m) {
			t.Errorf("deployment %s: template annotations %v, want the new template marked as a paced roll", name, d.Spec.Template.Annotations)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != memcachedtest.Image {
			t.Errorf("deployment %s: image %q, want %q", name, img, memcachedtest.Image)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		c := f.progressing(name)
		if c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRollPending || !strings.Contains(c.Message, "held by d, e") {
			t.Errorf("memcached %s: Progressing %s %s %q, want True %s naming d and e", name, c.Status, c.Reason, c.Message, memcached.ReasonRollPending)
		}
		if img := f.client.deployments["test/"+name].Spec.Template.Spec.Containers[0].Image; img != oldImage {
			t.Errorf("deployment %s: image %q, want %q until its turn", name, img, oldImage)
		}
	}

	// e's roll ends: its slot goes to the first waiting by name, a.
	f.finishRoll(ms[4])
	f.handleAll(ms[4])
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after e's roll patched %v, want %v", got, want)
	}
	// d's pods are still old: nothing more moves when it reconciles.
	f.handleAll(ms[3])
	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("with d still rolling patched %v, want nothing", got)
	}

	// Their pods' changes queue both, and each reconcile brings the
	// pacing's entry of its own Memcached up to date.
	f.finishRoll(ms[3])
	f.finishRoll(ms[0])
	f.handleAll(ms[3], ms[0])
	if got, want := f.templatePatches(), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after d's and a's rolls patched %v, want %v", got, want)
	}
	for _, m := range ms[1:3] {
		f.finishRoll(m)
	}
	f.handleAll(ms...)
	for _, m := range ms {
		if c := f.progressing(m.Name); c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonComplete {
			t.Errorf("memcached %s: Progressing %s %s %q, want False %s", m.Name, c.Status, c.Reason, c.Message, memcached.ReasonComplete)
		}
	}
}

// TestSlotDecisionsReadTheDeploymentCacheOnce: the pacing passes over the
// Deployment cache once, and after that each slot decision, granted or
// refused, and each freed slot reads only its own Memcached's Deployment
// and pods, so that opening a window shared by 10,000 Memcacheds costs
// 10,000 decisions, not 10,000 passes over 10,000 Deployments.
func TestSlotDecisionsReadTheDeploymentCacheOnce(t *testing.T) {
	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("m%02d", i)
	}
	ms, objs := fleet(names...)
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(3))

	f.handleAll(ms...)
	if got := f.templatePatches(); len(got) != 3 {
		t.Fatalf("patched %v, want 3 of %d", got, len(ms))
	}
	for _, m := range ms[:3] {
		f.finishRoll(m)
	}
	f.handleAll(ms...)
	if got := f.templatePatches(); len(got) != 3 {
		t.Fatalf("after three rolls ended patched %v, want the next 3", got)
	}
	if got := f.client.listedDeployments; got != len(ms) {
		t.Errorf("the pacing read %d Deployments from the cache's lists over %d slot decisions, want %d: one pass", got, 2*len(ms), len(ms))
	}
}

func TestCountsRollsInFlightFromTheCaches(t *testing.T) {
	// A new handler, as after a restart or a change of leader, has no
	// memory of the slot that b holds: the caches show it.
	ms, objs := fleet("a", "b", "c")
	f := newFixture(t, withoutDeployment(append(objs, memcachedtest.PacedDeployment(ms[1], 2)), "b")...)
	f.handler.PaceRolls(intstr.FromInt(1))

	f.handleAll(ms...)

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v, want nothing while b's roll holds the only slot", got)
	}
	for _, name := range []string{"a", "c"} {
		checkRollPending(t, f, name, "b")
	}
	if c := f.progressing("b"); c.Reason != memcached.ReasonRollingUpdate {
		t.Errorf("memcached b: Progressing %s %q, want %s", c.Reason, c.Message, memcached.ReasonRollingUpdate)
	}
}

func TestAStuckPacedRollHoldsItsSlot(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	f.handleAll(ms...)
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	// a's new image cannot be pulled: its surge pod never gets Ready, and
	// its old pods stay.
	f.client.pods = append(f.client.pods, memcachedtest.WithContainers(memcachedtest.NewPod(ms[0], "a-new-0", corev1.PodPending, false),
		memcachedtest.Waiting("memcached", "ImagePullBackOff", "Back-off pulling image")))

	f.handleAll(ms...)

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v, want nothing: a stuck roll holds its slot", got)
	}
	checkRollPending(t, f, "b", "a")
}

// ownChanges stores in f's cache changed, a spec change of m, the
// Memcached b (generation 2, --threads=2), and fresh, a new Memcached of
// size 2, and returns them: changes of the user's, which roll at once
// whatever else waits.
func (f *fixture) ownChanges(m *v1alpha1.Memcached) (changed, fresh *v1alpha1.Memcached) {
	changed = m.DeepCopy()
	changed.Generation = 2
	changed.Spec.ExtraArgs = []string{"--threads=2"}
	f.handler.memcacheds.store("test/b", changed)
	fresh = memcachedtest.NewMemcached("fresh", 2)
	f.client.memcacheds["test/fresh"] = fresh
	f.handler.memcacheds.store("test/fresh", fresh)
	return changed, fresh
}

// checkOwnChangesRolled fails t unless the changes of ownChanges rolled:
// b's Deployment has the new template of its spec, unmarked, and fresh's
// was created with the new template.
func (f *fixture) checkOwnChangesRolled(t *testing.T, changed, fresh *v1alpha1.Memcached) {
	t.Helper()
	d := f.client.deployments["test/b"]
	if _, marked := d.Spec.Template.Annotations[memcached.PacedRollAnnotation]; marked || memcached.TemplateOf(d) != memcachedtest.CurrentHash(changed) {
		t.Errorf("deployment b: template annotations %v, want the new template of its spec, unmarked", d.Spec.Template.Annotations)
	}
	if d, ok := f.client.deployments["test/fresh"]; !ok || memcached.TemplateOf(d) != memcachedtest.CurrentHash(fresh) {
		t.Errorf("memcached fresh: deployment %v, want one created with the new template at once", d)
	}
}

func TestSpecChangesAndNewMemcachedsDoNotWaitForTheFleet(t *testing.T) {
	ms, objs := fleet("a", "b", "c")
	f := newFixture(t, withoutDeployment(append(objs, memcachedtest.PacedDeployment(ms[0], 2)), "a")...)
	f.handler.PaceRolls(intstr.FromInt(1))
	changed, fresh := f.ownChanges(ms[1])

	f.handleAll(changed, ms[2], fresh)

	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v: b's own change goes at once, c waits", got, want)
	}
	f.checkOwnChangesRolled(t, changed, fresh)
	if got := f.client.deployments["test/b"].Spec.Template.Annotations[memcached.SpecHashAnnotation]; got != memcachedtest.MustSpecHash(changed) {
		t.Errorf("deployment b: recorded spec %q, want %q", got, memcachedtest.MustSpecHash(changed))
	}
	if c := f.progressing("c"); c.Reason != memcached.ReasonRollPending {
		t.Errorf("memcached c: Progressing %s %q, want %s", c.Reason, c.Message, memcached.ReasonRollPending)
	}
}

func TestAFailedPatchGivesItsSlotBack(t *testing.T) {
	_, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	f.client.failOn["apply deployment test/a"] = errors.NewForbidden(memcached.DeploymentResource, "a", fmt.Errorf("denied by policy"))

	if err := f.handler.reconcileKey("test/a"); err == nil {
		t.Fatalf("reconcile a: got nil, want the patch's error")
	}
	if err := f.handler.reconcileKey("test/b"); err != nil {
		t.Fatalf("reconcile b: %v", err)
	}

	if got, want := f.templatePatches(), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched %v, want %v: b takes the slot that a's failed patch gave back", got, want)
	}
}

func TestDeletingARollingMemcachedWakesTheNext(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	f.handleAll(ms...)
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	delete(f.client.deployments, "test/a")

	if err := f.handle(ms[0], true); err != nil {
		t.Fatalf("Handle the deletion of a: %v", err)
	}
	f.reconcileAll()

	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched %v, want %v after a was deleted", got, want)
	}
}

// withoutDeployment drops the Deployment of Memcached name from objs but
// the last one, so that a test can put its own in.
func withoutDeployment(objs []runtime.Object, name string) []runtime.Object {
	var out []runtime.Object
	last := -1
	for i, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == name {
			last = i
		}
	}
	for i, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == name && i != last {
			continue
		}
		out = append(out, o)
	}
	return out
}

func set(keys ...string) map[string]bool {
	s := map[string]bool{}
	for _, k := range keys {
		s[k] = true
	}
	return s
}

func TestAGrantHoldsItsSlotUntilTheCacheShowsThePatch(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	if err := f.handler.reconcileKey("test/a"); err != nil {
		t.Fatalf("reconcile a: %v", err)
	}
	// The cache has not seen a's patch yet, as when another worker
	// reconciles b right after it.
	f.client.deployments["test/a"] = staleDeployment(ms[0], 2)

	if err := f.handler.reconcileKey("test/b"); err != nil {
		t.Fatalf("reconcile b: %v", err)
	}

	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched %v, want %v: a's grant holds the only slot", got, want)
	}
	checkRollPending(t, f, "b", "a")
}

// TestASpecChangeGivesBackAGrantTheCacheNeverShows: a paced patch, then a
// spec change before the cache shows it: the grant was for a template the
// cache will never show, and the next resource gets the slot.
func TestASpecChangeGivesBackAGrantTheCacheNeverShows(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	if err := f.handler.reconcileKey("test/a"); err != nil {
		t.Fatalf("reconcile a: %v", err)
	}
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	// a's spec changes while the cache still shows its old template: its
	// own roll goes at once, and rolls to a template of another hash.
	f.client.deployments["test/a"] = staleDeployment(ms[0], 2)
	a := ms[0].DeepCopy()
	a.Spec.Image = "registry.local/memcached:1.6.99"
	a.Generation++
	f.handler.memcacheds.store("test/a", a)
	if err := f.handler.reconcileKey("test/a"); err != nil {
		t.Fatalf("reconcile a after its spec change: %v", err)
	}
	// The cache shows a's own roll, which is not a paced one.
	f.client.deployments["test/a"].Spec.Template.Annotations[memcached.TemplateHashAnnotation] = memcachedtest.CurrentHash(a)
	delete(f.client.deployments["test/a"].Spec.Template.Annotations, memcached.PacedRollAnnotation)
	f.client.actions = nil

	if err := f.handler.reconcileKey("test/b"); err != nil {
		t.Fatalf("reconcile b: %v", err)
	}

	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched %v, want %v: a's stale grant must not hold the only slot", got, want)
	}
}

func TestCountsRollsOfMemcachedsNotDeliveredYet(t *testing.T) {
	// Right after a start the SDK has delivered only some Memcacheds; the
	// Deployment cache already holds every Deployment, b's paced roll too.
	ms, objs := fleet("a", "b")
	f := newFixture(t, withoutDeployment(append(objs, memcachedtest.PacedDeployment(ms[1], 2)), "b")...)
	f.handler.memcacheds.delete("test/b")
	f.handler.PaceRolls(intstr.FromInt(1))

	f.handleAll(ms[0])

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v, want nothing while b's roll holds the only slot", got)
	}
}

func TestAPercentageCountsEveryDeploymentFromTheStart(t *testing.T) {
	// 10% of 20 is 2 slots, although the SDK has delivered only two of the
	// Memcacheds so far.
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	ms, objs := fleet(names...)
	f := newFixture(t, objs...)
	for _, m := range ms[2:] {
		f.handler.memcacheds.delete("test/" + m.Name)
	}
	f.handler.PaceRolls(intstr.FromString("10%"))

	f.handleAll(ms[0], ms[1])

	if got, want := f.templatePatches(), []string{"m00", "m01"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched %v, want %v", got, want)
	}
}

func TestTenantDeploymentsHoldNoRollSlot(t *testing.T) {
	// A tenant may create Deployments that claim a Memcached as their
	// controller, mark them as paced rolls and give them pods of another
	// template that never get Ready. None of them is the operator's
	// Deployment of a served Memcached, so none holds the only slot.
	ms, objs := fleet("a", "b", "t3")
	forged := func(name, namespace string, owner metav1.OwnerReference) []runtime.Object {
		x := memcachedtest.NewMemcached(name, 2)
		x.Namespace = namespace
		d := memcachedtest.PacedDeployment(x, 2)
		d.UID = types.UID("uid-forged-" + name)
		d.OwnerReferences = []metav1.OwnerReference{owner}
		return []runtime.Object{d, stalePod(x, name+"-old", false)}
	}
	controller := true
	ref := func(apiVersion, name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: v1alpha1.Kind, Name: name, UID: uid, Controller: &controller}
	}
	objs = withoutDeployment(objs, "t3")
	var tenant []runtime.Object
	// Another name than its controller's.
	tenant = append(tenant, forged("t1", "test", ref(v1alpha1.APIVersion(), "a", ms[0].UID))...)
	// A Memcached of another API group.
	tenant = append(tenant, forged("t2", "test", ref("evil.example.com/v1alpha1", "t2", "uid-t2"))...)
	// The name of a known Memcached, t3, but another UID.
	tenant = append(tenant, forged("t3", "test", ref(v1alpha1.APIVersion(), "t3", "uid-not-t3"))...)
	// A namespace the operator does not serve.
	tenant = append(tenant, forged("t4", "unserved", ref(v1alpha1.APIVersion(), "t4", "uid-t4"))...)
	f := newFixture(t, append(objs, tenant...)...)
	f.handler.ServeNamespaces(func(namespace string) bool { return namespace == "test" })
	f.handler.PaceRolls(intstr.FromInt(1))

	f.handleAll(ms[0], ms[1])

	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v: no tenant's Deployment holds a slot", got, want)
	}
	checkRollPending(t, f, "b", "a")
}

func TestTenantPodsHoldNoRollSlot(t *testing.T) {
	// a's paced roll is over, as its Deployment controller says, but a
	// tenant made a pod of the old template that claims a's ReplicaSet and
	// never gets Ready: it does not keep the only slot held.
	ms, objs := fleet("a", "b")
	done := rolled(memcachedtest.PacedDeployment(ms[0], 2), 2, 2, 2)
	f := newFixture(t, withoutDeployment(append(objs, done), "a")...)
	f.finishRoll(ms[0])
	f.client.pods = append(f.client.pods, stalePod(ms[0], "a-forged", false))
	f.handler.PaceRolls(intstr.FromInt(1))

	f.handleAll(ms...)

	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v: a pod that claims a's ReplicaSet holds no slot once a's controller says its roll is over", got, want)
	}
}
