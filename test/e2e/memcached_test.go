package e2e

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestCreate: a new Memcached gets a Deployment of spec.size replicas that it
// controls, its pods go Running, and status.nodes lists them sorted.
func TestCreate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.createMemcached("cache", 3)
	o := ns.waitConverged("cache", 3)
	t.Logf("status.nodes = %v", o.Memcached.Status.Nodes)

	t.Run("the operator runs as its ServiceAccount with deploy/rbac.yaml", func(t *testing.T) {
		ctx := context.Background()
		asOperator := framework.Kubectl{Binary: paths.Tool("kubectl"), Kubeconfig: ns.operatorKubeconfig, CacheDir: paths.KubeCacheDir()}
		user, err := asOperator.Run(ctx, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:" + ns.name + ":" + operatorSA; user != want {
			t.Errorf("operator user = %q, want %q", user, want)
		}
		// A sample of what the operator needs and what it must not have; the full
		// rule set is deploy/rbac.yaml's to define.
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "deployments.apps", "-n", ns.name}, "yes"},
			{[]string{"watch", "memcacheds.cache.example.com", "-n", ns.name}, "yes"},
			{[]string{"update", "memcacheds.cache.example.com", "--subresource=status", "-n", ns.name}, "yes"},
			{[]string{"update", "memcacheds.cache.example.com", "-n", ns.name}, "no"},
			{[]string{"delete", "deployments.apps", "-n", ns.name}, "no"},
			{[]string{"get", "secrets", "-n", ns.name}, "no"},
			{[]string{"list", "memcacheds.cache.example.com", "-n", "default"}, "no"},
			{[]string{"list", "namespaces"}, "no"},
		} {
			// `kubectl auth can-i` exits 1 when the answer is no.
			out, _ := asOperator.Run(ctx, append([]string{"auth", "can-i"}, c.args...)...)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("operator: kubectl auth can-i %s = %q, want %q", strings.Join(c.args, " "), got, c.want)
			}
		}
	})
	t.Run("kubectl shows the printer columns and the short name", func(t *testing.T) {
		// The columns are the CRD's (SIZE, READY, AVAILABLE), then AGE; the
		// values are those of a converged Memcached of size 3.
		out := ns.run("get", "mc", "cache")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl get mc cache = %q, want a header and one row", out)
		}
		if got, want := strings.Fields(lines[0]), []string{"NAME", "SIZE", "READY", "AVAILABLE", "AGE"}; !slices.Equal(got, want) {
			t.Errorf("kubectl get mc cache columns = %q, want %q", got, want)
		}
		if got, want := strings.Fields(lines[1]), []string{"cache", "3", "3", "True"}; len(got) != 5 || !slices.Equal(got[:4], want) {
			t.Errorf("kubectl get mc cache row = %q, want %q and an age", got, want)
		}
	})
}

// TestScale: spec.size changes up, down and to zero, both by editing the resource
// and through the scale subresource (`kubectl scale`), reach the Deployment, the
// pods and status.nodes, without ever rolling out a new pod template.
func TestScale(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.createMemcached("cache", 1)
	first := ns.waitConverged("cache", 1)
	// Scaling must never roll the Deployment: every pod, through every step,
	// comes from the first pod's template.
	hash := first.Pods[0].Metadata.Labels["pod-template-hash"]

	steps := []struct {
		name   string
		size   int
		change func(name string, size int)
	}{
		{"up by editing spec.size", 4, ns.setSize},
		{"down with kubectl scale", 2, ns.scale},
		{"to zero by editing spec.size", 0, ns.setSize},
		{"up from zero with kubectl scale", 3, ns.scale},
		{"down by editing spec.size", 1, ns.setSize},
		{"to zero with kubectl scale", 0, ns.scale},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			s.change("cache", s.size)
			o := ns.waitConverged("cache", s.size)
			if s.size == 0 && o.Memcached.Status.Nodes == nil {
				t.Errorf("status.nodes is absent at size 0, want an empty list")
			}
			for _, p := range o.Pods {
				if got := p.Metadata.Labels["pod-template-hash"]; got != hash {
					t.Errorf("pod %s has pod-template-hash %q, want %q: scaling rolled the deployment", p.Metadata.Name, got, hash)
				}
			}
		})
		if !ok {
			return // later steps start from this one's state
		}
	}
}

// TestDrift: changes made to the children behind the operator's back are
// undone: replicas, every field of the pod template and strategy that the
// operator sets, the children's labels, a deleted Deployment.
func TestDrift(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.createMemcached("cache", 3)
	before := ns.waitConverged("cache", 3)

	ok := t.Run("replicas edited on the Deployment are restored", func(t *testing.T) {
		gen := before.Deployment.Metadata.Generation
		ns.run("scale", "deployment/cache", "--replicas=5")
		// The edit and the operator's restore each bump the Deployment's generation.
		ns.eventually("the operator to restore replicas 3 after the edit to 5", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "cache")
			if err != nil {
				return err
			}
			if o.Deployment == nil || o.Deployment.Metadata.Generation < gen+2 {
				return fmt.Errorf("deployment generation is still below %d (edit and restore)", gen+2)
			}
			return framework.Converged(o, 3)
		})
		if o := ns.snapshot("cache"); o.Deployment.Metadata.UID != before.Deployment.Metadata.UID {
			t.Errorf("deployment was replaced (uid %s -> %s), want it scaled in place", before.Deployment.Metadata.UID, o.Deployment.Metadata.UID)
		}
	})
	if !ok {
		return
	}
	ok = t.Run("hand edits of what the operator set are put back", func(t *testing.T) {
		ctx := context.Background()
		original := ns.childJSON(ctx, "deployment")
		originalService := ns.childJSON(ctx, "service")
		edits := []struct {
			name string
			args []string
		}{
			{"the image", []string{"set", "image", "deployment/cache", "memcached=example.com/someone/else:1"}},
			{"the command", []string{"patch", "deployment", "cache", "--type=json", "-p",
				`[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["memcached","-m","8"]}]`}},
			{"runAsNonRoot", []string{"patch", "deployment", "cache", "--type=json", "-p",
				`[{"op":"replace","path":"/spec/template/spec/securityContext/runAsNonRoot","value":false}]`}},
			{"the strategy", []string{"patch", "deployment", "cache", "--type=json", "-p",
				`[{"op":"replace","path":"/spec/strategy/rollingUpdate/maxUnavailable","value":3}]`}},
			{"the Deployment's labels", []string{"label", "deployment", "cache", "app-", "memcached_cr-"}},
			{"the Service's labels", []string{"label", "service", "cache", "app-", "memcached_cr=someone", "--overwrite"}},
		}
		for i, e := range edits {
			var status *framework.StatusRecorder
			if i == 0 {
				status = ns.recordStatus("cache")
			}
			ns.run(e.args...)
			ns.eventually("the operator to put back "+e.name, func(ctx context.Context) error {
				if err := sameChild(ns.childJSON(ctx, "deployment"), original); err != nil {
					return fmt.Errorf("deployment: %v", err)
				}
				if err := sameChild(ns.childJSON(ctx, "service"), originalService); err != nil {
					return fmt.Errorf("service: %v", err)
				}
				o, err := framework.Observe(ctx, ns.kubectl, "cache")
				if err != nil {
					return err
				}
				return framework.Converged(o, 3)
			})
			if status != nil {
				// Written by the reconcile that put the template back, so
				// that a watch sees it however fast the pods roll back.
				if seen := finishRecording(t, status, "False/Complete"); !slices.Contains(seen, "True/Restoring") {
					t.Errorf("Progressing states while the image was put back: %v, want True/Restoring among them", seen)
				}
			}
		}
		if o := ns.snapshot("cache"); o.Deployment.Metadata.UID != before.Deployment.Metadata.UID {
			t.Errorf("deployment was replaced (uid %s -> %s), want it restored in place", before.Deployment.Metadata.UID, o.Deployment.Metadata.UID)
		}
		// The operator's recorder sends Events from a goroutine of its
		// own, so the Event may land after the state it reports.
		ns.eventually("a DeploymentRestored Event", func(ctx context.Context) error {
			restored, err := ns.events(ctx, "cache", "DeploymentRestored")
			if err == nil && len(restored) == 0 {
				err = errors.New("none yet")
			}
			return err
		})
	})
	if !ok {
		return
	}
	t.Run("a deleted Deployment is recreated", func(t *testing.T) {
		ns.run("delete", "deployment", "cache", "--wait=true")
		ns.eventually("a new deployment cache with 3 Running pods", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "cache")
			if err != nil {
				return err
			}
			if o.Deployment != nil && o.Deployment.Metadata.UID == before.Deployment.Metadata.UID {
				return fmt.Errorf("deployment still has the deleted uid %s", before.Deployment.Metadata.UID)
			}
			return framework.Converged(o, 3)
		})
	})
}

// childJSON returns the kind child of Memcached cache as the API server has
// it, or nil when it cannot be read.
func (ns *namespace) childJSON(ctx context.Context, kind string) map[string]any {
	var obj map[string]any
	if err := ns.kubectl.GetJSON(ctx, &obj, kind, "cache"); err != nil {
		return nil
	}
	return obj
}

// sameChild reports how got's labels, its Deployment's strategy and pod
// template, or its Service's selector and ports, differ from want's.
func sameChild(got, want map[string]any) error {
	if got == nil {
		return fmt.Errorf("not read")
	}
	labels := func(o map[string]any) any { return o["metadata"].(map[string]any)["labels"] }
	if !reflect.DeepEqual(labels(got), labels(want)) {
		return fmt.Errorf("labels %v, want %v", labels(got), labels(want))
	}
	gs, ws := got["spec"].(map[string]any), want["spec"].(map[string]any)
	for _, f := range []string{"strategy", "template", "selector", "ports"} {
		if !reflect.DeepEqual(gs[f], ws[f]) {
			return fmt.Errorf("spec.%s %v, want %v", f, gs[f], ws[f])
		}
	}
	return nil
}

// TestGarbageCollection: deleting a Memcached removes its Deployment, ReplicaSet and
// pods through their owner references (the operator ignores deletes).
func TestGarbageCollection(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.createMemcached("cache", 2)
	ns.createMemcached("keep", 1)
	ns.waitConverged("cache", 2)
	keep := ns.waitConverged("keep", 1)

	ns.run("delete", "memcached", "cache", "--wait=true")
	ns.eventually("the deployment, replicasets and pods of cache to be gone", func(ctx context.Context) error {
		var left []string
		for _, args := range [][]string{
			{"deployment", "cache", "--ignore-not-found", "-o", "name"},
			{"replicasets", "-l", "memcached_cr=cache", "-o", "name"},
			{"pods", "-l", "memcached_cr=cache", "-o", "name"},
		} {
			out, err := ns.kubectl.Run(ctx, append([]string{"get"}, args...)...)
			if err != nil {
				return err
			}
			left = append(left, strings.Fields(out)...)
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %v", left)
		}
		return nil
	})
	o := ns.waitConverged("keep", 1)
	if o.Deployment.Metadata.UID != keep.Deployment.Metadata.UID {
		t.Errorf("deployment keep was replaced while cache was collected")
	}
}

// TestForeignDeployment: a Deployment with the Memcached's name that it does not
// control is left untouched, and reported with a Warning Event DeploymentNotOwned
// and a Degraded condition.
func TestForeignDeployment(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.apply(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: cache
  labels:
    app: someone-else
spec:
  replicas: 1
  selector:
    matchLabels:
      app: someone-else
  template:
    metadata:
      labels:
        app: someone-else
    spec:
      containers:
        - name: main
          image: registry.example.com/someone-else:1.0
`)
	var foreign framework.Deployment
	if err := ns.kubectl.GetJSON(context.Background(), &foreign, "deployment", "cache"); err != nil {
		t.Fatal(err)
	}
	ns.createMemcached("cache", 3)

	t.Run("a Warning Event DeploymentNotOwned is recorded on the Memcached", func(t *testing.T) {
		ns.eventually("Warning Event DeploymentNotOwned", func(ctx context.Context) error {
			evs, err := ns.events(ctx, "cache", "DeploymentNotOwned")
			if err != nil {
				return err
			}
			if len(evs) == 0 || evs[0].Type != "Warning" {
				return fmt.Errorf("events = %+v, want a Warning DeploymentNotOwned", evs)
			}
			t.Logf("event: %s %s: %s", evs[0].Type, evs[0].Reason, evs[0].Message)
			return nil
		})
	})
	t.Run("the Memcached is Degraded with reason DeploymentNotOwned", func(t *testing.T) {
		ns.eventually("condition Degraded=True", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "cache")
			if err != nil {
				return err
			}
			c := o.Memcached.Condition("Degraded")
			if c == nil || c.Status != "True" || c.Reason != "DeploymentNotOwned" {
				return fmt.Errorf("condition Degraded = %+v, want True with reason DeploymentNotOwned", c)
			}
			if len(o.Memcached.Status.Nodes) != 0 {
				return fmt.Errorf("status.nodes = %v, want none: no pod is the Memcached's", o.Memcached.Status.Nodes)
			}
			return nil
		})
	})
	t.Run("the foreign Deployment is untouched", func(t *testing.T) {
		// The operator keeps retrying the Memcached with backoff; watch the
		// Deployment through several retries, then check it field by field.
		err := framework.Consistently(context.Background(), 5*time.Second, "the foreign deployment's generation", func(ctx context.Context) error {
			var d framework.Deployment
			if err := ns.kubectl.GetJSON(ctx, &d, "deployment", "cache"); err != nil {
				return err
			}
			if d.Metadata.Generation != foreign.Metadata.Generation || len(d.Metadata.OwnerReferences) != 0 {
				return fmt.Errorf("generation %d (was %d), ownerReferences %+v", d.Metadata.Generation, foreign.Metadata.Generation, d.Metadata.OwnerReferences)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		var now framework.Deployment
		if err := ns.kubectl.GetJSON(context.Background(), &now, "deployment", "cache"); err != nil {
			t.Fatal(err)
		}
		if now.Metadata.UID != foreign.Metadata.UID {
			t.Errorf("deployment uid %s, want the foreign %s", now.Metadata.UID, foreign.Metadata.UID)
		}
		if now.Metadata.Generation != foreign.Metadata.Generation {
			t.Errorf("deployment generation %d, want %d: its spec was changed", now.Metadata.Generation, foreign.Metadata.Generation)
		}
		if len(now.Metadata.OwnerReferences) != 0 {
			t.Errorf("deployment ownerReferences = %+v, want none", now.Metadata.OwnerReferences)
		}
		if framework.Deref(now.Spec.Replicas) != 1 || now.Metadata.Labels["app"] != "someone-else" || now.Metadata.Labels["memcached_cr"] != "" {
			t.Errorf("deployment replicas %v labels %v, want 1 and app=someone-else only", framework.Deref(now.Spec.Replicas), now.Metadata.Labels)
		}
	})
}

// TestForeignPodIsNotCounted: a bare pod that carries a Memcached's labels, and
// that no ReplicaSet of its Deployment owns, is Running and Ready beside the real
// pods, yet status.nodes, replicas and readyReplicas leave it out after a scale
// makes the operator write the status again; and the operator leaves it alone.
func TestForeignPodIsNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	const name, bare = "counted", "counted-bare"
	ns.createMemcached(name, 1)
	ns.waitConverged(name, 1)
	ns.apply(`apiVersion: v1
kind: Pod
metadata:
  name: ` + bare + `
  labels:
    app: memcached
    memcached_cr: ` + name + `
spec:
  containers:
    - name: memcached
      image: memcached:1.6-alpine
`)
	ns.eventually("the bare pod to be Running and Ready", func(ctx context.Context) error {
		var p framework.Pod
		if err := ns.kubectl.GetJSON(ctx, &p, "pod", bare); err != nil {
			return err
		}
		if p.Status.Phase != "Running" || !p.Ready() {
			return fmt.Errorf("pod %s is %s, ready %t", bare, p.Status.Phase, p.Ready())
		}
		return nil
	})
	var bareUID string
	ns.setSize(name, 2)
	ns.eventually("the status to count the Deployment's 2 pods and not the bare one", func(ctx context.Context) error {
		o, err := framework.Observe(ctx, ns.kubectl, name)
		if err != nil {
			return err
		}
		var own []string
		for _, p := range o.Pods {
			if p.Metadata.Name == bare {
				bareUID = p.Metadata.UID
				continue
			}
			if len(p.Metadata.OwnerReferences) == 0 || p.Metadata.OwnerReferences[0].Kind != "ReplicaSet" {
				return fmt.Errorf("pod %s has owners %+v, want a ReplicaSet", p.Metadata.Name, p.Metadata.OwnerReferences)
			}
			if p.Metadata.DeletionTimestamp != nil || !p.Ready() {
				return fmt.Errorf("pod %s: ready %t, deleting %t", p.Metadata.Name, p.Ready(), p.Metadata.DeletionTimestamp != nil)
			}
			own = append(own, p.Metadata.Name)
		}
		slices.Sort(own)
		st := o.Memcached.Status
		if o.Memcached.Status.ObservedGeneration != o.Memcached.Metadata.Generation || !slices.Equal(st.Nodes, own) || st.Replicas != 2 || st.ReadyReplicas != 2 {
			return fmt.Errorf("status: observedGeneration %d of %d, nodes %q, replicas %d, readyReplicas %d; want the Deployment's 2 pods %q",
				st.ObservedGeneration, o.Memcached.Metadata.Generation, st.Nodes, st.Replicas, st.ReadyReplicas, own)
		}
		return nil
	})
	var p framework.Pod
	if err := ns.kubectl.GetJSON(ctx, &p, "pod", bare); err != nil {
		t.Fatalf("the bare pod: %v", err)
	}
	if p.Metadata.UID != bareUID || p.Metadata.DeletionTimestamp != nil || len(p.Metadata.OwnerReferences) != 0 {
		t.Errorf("the bare pod was touched: uid %s (was %s), deleting %t, owners %+v", p.Metadata.UID, bareUID, p.Metadata.DeletionTimestamp != nil, p.Metadata.OwnerReferences)
	}
}

// TestNamespaces: the operator acts only in WATCH_NAMESPACE, and operators in two
// namespaces manage same-named resources independently.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	a := newNamespace(t, slug(t.Name())+"-a")
	b := newNamespace(t, slug(t.Name())+"-b")
	a.startOperator()
	a.createMemcached("cache", 2)
	b.createMemcached("cache", 1)
	aBefore := a.waitConverged("cache", 2)

	ok := t.Run("the operator acts only in WATCH_NAMESPACE", func(t *testing.T) {
		// The Deployment and pod watches, the Memcached watch's initial list and the
		// retries all happen within seconds; a window of 15s covers them.
		err := framework.Consistently(context.Background(), 15*time.Second, "nothing happening in "+b.name, func(ctx context.Context) error {
			o, err := framework.Observe(ctx, b.kubectl, "cache")
			if err != nil {
				return err
			}
			if o.Deployment != nil || len(o.Pods) > 0 || o.Memcached.Status.Nodes != nil || o.Memcached.Status.Conditions != nil {
				return fmt.Errorf("unwatched namespace %s changed: deployment %v, %d pods, status %+v", b.name, o.Deployment != nil, len(o.Pods), o.Memcached.Status)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if !ok {
		return
	}
	ok = t.Run("a second operator manages its own namespace", func(t *testing.T) {
		b.startOperator()
		b.waitConverged("cache", 1)
		if o := a.waitConverged("cache", 2); o.Deployment.Metadata.UID != aBefore.Deployment.Metadata.UID {
			t.Errorf("deployment cache in %s was replaced", a.name)
		}
	})
	if !ok {
		return
	}
	t.Run("changes in one namespace leave the other alone", func(t *testing.T) {
		bBefore := b.snapshot("cache")
		a.scale("cache", 3)
		a.waitConverged("cache", 3)
		b.run("delete", "memcached", "cache", "--wait=true")
		b.eventually("deployment cache to be collected in "+b.name, func(ctx context.Context) error {
			o, err := b.kubectl.Run(ctx, "get", "deployment", "cache", "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if o != "" {
				return fmt.Errorf("still there: %s", o)
			}
			return nil
		})
		o := a.waitConverged("cache", 3)
		if o.Deployment.Metadata.UID != aBefore.Deployment.Metadata.UID {
			t.Errorf("deployment in %s was replaced", a.name)
		}
		if bBefore.Deployment.Metadata.UID == o.Deployment.Metadata.UID {
			t.Errorf("the two namespaces share a deployment uid %s", o.Deployment.Metadata.UID)
		}
	})
}

// TestOperatorRestart: the operator stops cleanly on SIGTERM, and after a restart it
// converges on everything that changed while it was down, including a change it was
// killed in the middle of.
func TestOperatorRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	op := ns.startOperator()
	ns.createMemcached("cache", 2)
	ns.waitConverged("cache", 2)

	ok := t.Run("SIGTERM stops it cleanly", func(t *testing.T) {
		if err := op.Stop(30 * time.Second); err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	})
	if !ok {
		return
	}
	ok = t.Run("changes made while it is down converge after a restart", func(t *testing.T) {
		ns.setSize("cache", 4)
		ns.createMemcached("later", 2)
		ns.run("delete", "pods", "-l", "memcached_cr=cache", "--wait=false")
		if err := op.Start(); err != nil {
			t.Fatal(err)
		}
		ns.waitConverged("cache", 4)
		ns.waitConverged("later", 2)
	})
	if !ok {
		return
	}
	t.Run("killed part-way through a burst of changes it converges after a restart", func(t *testing.T) {
		const burst, admitted = 8, 4
		before := ns.snapshot("cache")
		// A quota on Deployments holds the burst part-way, however fast the
		// machine: the operator creates admitted of the burst's Deployments
		// and keeps retrying the others, until the quota goes.
		ns.run("create", "quota", "burst", fmt.Sprintf("--hard=count/deployments.apps=%d", 2+admitted))
		ns.eventually("quota burst to count the deployments of cache and later", func(ctx context.Context) error {
			var q struct {
				Status struct {
					Used map[string]string `json:"used"`
				} `json:"status"`
			}
			if err := ns.kubectl.GetJSON(ctx, &q, "quota", "burst"); err != nil {
				return err
			}
			if got := q.Status.Used["count/deployments.apps"]; got != "2" {
				return fmt.Errorf("status.used = %v, want count/deployments.apps 2", q.Status.Used)
			}
			return nil
		})
		ns.setSize("cache", 6)
		var manifest strings.Builder
		for i := range burst {
			fmt.Fprintf(&manifest, "---\napiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: burst-%d\nspec:\n  size: 2\n", i)
		}
		ns.apply(manifest.String())
		// Kill it (SIGKILL, as a crash would) with some resources done and
		// others not.
		ns.eventually(fmt.Sprintf("the %d burst deployments that the quota admits", admitted), func(ctx context.Context) error {
			out, err := ns.kubectl.Run(ctx, "get", "deployments", "-l", "app=memcached", "-o", "name")
			if err != nil {
				return err
			}
			if n := strings.Count(out, "/burst-"); n != admitted {
				return fmt.Errorf("%d burst deployments", n)
			}
			return nil
		})
		op.Kill()
		t.Logf("killed part-way: %s", progress(t, ns, burst))
		ns.run("delete", "quota", "burst")
		ns.scale("later", 1)
		if err := op.Start(); err != nil {
			t.Fatal(err)
		}
		o := ns.waitConverged("cache", 6)
		if o.Deployment.Metadata.UID != before.Deployment.Metadata.UID {
			t.Errorf("deployment cache was replaced, want it scaled in place")
		}
		ns.waitConverged("later", 1)
		for i := range burst {
			ns.waitConverged(fmt.Sprintf("burst-%d", i), 2)
		}
	})
}

// progress describes how far the operator got with the burst resources, for the log.
func progress(t *testing.T, ns *namespace, burst int) string {
	t.Helper()
	var deployments, done int
	for i := range burst {
		o := ns.snapshot(fmt.Sprintf("burst-%d", i))
		if o.Deployment != nil {
			deployments++
		}
		if framework.Converged(o, 2) == nil {
			done++
		}
	}
	return fmt.Sprintf("%d of %d burst resources had a deployment, %d had converged", deployments, burst, done)
}
