package stub

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRollsThePodTemplateWhenTheSpecChanges(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	before := memcachedtest.OwnedDeployment(m, 2)
	m.Spec.Image = "registry.local/memcached:1.6.99"
	f := newFixture(t, m, before, memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m))

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, writesDeployment("apply deployment test/example"))
	d := f.client.deployments["test/example"]
	if got, want := memcached.TemplateOf(d), memcachedtest.CurrentHash(m); got != want || got == memcached.TemplateOf(before) {
		t.Errorf("template hash after the patch: got %q, want %q", got, want)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != m.Spec.Image {
		t.Errorf("image after the patch: got %q, want %q", img, m.Spec.Image)
	}
	if *d.Spec.Replicas != 2 || d.UID != before.UID {
		t.Errorf("the patch changed more than the template: replicas %d, UID %s", *d.Spec.Replicas, d.UID)
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+ReasonDeploymentUpdated+" ") {
		t.Errorf("events: got %q, want one Normal %s", got, ReasonDeploymentUpdated)
	}
}

func TestRepairsTheService(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	edited := memcachedtest.OwnedService(m)
	edited.Spec.Selector = map[string]string{"app": "memcached", "memcached_cr": "example", "extra": "x"}
	edited.Spec.Ports[0].Port = 80
	withIP := memcachedtest.OwnedService(m)
	withIP.Spec.ClusterIP = "10.0.0.7"
	foreign := memcached.NewService(m)
	foreign.OwnerReferences = nil
	tests := []struct {
		name       string
		svc        *corev1.Service
		wantAction string
		wantErr    string
		wantName   string
	}{
		{name: "selector and ports restored", svc: edited, wantAction: "patch service test/example", wantName: "example"},
		// Deleted: its deletion brings the reconcile that creates it anew.
		{name: "a cluster IP cannot be patched away", svc: withIP, wantAction: "delete service test/example"},
		{name: "someone else's is left alone", svc: foreign, wantErr: "service test/example already exists and is not controlled by memcached example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, m, memcachedtest.OwnedDeployment(m, 1), tt.svc)

			err := f.handle(m, false)

			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("Handle: got %v, want %q", err, tt.wantErr)
			}
			var writes []string
			for _, a := range f.client.actions {
				if !strings.HasPrefix(a, "get ") && !strings.HasPrefix(a, "read ") && !strings.HasPrefix(a, "list ") && !strings.HasPrefix(a, "update memcached/status") {
					writes = append(writes, a)
				}
			}
			if got := strings.Join(writes, ","); got != tt.wantAction {
				t.Errorf("writes: got %q, want %q", writes, tt.wantAction)
			}
			if tt.wantAction == "patch service test/example" {
				s := f.client.services["test/example"]
				if !portsEqual(s.Spec.Ports, memcached.NewService(m).Spec.Ports) || len(s.Spec.Selector) != 2 {
					t.Errorf("service after the patch: selector %v ports %+v", s.Spec.Selector, s.Spec.Ports)
				}
			}
			status := f.client.statuses[len(f.client.statuses)-1]
			if status.ServiceName != tt.wantName {
				t.Errorf("status.serviceName: got %q, want %q", status.ServiceName, tt.wantName)
			}
			if tt.wantErr != "" {
				if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Reason != memcached.ReasonServiceNotOwned {
					t.Errorf("Degraded: got %+v, want reason %s", c, memcached.ReasonServiceNotOwned)
				}
			}
		})
	}
}

func TestBudgetFollowsSize(t *testing.T) {
	foreign := func(m *v1alpha1.Memcached) *policyv1beta1.PodDisruptionBudget {
		p := memcachedtest.OwnedBudget(m)
		p.OwnerReferences = nil
		return p
	}
	minAvailable := intstr.FromInt(2)
	tests := []struct {
		name       string
		size       int32
		budget     func(m *v1alpha1.Memcached) *policyv1beta1.PodDisruptionBudget
		wantAction string
		wantBudget bool
	}{
		{name: "size 1 removes its own budget", size: 1, budget: memcachedtest.OwnedBudget, wantAction: "delete poddisruptionbudget test/example"},
		{name: "size 0 removes its own budget", size: 0, budget: memcachedtest.OwnedBudget, wantAction: "delete poddisruptionbudget test/example"},
		{name: "size 1 leaves someone else's", size: 1, budget: foreign, wantBudget: true},
		{name: "size 3 creates one", size: 3, wantAction: "create poddisruptionbudget test/example", wantBudget: true},
		{name: "size 3 keeps its own", size: 3, budget: memcachedtest.OwnedBudget, wantBudget: true},
		{name: "an edited budget is restored", size: 3, budget: func(m *v1alpha1.Memcached) *policyv1beta1.PodDisruptionBudget {
			p := memcachedtest.OwnedBudget(m)
			p.Spec.MaxUnavailable = nil
			p.Spec.MinAvailable = &minAvailable
			return p
		}, wantAction: "patch poddisruptionbudget test/example", wantBudget: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)
			f := newFixture(t, m, memcachedtest.OwnedDeployment(m, tt.size), memcachedtest.OwnedService(m))
			if tt.budget != nil {
				f.client.pdbs["test/example"] = tt.budget(m)
			}

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}

			var writes []string
			for _, a := range f.client.actions {
				if strings.Contains(a, "poddisruptionbudget") && !strings.HasPrefix(a, "get ") {
					writes = append(writes, a)
				}
			}
			if got := strings.Join(writes, ","); got != tt.wantAction {
				t.Errorf("budget writes: got %q, want %q", got, tt.wantAction)
			}
			p, ok := f.client.pdbs["test/example"]
			if ok != tt.wantBudget {
				t.Fatalf("budget exists: got %v, want %v", ok, tt.wantBudget)
			}
			if ok && metav1.IsControlledBy(p, m) && (p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1) {
				t.Errorf("own budget: minAvailable %v maxUnavailable %v, want maxUnavailable 1 alone", p.Spec.MinAvailable, p.Spec.MaxUnavailable)
			}
		})
	}
}

func TestInvalidSpecChangesNothing(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)
	m.Spec.ExtraArgs = []string{"--port=1"}

	err := f.handle(m, false)

	if err == nil || !strings.Contains(err.Error(), `"--port=1"`) {
		t.Fatalf("Handle: got %v, want the invalid argument named", err)
	}
	checkRefusedSpec(t, f)
}

// TestInvalidSpecLeavesExistingDeploymentAlone: a Memcached stored before
// the CRD refused its spec, here with a value memcached exits on and a
// toleration the API server refuses in a pod, keeps the pods it has: no
// scale, no new template.
func TestInvalidSpecLeavesExistingDeploymentAlone(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, inSync(m, 2)...)
	changed := m.DeepCopy()
	changed.Generation++
	changed.Spec.Size = 4
	changed.Spec.ExtraArgs = []string{"--threads=0"}
	changed.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Value: "x"}}

	err := f.handle(changed, false)

	if err == nil || !strings.Contains(err.Error(), `spec.extraArgs[0]: "--threads=0": --threads must be`) {
		t.Fatalf("Handle: got %v, want the invalid thread count named", err)
	}
	checkRefusedSpec(t, f)
}

// checkRefusedSpec fails t unless f's reconcile refused example's spec:
// it read the pods, the Service and the Deployment, wrote nothing but the
// status, and reported Degraded=True InvalidSpec.
func checkRefusedSpec(t *testing.T, f *fixture) {
	t.Helper()
	checkActions(t, f.client.actions, []string{
		"list pods test app=memcached,memcached_cr=example",
		"get service test/example",
		"get deployment test/example",
		"update memcached/status test/example",
	})
	if c := memcached.FindCondition(f.client.statuses[0].Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonInvalidSpec {
		t.Errorf("Degraded: got %+v, want True with reason %s", c, memcached.ReasonInvalidSpec)
	}
}

func TestTemplateHashIsRememberedPerGeneration(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	f := newFixture(t, m)

	first, err := f.handler.desired(m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.handler.desired(m)
	if err != nil {
		t.Fatal(err)
	}
	if again.hash != first.hash || again.manifest != nil {
		t.Errorf("same generation: got hash %q, manifest built %v; want %q from memory, nothing built", again.hash, again.manifest != nil, first.hash)
	}

	changed := m.DeepCopy()
	changed.Generation++
	changed.Spec.Image = "other:1"
	next, err := f.handler.desired(changed)
	if err != nil {
		t.Fatal(err)
	}
	if next.hash == first.hash || next.hash != memcachedtest.CurrentHash(changed) {
		t.Errorf("next generation: got hash %q, want a new one, %q", next.hash, memcachedtest.CurrentHash(changed))
	}

	recreated := m.DeepCopy()
	recreated.UID = "uid-recreated"
	if _, ok := f.handler.templates.get("test/example", recreated.UID, recreated.Generation); ok {
		t.Errorf("a Memcached recreated under the same name got the old one's hash")
	}
	if err := f.handle(changed, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.handler.templates.get("test/example", changed.UID, changed.Generation); ok {
		t.Errorf("the hash of a deleted Memcached is still remembered")
	}
}

func TestSetsTheProgressDeadlineOfExistingDeployments(t *testing.T) {
	tests := []struct {
		name     string
		deadline *int32
	}{
		{name: "defaulted by the API server", deadline: memcachedtest.Int32p(600)},
		{name: "edited", deadline: memcachedtest.Int32p(30)},
		{name: "unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			d := memcachedtest.OwnedDeployment(m, 1)
			d.Spec.ProgressDeadlineSeconds = tt.deadline
			f := newFixture(t, m, d, memcachedtest.OwnedService(m))

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}

			checkActions(t, f.client.actions, writesDeployment("patch deployment test/example"))
			if got, want := f.client.patches["patch deployment test/example"], `[{"op":"test","path":"/metadata/uid","value":"uid-deployment"},{"op":"add","path":"/spec/progressDeadlineSeconds","value":300}]`; got != want {
				t.Errorf("patch: got %s, want %s: the UID test and the deadline alone, no roll", got, want)
			}
			after := f.client.deployments["test/example"]
			if s := after.Spec.ProgressDeadlineSeconds; s == nil || *s != memcached.ProgressDeadlineSeconds || memcached.TemplateOf(after) != memcached.TemplateOf(d) {
				t.Errorf("deployment after the patch: deadline %v, template %s; want %d and the same template", s, memcached.TemplateOf(after), memcached.ProgressDeadlineSeconds)
			}
			if got := f.events(); len(got) != 0 {
				t.Errorf("events: got %q, want none: no pod changes", got)
			}
		})
	}
}

// TestNeverPatchesAReplacedChild covers a child that someone deleted and
// created anew, with another UID, while the cache still shows the old one:
// every patch tests the UID the cache shows, so the API server refuses it,
// and the reconcile is retried quietly, with no Degraded condition and no
// Event, until the cache shows the new child.
func TestNeverPatchesAReplacedChild(t *testing.T) {
	tests := []struct {
		name string
		// change makes m's spec or its child differ, so that the reconcile
		// patches the child cached as kind.
		change    func(m *v1alpha1.Memcached, objs []runtime.Object)
		cached    string
		wantPatch string
	}{
		{
			name:      "scale",
			change:    func(m *v1alpha1.Memcached, _ []runtime.Object) { m.Spec.Size = 3 },
			cached:    "deployment test/example",
			wantPatch: "scale deployment test/example 3",
		},
		{
			name:      "pod template",
			change:    func(m *v1alpha1.Memcached, _ []runtime.Object) { m.Spec.Image = "registry.local/memcached:1.6.99" },
			cached:    "deployment test/example",
			wantPatch: "apply deployment test/example",
		},
		{
			name:      "service",
			change:    func(_ *v1alpha1.Memcached, objs []runtime.Object) { objs[2].(*corev1.Service).Spec.Ports[0].Port = 80 },
			cached:    "service test/example",
			wantPatch: "patch service test/example",
		},
		{
			name: "budget",
			change: func(_ *v1alpha1.Memcached, objs []runtime.Object) {
				two := intstr.FromInt(2)
				objs[3].(*policyv1beta1.PodDisruptionBudget).Spec.MaxUnavailable = &two
			},
			cached:    "poddisruptionbudget test/example",
			wantPatch: "patch poddisruptionbudget test/example",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			objs := inSync(m, 2)
			tt.change(m, objs)
			f := newFixture(t, objs...)
			f.client.cachedUID[tt.cached] = "uid-replaced"

			err := f.handle(m, false)

			if !IsStale(err) || !errors.Is(err, kube.ErrReplaced) {
				t.Fatalf("reconcile: got %v, want a stale write of a replaced child", err)
			}
			var writes []string
			for _, a := range f.client.actions {
				if !strings.HasPrefix(a, "get ") && !strings.HasPrefix(a, "list ") {
					writes = append(writes, a)
				}
			}
			if got := strings.Join(writes, ","); got != tt.wantPatch {
				t.Errorf("writes: got %q, want only the refused %q, and no status", got, tt.wantPatch)
			}
			d, s, p := f.client.deployments["test/example"], f.client.services["test/example"], f.client.pdbs["test/example"]
			if *d.Spec.Replicas != 2 || memcached.TemplateOf(d) != memcached.TemplateOf(objs[1].(*appsv1.Deployment)) ||
				!reflect.DeepEqual(s.Spec, objs[2].(*corev1.Service).Spec) || !reflect.DeepEqual(p.Spec, objs[3].(*policyv1beta1.PodDisruptionBudget).Spec) {
				t.Errorf("a child changed: replicas %d, template %q, service %+v, budget %+v", *d.Spec.Replicas, memcached.TemplateOf(d), s.Spec, p.Spec)
			}
			if got := f.events(); len(got) != 0 {
				t.Errorf("events: got %q, want none", got)
			}
			if n := f.handler.queue.NumRequeues("test/example"); n != 1 {
				t.Errorf("requeues: got %d, want the memcached requeued", n)
			}
		})
	}
}
