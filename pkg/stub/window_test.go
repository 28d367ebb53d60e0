package stub

import (
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
)

// The fixture's clock, memcachedtest.Now, reads Sunday 2026-11-29 12:00
// UTC. tuesday3am is closed then and opens next on 2026-12-01 at 03:00.
var (
	tuesday3am  = memcached.Window{Day: time.Tuesday, Start: 3 * time.Hour, Duration: 2 * time.Hour}
	tuesdayOpen = time.Date(2026, time.December, 1, 3, 0, 0, 0, time.UTC)
	// sundayNoon is open at memcachedtest.Now, from its start.
	sundayNoon = memcached.Window{Day: time.Sunday, Start: 12 * time.Hour, Duration: time.Hour}
)

// delayRecorder is the handler's queue, with the last delay that AddAfter
// was given for each key.
type delayRecorder struct {
	workqueue.RateLimitingInterface
	mu     sync.Mutex
	delays map[string]time.Duration
}

func (q *delayRecorder) AddAfter(item interface{}, d time.Duration) {
	q.mu.Lock()
	q.delays[item.(string)] = d
	q.mu.Unlock()
	q.RateLimitingInterface.AddAfter(item, d)
}

// recordDelays makes the fixture's handler queue through a delayRecorder.
func (f *fixture) recordDelays() *delayRecorder {
	q := &delayRecorder{RateLimitingInterface: f.handler.queue, delays: map[string]time.Duration{}}
	f.handler.queue = q
	return q
}

// at sets the fixture's clock to t.
func (f *fixture) at(t time.Time) {
	f.handler.now = func() metav1.Time { return metav1.NewTime(t) }
}

// windowOf returns the spec.maintenanceWindow of w.
func windowOf(w memcached.Window) *v1alpha1.MaintenanceWindow {
	return &v1alpha1.MaintenanceWindow{
		Day:      w.Day.String(),
		Start:    strings.Fields(w.String())[1],
		Duration: metav1.Duration{Duration: w.Duration},
	}
}

// reconcileKeys reconciles each of keys once, as the queue's timer would
// hand them to a worker, failing the test on an error.
func (f *fixture) reconcileKeys(keys ...string) {
	f.t.Helper()
	for _, k := range keys {
		if err := f.handler.reconcileKey(k); err != nil {
			f.t.Fatalf("reconcile %s: %v", k, err)
		}
	}
}

// waitsForTheWindow fails the test unless Memcached name shows
// Progressing=True WaitingForMaintenanceWindow naming source and next, and
// its Deployment still runs oldImage.
func (f *fixture) waitsForTheWindow(name, source string, next time.Time) {
	f.t.Helper()
	c := f.progressing(name)
	if c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonWaitingForMaintenanceWindow ||
		!strings.Contains(c.Message, "opens next at "+next.Format(time.RFC3339)) || !strings.Contains(c.Message, "("+source+")") {
		f.t.Errorf("memcached %s: Progressing %s %s %q, want True %s from %s, opening next at %s", name, c.Status, c.Reason, c.Message,
			memcached.ReasonWaitingForMaintenanceWindow, source, next.Format(time.RFC3339))
	}
	if img := f.client.deployments["test/"+name].Spec.Template.Spec.Containers[0].Image; img != oldImage {
		f.t.Errorf("deployment %s: image %q, want %q until the window opens", name, img, oldImage)
	}
}

func TestAnOperatorChangeWaitsForTheWindow(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(2))
	f.handler.UseMaintenanceWindow(tuesday3am)
	q := f.recordDelays()

	f.handleAll(ms...)

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v outside the window, want nothing", got)
	}
	for _, m := range ms {
		f.waitsForTheWindow(m.Name, "--maintenance-window", tuesdayOpen)
		key := "test/" + m.Name
		if got, want := q.delays[key], tuesdayOpen.Sub(memcachedtest.Now.Time); got != want {
			t.Errorf("memcached %s queued again after %v, want %v: at the window's opening", m.Name, got, want)
		}
	}
	if msg := f.progressing("a").Message; !strings.Contains(msg, "Tuesday 03:00 2h UTC") {
		t.Errorf("message %q, want it to name the window", msg)
	}

	// The queue hands them over when the window opens.
	f.at(tuesdayOpen)
	f.reconcileKeys("test/a", "test/b")

	if got, want := f.templatePatches(), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v at the window's opening, want %v", got, want)
	}
	for _, m := range ms {
		d := f.client.deployments["test/"+m.Name]
		if d.Spec.Template.Annotations[memcached.PacedRollAnnotation] != "true" || d.Spec.Template.Spec.Containers[0].Image != memcachedtest.Image {
			t.Errorf("deployment %s: template %v running %s, want the new template as a paced roll", m.Name, d.Spec.Template.Annotations, d.Spec.Template.Spec.Containers[0].Image)
		}
		if c := f.progressing(m.Name); c.Reason != memcached.ReasonRollingUpdate {
			t.Errorf("memcached %s: Progressing %s %q, want %s", m.Name, c.Reason, c.Message, memcached.ReasonRollingUpdate)
		}
	}
}

func TestAnOperatorChangeRollsInsideTheWindow(t *testing.T) {
	ms, objs := fleet("a")
	f := newFixture(t, objs...)
	f.handler.UseMaintenanceWindow(sundayNoon)

	f.handleAll(ms...)

	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v at the window's start, want %v", got, want)
	}
	if c := f.progressing("a"); c.Reason != memcached.ReasonRollingUpdate {
		t.Errorf("Progressing %s %q, want %s", c.Reason, c.Message, memcached.ReasonRollingUpdate)
	}
}

func TestTheSpecWindowOverridesTheDefault(t *testing.T) {
	ms, objs := fleet("opens", "closed")
	ms[0].Spec.MaintenanceWindow = windowOf(sundayNoon)
	ms[1].Spec.MaintenanceWindow = windowOf(tuesday3am)
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(2))
	f.handler.UseMaintenanceWindow(memcached.Window{Day: time.Sunday, Start: 11 * time.Hour, Duration: 2 * time.Hour})

	f.handleAll(ms...)

	if got, want := f.templatePatches(), []string{"opens"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v: closed's own window is closed although the default is open", got, want)
	}
	f.waitsForTheWindow("closed", "spec.maintenanceWindow", tuesdayOpen)
}

func TestSpecChangesDoNotWaitForTheWindow(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.UseMaintenanceWindow(tuesday3am)
	changed, fresh := f.ownChanges(ms[1])

	f.handleAll(ms[0], changed, fresh)

	if got, want := f.templatePatches(), []string{"b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v: b's own change goes at once, a waits", got, want)
	}
	f.checkOwnChangesRolled(t, changed, fresh)
	f.waitsForTheWindow("a", "--maintenance-window", tuesdayOpen)
}

// TestAWindowChangeIsNoSpecChangeOfThePods: a spec change of the window
// alone rolls no pod, and leaves a pending change of the operator's the
// operator's: it waits for the new window instead of rolling at once.
func TestAWindowChangeIsNoSpecChangeOfThePods(t *testing.T) {
	settled := memcachedtest.NewMemcached("settled", 2)
	settled.Status.ObservedGeneration = 1
	pending, objs := fleet("pending")
	f := newFixture(t, append(inSync(settled, 2), objs...)...)
	f.handler.UseMaintenanceWindow(sundayNoon)
	for _, m := range []*v1alpha1.Memcached{settled, pending[0]} {
		m.Generation = 2
		m.Spec.MaintenanceWindow = windowOf(tuesday3am)
		f.handler.memcacheds.store("test/"+m.Name, m)
	}

	f.handleAll(settled, pending[0])

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v, want nothing: neither template depends on the window, and pending's new window is closed", got)
	}
	f.waitsForTheWindow("pending", "spec.maintenanceWindow", tuesdayOpen)
}

// TestARollWaitingForASlotIsQueuedForTheWindowsClose: inside the window,
// a Memcached that waits for a slot is queued for the window's close, and
// then says that it waits for the next window, not for a slot.
func TestARollWaitingForASlotIsQueuedForTheWindowsClose(t *testing.T) {
	ms, objs := fleet("a", "b")
	f := newFixture(t, objs...)
	f.handler.PaceRolls(intstr.FromInt(1))
	f.handler.UseMaintenanceWindow(sundayNoon)
	q := f.recordDelays()

	f.handleAll(ms...)

	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}
	if c := f.progressing("b"); c.Reason != memcached.ReasonRollPending {
		t.Errorf("memcached b: Progressing %s %q, want %s", c.Reason, c.Message, memcached.ReasonRollPending)
	}
	if got := q.delays["test/b"]; got != time.Hour {
		t.Errorf("memcached b queued again after %v, want 1h0m0s: at the window's close", got)
	}

	closed := memcachedtest.Now.Add(time.Hour)
	f.at(closed)
	f.reconcileKeys("test/b")

	if got := f.templatePatches(); len(got) != 0 {
		t.Fatalf("patched %v after the window closed, want nothing", got)
	}
	f.waitsForTheWindow("b", "--maintenance-window", memcachedtest.Now.AddDate(0, 0, 7))
}

// TestARollStartedInTheWindowFinishesAfterIt: the window governs when a
// roll starts; once the Deployment has the new template, a closed window
// changes nothing of it, and its pods go on rolling.
func TestARollStartedInTheWindowFinishesAfterIt(t *testing.T) {
	ms, objs := fleet("a")
	f := newFixture(t, objs...)
	f.handler.UseMaintenanceWindow(sundayNoon)
	f.handleAll(ms...)
	if got, want := f.templatePatches(), []string{"a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched %v, want %v", got, want)
	}

	f.at(memcachedtest.Now.Add(90 * time.Minute))
	f.reconcileKeys("test/a")

	for _, a := range f.client.actions {
		if strings.HasPrefix(a, "apply ") || strings.HasPrefix(a, "patch ") || strings.HasPrefix(a, "scale ") {
			t.Errorf("after the window closed: %s, want no change of the rolling Deployment", a)
		}
	}
	if c := f.progressing("a"); c.Reason != memcached.ReasonRollingUpdate {
		t.Errorf("Progressing %s %q, want %s after the window closed", c.Reason, c.Message, memcached.ReasonRollingUpdate)
	}
	f.finishRoll(ms[0])
	f.reconcileKeys("test/a")
	if c := f.progressing("a"); c.Status != corev1.ConditionFalse || c.Reason != memcached.ReasonComplete {
		t.Errorf("Progressing %s %s %q, want False %s", c.Status, c.Reason, c.Message, memcached.ReasonComplete)
	}
}

// TestEveryChangeOfTheOperatorsWaitsForTheWindow: each kind of template
// change that a new operator brings without a spec change waits for the
// window, and only for it: a new default image, a new sidecar image, and a
// template that an earlier release made differently (here, its memcached
// readiness probe). The window's opening applies each one in a paced roll.
func TestEveryChangeOfTheOperatorsWaitsForTheWindow(t *testing.T) {
	tests := []struct {
		name string
		m    *v1alpha1.Memcached
		// earlier is m's Deployment as the earlier operator made it.
		earlier func(m *v1alpha1.Memcached) *appsv1.Deployment
	}{{
		name: "a new default image",
		m:    memcachedtest.NewMemcached("image", 2),
		earlier: func(m *v1alpha1.Memcached) *appsv1.Deployment {
			return memcached.NewDeployment(m, oldImage, memcachedtest.SidecarImage)
		},
	}, {
		name: "a new sidecar image",
		m:    memcachedtest.WithMonitoring(memcachedtest.NewMemcached("sidecar", 2), true),
		earlier: func(m *v1alpha1.Memcached) *appsv1.Deployment {
			return memcached.NewDeployment(m, memcachedtest.Image, "example.com/memcached-sidecar:old")
		},
	}, {
		name: "a template of an earlier release",
		m:    memcachedtest.NewMemcached("release", 2),
		earlier: func(m *v1alpha1.Memcached) *appsv1.Deployment {
			d := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage)
			d.Spec.Template.Spec.Containers[0].ReadinessProbe.PeriodSeconds += 5
			return d
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			m.Status.ObservedGeneration = 1
			d := tt.earlier(m)
			u, err := memcached.DeploymentManifest(d)
			if err != nil {
				t.Fatal(err)
			}
			earlierHash := memcached.ManifestTemplateHash(u)
			if earlierHash == memcachedtest.CurrentHash(m) {
				t.Fatalf("the earlier template's hash is the current one, %s: the case changes nothing", earlierHash)
			}
			d.UID = "uid-deployment"
			d.Spec.Replicas = memcachedtest.Int32p(2)
			d.Spec.Template.Annotations = map[string]string{memcached.TemplateHashAnnotation: earlierHash, memcached.SpecHashAnnotation: memcachedtest.MustSpecHash(m)}
			var objs []runtime.Object
			objs = append(objs, m, d, memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m))
			for _, suffix := range []string{"-a", "-b"} {
				p := memcachedtest.NewPod(m, m.Name+suffix, corev1.PodRunning, true)
				p.Annotations[memcached.TemplateHashAnnotation] = earlierHash
				objs = append(objs, p)
			}
			f := newFixture(t, objs...)
			f.handler.UseMaintenanceWindow(tuesday3am)
			key := "test/" + m.Name

			f.handleAll(m)

			if got := f.templatePatches(); len(got) != 0 {
				t.Fatalf("patched %v outside the window, want nothing", got)
			}
			if got := f.client.deployments[key].Spec.Template; !reflect.DeepEqual(got, d.Spec.Template) {
				t.Errorf("deployment %s: template changed outside the window:\n got %+v\nwant %+v", m.Name, got, d.Spec.Template)
			}
			c := f.progressing(m.Name)
			if c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonWaitingForMaintenanceWindow || !strings.Contains(c.Message, "opens next at "+tuesdayOpen.Format(time.RFC3339)) {
				t.Errorf("Progressing %s %s %q, want True %s, opening next at %s", c.Status, c.Reason, c.Message, memcached.ReasonWaitingForMaintenanceWindow, tuesdayOpen.Format(time.RFC3339))
			}

			f.at(tuesdayOpen)
			f.reconcileKeys(key)

			if got, want := f.templatePatches(), []string{m.Name}; !reflect.DeepEqual(got, want) {
				t.Fatalf("patched %v at the window's opening, want %v", got, want)
			}
			got := f.client.deployments[key]
			if memcached.TemplateOf(got) != memcachedtest.CurrentHash(m) || got.Spec.Template.Annotations[memcached.PacedRollAnnotation] != "true" {
				t.Errorf("deployment %s: template %s with annotations %v, want %s as a paced roll", m.Name, memcached.TemplateOf(got), got.Spec.Template.Annotations, memcachedtest.CurrentHash(m))
			}
		})
	}
}

// templateNeutralEdits are spec edits that change nothing of the pod
// template: the Deployment's template, and so its recorded spec, stays as
// it is, and the record must still say that the spec is the one the
// template was built from.
var templateNeutralEdits = []struct {
	name string
	edit func(m *v1alpha1.Memcached)
}{
	{name: "monitoring.labels", edit: func(m *v1alpha1.Memcached) { m.Spec.Monitoring.Labels = map[string]string{"release": "prom"} }},
	{name: "monitoring.prometheusRule", edit: func(m *v1alpha1.Memcached) { m.Spec.Monitoring.PrometheusRule = true }},
	{name: "discovery off, written out", edit: func(m *v1alpha1.Memcached) { m.Spec.Discovery = &v1alpha1.MemcachedDiscovery{} }},
}

// edited returns a copy of m at its next generation with edit applied, as
// the handler and the client see it.
func (f *fixture) edited(m *v1alpha1.Memcached, edit func(*v1alpha1.Memcached)) *v1alpha1.Memcached {
	m = m.DeepCopy()
	m.Generation++
	edit(m)
	f.client.memcacheds["test/"+m.Name] = m.DeepCopy()
	f.handler.memcacheds.store("test/"+m.Name, m.DeepCopy())
	return m
}

// appliedWith returns m's Deployment of 2 replicas as a handler of
// default image image applied it, and as the cache shows it while nobody
// changed it.
func appliedWith(t *testing.T, m *v1alpha1.Memcached, image string) *appsv1.Deployment {
	t.Helper()
	want := &desiredDeployment{m: m, image: image, sidecarImage: memcachedtest.SidecarImage}
	manifest, err := want.build()
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := setContent(manifest.DeepCopy().Object, d); err != nil {
		t.Fatal(err)
	}
	d.UID = "uid-deployment"
	d.Annotations = map[string]string{memcached.ObservedDigestAnnotation: want.digest}
	return d
}

// restart replaces the fixture's handler with a new one, of default image
// image, on the same client, as a new operator process starts.
func (f *fixture) restart(image string) {
	f.handler = NewHandler(f.client, f.recorder, image)
	f.handler.UseSidecarImage(memcachedtest.SidecarImage)
	f.handler.now = func() metav1.Time { return memcachedtest.Now }
	for k, m := range f.client.memcacheds {
		f.handler.memcacheds.store(k, m.DeepCopy())
	}
}

// TestATemplateNeutralEditLeavesTheNextOperatorRollToTheWindow: an edit
// of the spec that changes nothing of the pod template applies nothing,
// and a new default image that the operator ships afterwards is still the
// operator's change: it waits for the window, however the record of the
// template's spec was left by the edit.
func TestATemplateNeutralEditLeavesTheNextOperatorRollToTheWindow(t *testing.T) {
	for _, tt := range templateNeutralEdits {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("a", 2), true)
			m.Status.ObservedGeneration = 1
			// The operator runs oldImage, as the Deployment it applied does.
			f := newFixture(t, m, appliedWith(t, m, oldImage), memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m),
				stalePod(m, "a-old-a", true), stalePod(m, "a-old-b", true))
			f.restart(oldImage)
			f.handler.UseMaintenanceWindow(tuesday3am)
			edited := f.edited(m, tt.edit)

			f.handleAll(edited)

			if got := f.templatePatches(); len(got) != 0 {
				t.Fatalf("patched %v for a template-neutral edit, want nothing: it rolls no pod", got)
			}
			if d := f.client.deployments["test/a"]; !reflect.DeepEqual(d.Spec.Template, appliedWith(t, m, oldImage).Spec.Template) {
				t.Fatalf("deployment a: template changed to %+v, want it as it was", d.Spec.Template)
			}

			// The platform team ships a new --memcached-image.
			f.restart(memcachedtest.Image)
			f.handler.UseMaintenanceWindow(tuesday3am)
			f.handleAll(f.client.memcacheds["test/a"].DeepCopy())

			if got := f.templatePatches(); len(got) != 0 {
				t.Fatalf("patched %v outside the window, want nothing: the new default image is the operator's change", got)
			}
			f.waitsForTheWindow("a", "--maintenance-window", tuesdayOpen)
		})
	}
}

// TestATemplateNeutralEditStartsNoWaitingRoll: while a roll of the
// operator's waits, for the window or for a slot, an edit of the spec that
// changes nothing of the pod template leaves it waiting.
func TestATemplateNeutralEditStartsNoWaitingRoll(t *testing.T) {
	waits := []struct {
		name   string
		setup  func(f *fixture)
		reason string
	}{{
		name:   "for the window",
		setup:  func(f *fixture) { f.handler.UseMaintenanceWindow(tuesday3am) },
		reason: memcached.ReasonWaitingForMaintenanceWindow,
	}, {
		name:   "for a slot",
		setup:  func(f *fixture) { f.handler.PaceRolls(intstr.FromInt(1)) },
		reason: memcached.ReasonRollPending,
	}}
	for _, w := range waits {
		for _, tt := range templateNeutralEdits {
			t.Run(w.name+"/"+tt.name, func(t *testing.T) {
				m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("b", 2), true)
				m.Status.ObservedGeneration = 1
				// a's paced roll holds the only slot.
				holder, objs := fleet("a")
				objs = withoutDeployment(append(objs, memcachedtest.PacedDeployment(holder[0], 2)), "a")
				f := newFixture(t, append(objs, m, staleDeployment(m, 2), memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m),
					stalePod(m, "b-old-a", true), stalePod(m, "b-old-b", true))...)
				w.setup(f)
				f.handleAll(m)
				if c := f.progressing("b"); c.Reason != w.reason {
					t.Fatalf("memcached b: Progressing %s %q, want %s before the edit", c.Reason, c.Message, w.reason)
				}
				f.templatePatches()

				f.handleAll(f.edited(f.client.memcacheds["test/b"], tt.edit))

				if got := f.templatePatches(); len(got) != 0 {
					t.Fatalf("patched %v, want nothing: the edit changes nothing of the template, and the operator's roll still waits", got)
				}
				if c := f.progressing("b"); c.Status != corev1.ConditionTrue || c.Reason != w.reason {
					t.Errorf("memcached b: Progressing %s %s %q, want True %s after the edit", c.Status, c.Reason, c.Message, w.reason)
				}
				if img := f.client.deployments["test/b"].Spec.Template.Spec.Containers[0].Image; img != oldImage {
					t.Errorf("deployment b: image %q, want %q while the roll waits", img, oldImage)
				}
			})
		}
	}
}
