package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
	"k8s.io/apimachinery/pkg/api/resource"
)

// operatorUID is the numeric user of tmp/build/Dockerfile.
const operatorUID = 65532

// TestOperatorPod checks the operator as `make deploy` runs it: a Ready pod on the
// real node, its log readable through the API server, its ServiceAccount's
// credentials in use, and the kubelet enforcing the non-root user and the
// read-only root filesystem of deploy/operator.yaml.
func TestOperatorPod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dumpOnFailure(t, admin)
	p, err := operatorPod(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != framework.RealNodeName {
		t.Errorf("operator pod runs on %q, want the real node", p.Spec.NodeName)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Image != operatorImage {
			t.Errorf("container %s runs image %s, want %s", c.Name, c.Image, operatorImage)
		}
	}

	t.Run("log through kubectl logs", func(t *testing.T) {
		out, err := admin.Run(ctx, "logs", p.Metadata.Name, "-c", operatorName)
		if err != nil {
			t.Fatal(err)
		}
		// WATCH_NAMESPACE comes from the downward API of deploy/operator.yaml.
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
			return strings.Contains(line, "watching namespace") && strings.Contains(line, namespace)
		}) {
			t.Errorf("kubectl logs has no line that says it watches namespace %s:\n%s", namespace, tail(out, 20))
		}
		// So does MEMORY_LIMIT, the container's memory limit, below which
		// the operator sets the Go runtime's.
		var pod struct {
			Spec struct {
				Containers []struct {
					Name      string
					Resources struct{ Limits map[string]resource.Quantity }
				}
			}
		}
		if err := admin.GetJSON(ctx, &pod, "pod", p.Metadata.Name); err != nil {
			t.Fatal(err)
		}
		var limit resource.Quantity
		for _, c := range pod.Spec.Containers {
			if c.Name == operatorName {
				limit = c.Resources.Limits["memory"]
			}
		}
		want := fmt.Sprintf("below the container's %d MiB (MEMORY_LIMIT)", limit.Value()>>20)
		if limit.IsZero() || !strings.Contains(out, want) {
			t.Errorf("kubectl logs has no line that says the Go runtime's memory limit is %s, for the container's limit %s:\n%s", want, limit.String(), tail(out, 20))
		}
	})

	t.Run("acts as its ServiceAccount", func(t *testing.T) {
		var spec struct {
			Spec struct {
				ServiceAccountName string `json:"serviceAccountName"`
			} `json:"spec"`
		}
		if err := admin.GetJSON(ctx, &spec, "pod", p.Metadata.Name); err != nil {
			t.Fatal(err)
		}
		if spec.Spec.ServiceAccountName != operatorSA {
			t.Errorf("serviceAccountName = %q, want %q", spec.Spec.ServiceAccountName, operatorSA)
		}
		// The admission policy of TestMain refuses memcached Deployments from any
		// other user, so a Deployment the operator created proves whose token it used.
		createMemcached(t, admin, "whoami", 1)
		err := framework.Eventually(ctx, readyTimeout, "deployment whoami, created by the operator", func(ctx context.Context) error {
			_, err := admin.Run(ctx, "get", "deployment", "whoami")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := admin.Run(ctx, "auth", "can-i", "create", "deployments", "--as=system:serviceaccount:"+namespace+":default")
		if err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("the namespace's default ServiceAccount may create deployments (%q, %v); the policy check would prove nothing", out, err)
		}
	})

	t.Run("kubelet enforces non-root and read-only root", func(t *testing.T) {
		pid, err := containerProcess(ctx, p, operatorName)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid, err := procStatusIDs(pid)
		if err != nil {
			t.Fatal(err)
		}
		if uid != operatorUID || gid != operatorUID {
			t.Errorf("operator process %d runs as uid %d gid %d, want %d", pid, uid, gid, operatorUID)
		}
		opts, err := rootMountOptions(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(opts, "ro") {
			t.Errorf("operator's root filesystem is mounted %q, want read-only", opts)
		}
	})
}

// TestOperatorRestartedByKubelet kills the operator's process as a crash would and
// checks that the kubelet restarts the container and the operator then converges.
// It is the one test that does not run in parallel: the others run after it, with
// the operator up.
func TestOperatorRestartedByKubelet(t *testing.T) {
	ctx := context.Background()
	createMemcached(t, admin, "after-crash", 1)
	waitServing(t, "after-crash", 1)

	p, err := operatorPod(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	before := restarts(p)
	pid, err := containerProcess(ctx, p, operatorName)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill operator process %d: %v", pid, err)
	}
	t.Logf("killed operator process %d of pod %s (container restarts so far: %d)", pid, p.Metadata.Name, before)
	// The pod is found by its UID, not as the Lease's holder: whether the
	// restarted container resumes the Lease or the standby takes it first
	// depends on how fast the kubelet restarts it, and either is right.
	err = framework.Eventually(ctx, readyTimeout, "the kubelet to restart the operator container", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, admin)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(pods, func(q framework.Pod) bool { return q.Metadata.UID == p.Metadata.UID })
		if i < 0 {
			return framework.Permanent(fmt.Errorf("the operator pod %s is gone, want its container restarted in place", p.Metadata.Name))
		}
		now := pods[i]
		if got := restarts(now); got <= before {
			return fmt.Errorf("restartCount %d, want more than %d", got, before)
		}
		if now.Status.Phase != "Running" || !now.Ready() {
			return fmt.Errorf("operator pod %s is %s, ready %t", now.Metadata.Name, now.Status.Phase, now.Ready())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Run(ctx, "scale", "memcached/after-crash", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	waitServing(t, "after-crash", 2)
}
