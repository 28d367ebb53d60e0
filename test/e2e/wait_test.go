package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// refusedWaitTimeout is how long kubectl wait gets to show that it does not
// return for a refused spec. It bounds only how long the test looks: the
// operator has already written its status for that generation when kubectl
// starts, and nothing may make the condition true afterwards, so a slow
// machine cannot make it pass or fail.
const refusedWaitTimeout = 5 * time.Second

// TestKubectlWaitProgressing runs the real kubectl wait against the
// operator's conditions. --for=condition=Progressing=false returns once a
// scale and a roll are done, and when a refused change is fixed; it does
// not return for a change that the operator refuses (an image outside its
// policy, a keyless toleration the policy forbids, a new Memcached outside
// the policy: what the CRD cannot refuse, which a memoryMB too large for the
// default limit no longer is), although the operator has written
// Degraded=True for that very generation, and
// --for=condition=Degraded returns for it.
func TestKubectlWaitProgressing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	const (
		prefix = "registry.example.com/e2e/"
		name   = "cache"
		evil   = "evil.example.org/miner:1"
	)
	ns.startOperator("--allowed-image-prefixes="+prefix, "--forbid-keyless-tolerations")
	ns.apply(memcachedManifest(name, "spec:\n  size: 2\n  image: "+prefix+"memcached:1\n"))
	ns.waitConverged(name, 2)

	steps := []struct {
		name  string
		patch string
		// refused, unless "", is the reason of the refusal, and why what
		// its message holds; otherwise size pods of image must be rolled out.
		refused, why string
		size         int
		image        string
	}{
		{name: "returns once a scale is done", patch: `{"spec":{"size":3}}`, size: 3, image: prefix + "memcached:1"},
		{name: "returns once a roll is done", patch: `{"spec":{"image":"` + prefix + `memcached:2"}}`, size: 3, image: prefix + "memcached:2"},
		{name: "waits while an image outside the policy is refused", patch: `{"spec":{"image":"` + evil + `"}}`,
			refused: "PolicyViolation", why: `spec.image "` + evil + `" does not start with`},
		{name: "returns once the refused change is undone", patch: `{"spec":{"image":"` + prefix + `memcached:2"}}`, size: 3, image: prefix + "memcached:2"},
		{name: "waits while a keyless toleration is refused", patch: `{"spec":{"tolerations":[{"operator":"Exists"}]}}`,
			refused: "PolicyViolation", why: "spec.tolerations[0] has no key and operator Exists"},
		{name: "returns once the toleration names a key", patch: `{"spec":{"tolerations":[{"key":"dedicated","operator":"Exists"}]}}`, size: 3, image: prefix + "memcached:2"},
	}
	for _, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) {
			ns := ns.withT(t)
			generation := ns.patchGeneration(name, step.patch)
			if step.refused != "" {
				ns.waitRefusedGeneration(name, generation, step.refused, step.why)
				ns.requireProgressingWaitTimesOut(name)
				ns.requireWaitReturns(name, "Degraded")
				return
			}
			ns.requireWaitReturns(name, "Progressing=false")
			ns.requireRolledOutFor(name, generation, step.size, step.image)
		})
		if !ok {
			return
		}
	}

	t.Run("waits for a new Memcached whose spec is refused", func(t *testing.T) {
		ns := ns.withT(t)
		// Size 0, whose pods are all Ready at once, so that nothing but
		// the generation keeps Progressing from reading False.
		ns.apply(memcachedManifest("refused", "spec:\n  size: 0\n  image: "+evil+"\n"))
		ns.waitRefusedGeneration("refused", 1, "PolicyViolation", `spec.image "`+evil+`" does not start with`)
		ns.requireProgressingWaitTimesOut("refused")
		ns.requireWaitReturns("refused", "Degraded")
	})
}

// patchGeneration merge-patches the spec of Memcached name and returns the
// metadata.generation the API server gave the change.
func (ns *namespace) patchGeneration(name, patch string) int64 {
	ns.t.Helper()
	out := ns.run("patch", "memcached", name, "--type=merge", "-p", patch, "-o", "jsonpath={.metadata.generation}")
	generation, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		ns.t.Fatalf("generation after the patch %s: %v", patch, err)
	}
	return generation
}

// waitRefusedGeneration waits until the operator has written its refusal
// of generation of Memcached name: Degraded=True with reason, a message
// that holds why, and observedGeneration generation. Then the status must
// not claim that generation acted on: status.observedGeneration and
// Progressing's, if there is one, are below it.
func (ns *namespace) waitRefusedGeneration(name string, generation int64, reason, why string) {
	ns.t.Helper()
	var m framework.Memcached
	ns.eventually(fmt.Sprintf("condition Degraded=True %s for generation %d", reason, generation), func(ctx context.Context) error {
		var err error
		if m, err = ns.memcached(ctx, name); err != nil {
			return err
		}
		c := m.Condition("Degraded")
		if c == nil || c.Status != "True" || c.Reason != reason || !strings.Contains(c.Message, why) || c.ObservedGeneration != generation {
			return fmt.Errorf("condition Degraded = %+v, want True, reason %s, saying %q, for generation %d", c, reason, why, generation)
		}
		return nil
	})
	if m.Status.ObservedGeneration >= generation {
		ns.t.Errorf("status.observedGeneration = %d, want it below the refused generation %d", m.Status.ObservedGeneration, generation)
	}
	if c := m.Condition("Progressing"); c != nil && c.ObservedGeneration >= generation {
		ns.t.Errorf("condition Progressing = %+v, want it for a generation below the refused %d", c, generation)
	}
}

// requireProgressingWaitTimesOut runs kubectl wait
// --for=condition=Progressing=false on Memcached name with a short timeout
// and fails the test unless kubectl reports that it timed out.
func (ns *namespace) requireProgressingWaitTimesOut(name string) {
	ns.t.Helper()
	out, err := ns.kubectlWait(name, "Progressing=false", refusedWaitTimeout)
	if err == nil {
		ns.t.Fatalf("kubectl wait --for=condition=Progressing=false returned %q for a refused spec, want it to time out; memcached:\n%s", out, ns.run("get", "memcached", name, "-o", "yaml"))
	}
	if !strings.Contains(err.Error(), "timed out waiting for the condition") {
		ns.t.Fatalf("kubectl wait --for=condition=Progressing=false: got %v, want a timeout", err)
	}
}

// requireWaitReturns runs kubectl wait --for=condition=cond on Memcached
// name and fails the test unless it returns within convergeTimeout.
func (ns *namespace) requireWaitReturns(name, cond string) {
	ns.t.Helper()
	if _, err := ns.kubectlWait(name, cond, convergeTimeout); err != nil {
		ns.t.Fatalf("kubectl wait --for=condition=%s: %v; memcached:\n%s", cond, err, ns.run("get", "memcached", name, "-o", "yaml"))
	}
}

// kubectlWait runs kubectl wait --for=condition=cond on Memcached name with
// kubectl's own --timeout.
func (ns *namespace) kubectlWait(name, cond string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+framework.CommandTimeout)
	defer cancel()
	return ns.kubectl.Run(ctx, "wait", "memcached/"+name, "--for=condition="+cond, "--timeout="+timeout.String())
}

// requireRolledOutFor checks, once, what the status says when kubectl wait
// --for=condition=Progressing=false has returned for generation of
// Memcached name: that generation acted on, size pods Ready, and
// Progressing False Complete for it; and that the Deployment runs size
// replicas of image. Then it waits for the pods themselves to match (see
// waitRolledOut), since pods of the older template may still be going away.
func (ns *namespace) requireRolledOutFor(name string, generation int64, size int, image string) {
	ns.t.Helper()
	ctx := context.Background()
	m, err := ns.memcached(ctx, name)
	if err != nil {
		ns.t.Fatal(err)
	}
	if m.Status.ObservedGeneration != generation || m.Status.ReadyReplicas != size {
		ns.t.Errorf("status.observedGeneration %d, readyReplicas %d, want %d and %d", m.Status.ObservedGeneration, m.Status.ReadyReplicas, generation, size)
	}
	if c := m.Condition("Progressing"); c == nil || c.Status != "False" || c.Reason != "Complete" || c.ObservedGeneration != generation {
		ns.t.Errorf("condition Progressing = %+v, want False, reason Complete, for generation %d", c, generation)
	}
	d, err := ns.deployment(ctx, name)
	if err != nil {
		ns.t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != size || len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].Image != image {
		ns.t.Errorf("deployment replicas %v, containers %+v, want %d of image %s", framework.Deref(d.Spec.Replicas), d.Spec.Template.Spec.Containers, size, image)
	}
	ns.waitRolledOut(name, size)
}
