package stub

import (
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// loosen marks d as the cache observes it when its live template has
// findings (see memcached.LooserSecurity).
func loosen(d *appsv1.Deployment, findings ...string) {
	d.Annotations[memcached.LoosenedAnnotation] = memcached.LoosenedValue(findings)
}

// checkPutBack fails t unless the reconcile patched example's pod spec
// back, testing its UID, with one Warning SecurityRestored naming finding,
// and reported Progressing=True Restoring; then a second reconcile, from
// what the cache shows afterwards, writes nothing.
func checkPutBack(t *testing.T, f *fixture, finding string) {
	t.Helper()
	patch := f.client.patches["patch deployment test/example"]
	if !strings.HasPrefix(patch, `[{"op":"test","path":"/metadata/uid","value":"uid-deployment"}`) || !strings.Contains(patch, `"path":"/spec/template/spec"`) {
		t.Errorf("patch: got %s, want a test of the UID and the pod spec set whole", patch)
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonSecurityRestored+" ") || !strings.Contains(got[0], finding) {
		t.Errorf("events: got %q, want one Warning %s naming %s", got, ReasonSecurityRestored, finding)
	}
	if c := f.progressing("example"); c.Status != corev1.ConditionTrue || c.Reason != memcached.ReasonRestoring || !strings.Contains(c.Message, finding) {
		t.Errorf("Progressing: got %s %s %q, want True %s naming %s", c.Status, c.Reason, c.Message, memcached.ReasonRestoring, finding)
	}
	d := f.client.deployments["test/example"]
	if _, ok := d.Annotations[memcached.LoosenedAnnotation]; ok {
		t.Errorf("the cache still finds %q", d.Annotations[memcached.LoosenedAnnotation])
	}

	f.requireNothingToRestore("example")
}

// TestPutsBackLoosenedContainerSecurityContext: runAsNonRoot false on the
// memcached container, which the operator's apply does not own (it sets
// runAsNonRoot on the pod) and so leaves, is put back by a patch of the
// pod spec alone: every field the operator set still holds its value, so
// no apply follows.
func TestPutsBackLoosenedContainerSecurityContext(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2)
	d := objs[1].(*appsv1.Deployment)
	root := false
	d.Spec.Template.Spec.Containers[0].SecurityContext.RunAsNonRoot = &root
	const finding = "containers[memcached].securityContext.runAsNonRoot"
	loosen(d, finding)
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, writesDeployment("patch deployment test/example"))
	got := f.client.deployments["test/example"]
	if s := got.Spec.Template.Spec.Containers[0].SecurityContext; s.RunAsNonRoot != nil {
		t.Errorf("memcached's runAsNonRoot: got %v, want it gone, the pod's true holding", *s.RunAsNonRoot)
	}
	if got.Spec.Template.Annotations[memcached.SpecHashAnnotation] != memcachedtest.MustSpecHash(m) || memcached.TemplateOf(got) != memcachedtest.CurrentHash(m) {
		t.Errorf("template annotations: got %v, want the operator's record kept", got.Spec.Template.Annotations)
	}
	checkPutBack(t, f, finding)
}

// TestPutsBackAnAddedPrivilegedContainerAndHostPath: a container someone
// added, privileged, with a host path volume, both owned by their adder
// and so beyond the operator's apply, go with the patch of the pod spec;
// the operator's image, which the same edit changed, comes back by the
// apply that follows, which takes its fields back.
func TestPutsBackAnAddedPrivilegedContainerAndHostPath(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2)
	d := objs[1].(*appsv1.Deployment)
	privileged := true
	d.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
		Name: "debug", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
		VolumeMounts: []corev1.VolumeMount{{Name: "root", MountPath: "/host"}},
	})
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{
		Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}},
	})
	d.Annotations[memcached.ObservedDigestAnnotation] = "edited"
	loosen(d, "containers[debug].securityContext.allowPrivilegeEscalation", "containers[debug].securityContext.privileged", "volumes[root].hostPath")
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions[:3], []string{
		"get deployment test/example",
		"patch deployment test/example",
		"apply deployment test/example",
	})
	got := f.client.deployments["test/example"].Spec.Template.Spec
	if len(got.Containers) != 1 || got.Containers[0].Name != "memcached" || got.Containers[0].Image != memcachedtest.Image {
		t.Errorf("containers: got %+v, want memcached alone, running %s", got.Containers, memcachedtest.Image)
	}
	if len(got.Volumes) != 0 {
		t.Errorf("volumes: got %+v, want none", got.Volumes)
	}
	checkPutBack(t, f, "volumes[root].hostPath")
}

// TestPutsBackALoosenedTemplateAtOnce: a loosened template whose hash is
// that of an earlier release, which the operator would roll only in the
// maintenance window and in a paced roll, is no operator change: its pod
// spec is put back, with the current template, at once and unpaced.
func TestPutsBackALoosenedTemplateAtOnce(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Status.ObservedGeneration = 1
	d := memcachedtest.PacedDeployment(m, 2)
	d.Spec.Template.Annotations[memcached.TemplateHashAnnotation] = "earlier"
	d.Spec.Template.Spec.HostPID = true
	loosen(d, "hostPID")
	objs := []runtime.Object{m, d, memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m)}
	f := newFixture(t, objs...)
	f.handler.UseMaintenanceWindow(tuesday3am)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions[:4], []string{
		"get deployment test/example",
		// Whether the paced roll it records is in flight, for the pacing.
		"list pods test app=memcached,memcached_cr=example",
		"patch deployment test/example",
		"apply deployment test/example",
	})
	patch := f.client.patches["patch deployment test/example"]
	if !strings.Contains(patch, `{"op":"remove","path":"/spec/template/metadata/annotations/cache.example.com~1paced-roll"}`) {
		t.Errorf("patch: got %s, want the earlier paced roll's mark removed, as the apply does", patch)
	}
	got := f.client.deployments["test/example"]
	if memcached.TemplateOf(got) != memcachedtest.CurrentHash(m) || got.Spec.Template.Annotations[memcached.PacedRollAnnotation] != "" || got.Spec.Template.Spec.HostPID {
		t.Errorf("template: annotations %v, hostPID %v; want the current template, unpaced, without hostPID", got.Spec.Template.Annotations, got.Spec.Template.Spec.HostPID)
	}
	var warned bool
	for _, e := range f.events() {
		warned = warned || strings.HasPrefix(e, "Warning "+ReasonSecurityRestored+" ")
	}
	if !warned {
		t.Errorf("no Warning %s", ReasonSecurityRestored)
	}
	if c := f.progressing("example"); c.Reason != memcached.ReasonRestoring {
		t.Errorf("Progressing: got %s %s %q, want True %s", c.Status, c.Reason, c.Message, memcached.ReasonRestoring)
	}
}

// TestLeavesATemplateWithNothingLoosenedAlone: with the digest of what
// the operator applied and no finding, nothing is written, whatever
// others added that loosens nothing, such as an environment variable
// (which the cache's digest does not count).
func TestLeavesATemplateWithNothingLoosenedAlone(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	objs := inSync(m, 2, memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true), memcachedtest.NewPod(m, "example-b", corev1.PodRunning, true))
	d := objs[1].(*appsv1.Deployment)
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FOO", Value: "bar"}}
	m.Status = inSyncStatus(m, "example-a", "example-b")
	objs[0] = m
	f := newFixture(t, objs...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	checkActions(t, f.client.actions, steady())
	if got := f.events(); len(got) != 0 {
		t.Errorf("events: got %q, want none", got)
	}
}
