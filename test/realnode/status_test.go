package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// truthWindow is how long the status is sampled while pods cannot become Ready.
const truthWindow = 15 * time.Second

// TestStatusReportsPodFailures runs memcached pods that can never be Ready, as a
// user would get them from a wrong image, and checks that the Memcached's status
// says so with the kubelet's own reason, never "AsExpected", at every sample. Each
// case deploys an operator of its own, configured with the wrong image, to a
// namespace of its own.
func TestStatusReportsPodFailures(t *testing.T) {
	t.Parallel()
	pause, err := framework.ImageRef(context.Background(), paths, "pause")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		image string
		// reasons are the kubelet reasons the Degraded condition may carry.
		reasons []string
	}{
		{
			name:    "image-missing",
			image:   memcachedImage + "-does-not-exist",
			reasons: []string{"ErrImagePull", "ImagePullBackOff"},
		},
		{
			// The pause image has no memcached binary: the container cannot start,
			// and the kubelet backs off restarting it.
			name:    "cannot-start",
			image:   pause,
			reasons: []string{"RunContainerError", "CreateContainerError", "StartError", "CrashLoopBackOff"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := deployOperatorNamespace(t, "status-"+tc.name, tc.image)
			createMemcached(t, k, tc.name, 2)
			err := framework.Eventually(context.Background(), readyTimeout, "condition Degraded=True with the pods' reason", func(ctx context.Context) error {
				m, err := getMemcached(ctx, k, tc.name)
				if err != nil {
					return err
				}
				if err := notReadyStatus(m); err != nil {
					return framework.Permanent(err)
				}
				c := m.Condition("Degraded")
				if c == nil || c.Status != "True" || !slices.Contains(tc.reasons, c.Reason) {
					return fmt.Errorf("condition Degraded = %+v, want True with a reason in %v", c, tc.reasons)
				}
				t.Logf("Degraded=True %s: %s", c.Reason, c.Message)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = framework.Consistently(context.Background(), truthWindow, "a status that reports the pods as not ready", func(ctx context.Context) error {
				m, err := getMemcached(ctx, k, tc.name)
				if err != nil {
					return err
				}
				return notReadyStatus(m)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// notReadyStatus checks the status of a Memcached none of whose pods can be Ready.
func notReadyStatus(m framework.Memcached) error {
	if m.Status.ReadyReplicas != 0 {
		return fmt.Errorf("status.readyReplicas = %d, want 0", m.Status.ReadyReplicas)
	}
	if c := m.Condition("Degraded"); c != nil && c.Reason == "AsExpected" {
		return fmt.Errorf("condition Degraded = %+v while no pod is ready", c)
	}
	if c := m.Condition("Available"); c != nil && c.Status == "True" {
		return fmt.Errorf("condition Available = %+v while no pod is ready", c)
	}
	return nil
}

func getMemcached(ctx context.Context, k framework.Kubectl, name string) (framework.Memcached, error) {
	var m framework.Memcached
	err := k.GetJSON(ctx, &m, "memcached", name)
	return m, err
}

// deployOperatorNamespace deploys an operator whose memcached image is image to a new
// namespace ns, as `make deploy MEMCACHED_IMAGE=...` does, and deletes the
// namespace when the test ends.
func deployOperatorNamespace(t *testing.T, ns, image string) framework.Kubectl {
	t.Helper()
	t.Cleanup(func() {
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "namespace", ns, "--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := deployOperator(context.Background(), ns, image); err != nil {
		t.Fatal(err)
	}
	return cluster.Kubectl().WithNamespace(ns)
}

// TestRollToAnImageThatCannotBePulled rolls two serving memcached pods to an
// image the registry does not have. The surge pod can never start, and the
// roll can never finish, while the old pods keep serving: the Memcached
// stays Available and turns Degraded with the kubelet's reason, and
// Progressing says the roll is stuck. Once the image is fixed, the roll goes
// back to the old template and the Memcached is healthy again.
func TestRollToAnImageThatCannotBePulled(t *testing.T) {
	const name, size = "unpullable", 2
	t.Parallel()
	createMemcached(t, admin, name, size)
	waitServing(t, name, size)
	ctx := context.Background()
	missing := memcachedImage + "-does-not-exist"
	if _, err := admin.Run(ctx, "patch", "memcached", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"image":%q}}`, missing)); err != nil {
		t.Fatal(err)
	}

	reasons := []string{"ErrImagePull", "ImagePullBackOff"}
	err := framework.Eventually(ctx, readyTimeout, "condition Degraded=True with the kubelet's pull error while Available", func(ctx context.Context) error {
		m, err := getMemcached(ctx, admin, name)
		if err != nil {
			return err
		}
		if a := m.Condition("Available"); a == nil || a.Status != "True" {
			return framework.Permanent(fmt.Errorf("condition Available = %+v while the old pods serve, want True", a))
		}
		c := m.Condition("Degraded")
		if c == nil || c.Status != "True" || !slices.Contains(reasons, c.Reason) || !strings.Contains(c.Message, missing) {
			return fmt.Errorf("condition Degraded = %+v, want True with a reason in %v about %s", c, reasons, missing)
		}
		p := m.Condition("Progressing")
		if p == nil || p.Status != "True" || p.Reason != "RollingUpdate" || !strings.Contains(p.Message, "; stuck: "+c.Reason) {
			return fmt.Errorf("condition Progressing = %+v, want True RollingUpdate, stuck on %s", p, c.Reason)
		}
		t.Logf("Available=True; Degraded=True %s: %s; Progressing=True %s: %s", c.Reason, c.Message, p.Reason, p.Message)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := admin.Run(ctx, "patch", "memcached", name, "--type=json", "-p", `[{"op":"remove","path":"/spec/image"}]`); err != nil {
		t.Fatal(err)
	}
	o := waitServing(t, name, size)
	if p := o.Memcached.Condition("Progressing"); p == nil || p.Status != "False" || p.Reason != "Complete" {
		t.Errorf("condition Progressing = %+v after the fix, want False Complete", p)
	}
	if c := o.Memcached.Condition("Degraded"); c == nil || c.Status != "False" || c.Reason != "AsExpected" {
		t.Errorf("condition Degraded = %+v after the fix, want False AsExpected", c)
	}
}
