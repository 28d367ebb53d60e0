package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// requireStuck waits until Memcached name is Degraded with the ReplicaSet
// controller's FailedCreate and a message that contains cause, and its
// Progressing condition says what is stuck.
func (ns *namespace) requireStuck(name, cause string) {
	ns.t.Helper()
	ns.eventually("condition Degraded=True FailedCreate saying "+cause, func(ctx context.Context) error {
		o, err := framework.Observe(ctx, ns.kubectl, name)
		if err != nil {
			return err
		}
		c := o.Memcached.Condition("Degraded")
		if c == nil || c.Status != "True" || c.Reason != "FailedCreate" || !strings.Contains(c.Message, cause) {
			return fmt.Errorf("condition Degraded = %+v, want True, reason FailedCreate, saying %q", c, cause)
		}
		p := o.Memcached.Condition("Progressing")
		if p == nil || p.Status != "True" || !strings.HasSuffix(p.Message, "; stuck: FailedCreate") {
			return fmt.Errorf("condition Progressing = %+v, want True, saying it is stuck on FailedCreate", p)
		}
		ns.t.Logf("Degraded=True %s: %s; Progressing=%s %s: %s", c.Reason, c.Message, p.Status, p.Reason, p.Message)
		return nil
	})
}

// TestPodsThatCannotBeCreated: when the ReplicaSet controller cannot create
// a Memcached's pods, for a reason only the API server knows at that point,
// the Memcached says so with the controller's reason and message, and is
// healthy again once the cause is gone.
func TestPodsThatCannotBeCreated(t *testing.T) {
	t.Parallel()
	t.Run("a pod quota used up", func(t *testing.T) {
		ns := newNamespace(t, slug(t.Name()))
		ns.run("create", "quota", "one-pod", "--hard=pods=1")
		// The quota admits nothing before its controller has counted the
		// namespace's pods.
		ns.eventually("the quota to be counted", func(ctx context.Context) error {
			out, err := ns.kubectl.Run(ctx, "get", "quota", "one-pod", "-o", "jsonpath={.status.used.pods}")
			if err != nil || strings.TrimSpace(out) != "0" {
				return fmt.Errorf("status.used.pods = %q (%v), want 0", out, err)
			}
			return nil
		})
		ns.startOperator()
		ns.createMemcached("cache", 2)

		ns.requireStuck("cache", "exceeded quota: one-pod")

		ns.run("delete", "quota", "one-pod")
		ns.waitConverged("cache", 2)
	})
	t.Run("a missing PriorityClass", func(t *testing.T) {
		ns := newNamespace(t, slug(t.Name()))
		ns.startOperator()
		ns.apply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: cache
spec:
  size: 2
  priorityClassName: no-such-class
`)

		ns.requireStuck("cache", "no PriorityClass with name no-such-class was found")

		ns.run("patch", "memcached", "cache", "--type=json", "-p", `[{"op":"remove","path":"/spec/priorityClassName"}]`)
		ns.waitConverged("cache", 2)
	})
}
