package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestPolicy runs an operator with every policy flag on, as a cluster
// whose tenants may create Memcacheds but not pods would: a Memcached whose
// image is outside the allowed prefixes, whose priority class is not in the
// list, or that tolerates every taint with a keyless Exists toleration is
// Degraded=True PolicyViolation with a Warning Event, and gets no pod; one
// that complies gets its Deployment and (fake) pods; KWOK runs no image, so
// nothing here shows memcached starting. An existing Memcached changed to break the policy
// keeps its Deployment and pods as they were.
func TestPolicy(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	allowed, other := ns.name+"-allowed", ns.name+"-other"
	// Both classes exist, so that only the policy, not a missing class,
	// can keep the pods from being created.
	for _, class := range []string{allowed, other} {
		ns.priorityClass(class)
	}
	const prefix = "registry.example.com/e2e/"
	ns.startOperator("--allowed-image-prefixes="+prefix, "--allowed-priority-classes="+allowed, "--forbid-keyless-tolerations")

	for _, c := range []struct {
		name, object, spec, why string
	}{
		{"an image outside the prefixes", "other-image", "image: evil.example.org/miner:1",
			`spec.image "evil.example.org/miner:1" does not start with one of the prefixes the operator allows (` + prefix + ")"},
		{"a priority class outside the list", "other-priority", "priorityClassName: " + other,
			fmt.Sprintf("spec.priorityClassName %q is not one of the priority classes the operator allows (%s)", other, allowed)},
		{"a keyless Exists toleration", "every-taint", "tolerations: [{operator: Exists}]",
			"spec.tolerations[0] has no key and operator Exists, which tolerates every taint"},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			ns := ns.withT(t)
			ns.apply(memcachedManifest(c.object, "spec:\n  size: 2\n  "+c.spec+"\n"))
			ns.waitDegradedWarning(c.object, "PolicyViolation", c.why)
			o := ns.snapshot(c.object)
			if o.Deployment != nil || len(o.Pods) != 0 {
				t.Errorf("deployment %v and pods %v, want none", o.Deployment != nil, o.PodNames())
			}
		})
	}

	t.Run("converges a compliant Memcached, and leaves it as it was when it breaks the policy", func(t *testing.T) {
		ns := ns.withT(t)
		ns.apply(memcachedManifest("compliant", fmt.Sprintf(`spec:
  size: 2
  image: %smemcached:ok
  priorityClassName: %s
  tolerations: [{key: example.com/dedicated, operator: Exists}]
`, prefix, allowed)))
		before := ns.waitConverged("compliant", 2)
		ctx := context.Background()
		d, err := ns.deployment(ctx, "compliant")
		if err != nil {
			t.Fatal(err)
		}

		ns.run("patch", "memcached", "compliant", "--type=merge", "-p", `{"spec":{"size":3,"image":"evil.example.org/miner:1"}}`)
		ns.waitDegradedWarning("compliant", "PolicyViolation", `spec.image "evil.example.org/miner:1" does not start with`)
		after, err := ns.deployment(ctx, "compliant")
		if err != nil {
			t.Fatal(err)
		}
		if after.Metadata.UID != d.Metadata.UID || after.Spec.Replicas == nil || *after.Spec.Replicas != 2 || after.hash() != d.hash() ||
			!reflect.DeepEqual(after.Spec.Template.Spec.Containers, d.Spec.Template.Spec.Containers) {
			t.Errorf("deployment uid %s, replicas %d, template %s, containers %+v; want %s, 2, %s, %+v as they were",
				after.Metadata.UID, framework.Deref(after.Spec.Replicas), after.hash(), after.Spec.Template.Spec.Containers,
				d.Metadata.UID, d.hash(), d.Spec.Template.Spec.Containers)
		}
		if o := ns.snapshot("compliant"); !slices.Equal(o.PodNames(), before.PodNames()) {
			t.Errorf("pods %v, want %v as they were", o.PodNames(), before.PodNames())
		}

		ns.run("patch", "memcached", "compliant", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"image":"%smemcached:ok"}}`, prefix))
		ns.waitConverged("compliant", 3)
	})
}

// priorityClass creates the PriorityClass name, which never preempts, and
// deletes it when the test ends.
func (ns *namespace) priorityClass(name string) {
	ns.t.Helper()
	ctx := context.Background()
	if _, err := cluster.Kubectl().RunWithInput(ctx, fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: %s
value: 100
preemptionPolicy: Never
description: memcached pods of %s
`, name, ns.name), "apply", "-f", "-"); err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(func() {
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "priorityclass", name, "--ignore-not-found"); err != nil {
			ns.t.Errorf("cleanup: %v", err)
		}
	})
}

// waitDegradedWarning waits until Memcached name is Degraded=True with
// reason and a message that holds why, and has one Warning Event of that
// reason that says the same.
func (ns *namespace) waitDegradedWarning(name, reason, why string) {
	ns.t.Helper()
	ns.eventually("condition Degraded=True "+reason+" and its Warning Event", func(ctx context.Context) error {
		o, err := framework.Observe(ctx, ns.kubectl, name)
		if err != nil {
			return err
		}
		if c := o.Memcached.Condition("Degraded"); c == nil || c.Status != "True" || c.Reason != reason || !strings.Contains(c.Message, why) {
			return fmt.Errorf("condition Degraded = %+v, want True, reason %s, saying %q", c, reason, why)
		}
		evs, err := ns.events(ctx, name, reason)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, why) {
			return fmt.Errorf("events = %+v, want one Warning saying %q", evs, why)
		}
		return nil
	})
}
