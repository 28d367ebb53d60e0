package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestPodSecurityRestricted: in a namespace that enforces Pod Security
// "restricted", the API server admits both the operator's own pod
// (deploy/operator.yaml) and the memcached pods the operator creates.
func TestPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.run("label", "namespace", ns.name,
		"pod-security.kubernetes.io/enforce=restricted",
		"pod-security.kubernetes.io/enforce-version=latest")

	t.Run("deploy/operator.yaml's pod is admitted", func(t *testing.T) {
		out := ns.run("apply", "-f", paths.Deploy("operator.yaml"))
		if strings.Contains(out, "Warning") {
			t.Errorf("kubectl apply warned: %s", out)
		}
		ns.eventually("a memcached-operator pod to be created", func(ctx context.Context) error {
			if err := noFailedCreate(ctx, ns); err != nil {
				return err
			}
			pods, err := ns.kubectl.Run(ctx, "get", "pods", "-l", "app.kubernetes.io/name=memcached-operator", "-o", "name")
			if err != nil {
				return err
			}
			if pods == "" {
				return fmt.Errorf("no operator pod yet")
			}
			return nil
		})
	})
	t.Run("the memcached pods are admitted", func(t *testing.T) {
		ns.startOperator()
		ns.createMemcached("cache", 2)
		ns.waitConverged("cache", 2)
		if err := noFailedCreate(context.Background(), ns); err != nil {
			t.Error(err)
		}
	})
}

// noFailedCreate fails when a ReplicaSet in the namespace could not create a
// pod, which is how Pod Security admission reports a rejected pod.
func noFailedCreate(ctx context.Context, ns *namespace) error {
	out, err := ns.kubectl.Run(ctx, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "jsonpath={.items[*].message}")
	if err != nil {
		return err
	}
	if out != "" {
		return fmt.Errorf("pods were rejected: %s", out)
	}
	return nil
}
