package realnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// truthWindow is how long the status is sampled while pods cannot become Ready.
const truthWindow = 20 * time.Second

// TestStatusReportsPodFailures runs memcached pods that can never be Ready, as a
// user would get them from a wrong image, and checks that the Memcached's status
// says so with the kubelet's own reason, never "AsExpected", at every sample.
func TestStatusReportsPodFailures(t *testing.T) {
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
			setOperatorMemcachedImage(t, tc.image)
			createMemcached(t, tc.name, 2)
			err := framework.Eventually(context.Background(), readyTimeout, "condition Degraded=True with the pods' reason", func(ctx context.Context) error {
				m, err := getMemcached(ctx, tc.name)
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
				m, err := getMemcached(ctx, tc.name)
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

func getMemcached(ctx context.Context, name string) (framework.Memcached, error) {
	var m framework.Memcached
	err := admin.GetJSON(ctx, &m, "memcached", name)
	return m, err
}

// setOperatorMemcachedImage points the deployed operator at another memcached
// image, as a user would with `kubectl set env`, waits for the new operator pod,
// and restores the local image when the test ends.
func setOperatorMemcachedImage(t *testing.T, image string) {
	t.Helper()
	set := func(image string) error {
		ctx := context.Background()
		if _, err := admin.Run(ctx, "set", "env", "deployment/"+operatorName, "MEMCACHED_IMAGE="+image); err != nil {
			return err
		}
		if _, err := admin.Run(ctx, "rollout", "status", "deployment/"+operatorName, "--timeout="+readyTimeout.String()); err != nil {
			return err
		}
		return framework.Eventually(ctx, readyTimeout, "one Ready operator pod", func(ctx context.Context) error {
			_, err := operatorPod(ctx)
			return err
		})
	}
	if err := set(image); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(memcachedImage); err != nil {
			t.Errorf("restore the operator's memcached image: %v", err)
		}
	})
}
