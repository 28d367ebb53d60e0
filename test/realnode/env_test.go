package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// memcachedPort is the port of the memcached containers the operator writes.
const memcachedPort = 11211

// createMemcached creates Memcached name of size in k's namespace, deletes it
// when the test ends, and on failure logs the namespace, the operator's log and
// the kubelet's.
func createMemcached(t *testing.T, k framework.Kubectl, name string, size int) {
	t.Helper()
	applyMemcachedSpec(t, k, name, fmt.Sprintf("size: %d", size))
}

// applyMemcachedSpec applies Memcached name with spec, YAML as at the top
// level of spec, deletes it when the test ends, and on failure logs the
// namespace, the operator's log and the kubelet's.
func applyMemcachedSpec(t *testing.T, k framework.Kubectl, name, spec string) {
	t.Helper()
	indented := "  " + strings.ReplaceAll(spec, "\n", "\n  ")
	if err := k.Apply(context.Background(), fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: %s
spec:
%s
`, name, indented)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := k.Run(context.Background(), "delete", "memcached", name, "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	dumpOnFailure(t, k)
}

// dumpOnFailure logs what explains a failure: the objects and events of k's
// namespace, the log of each operator pod (leader and standby) through
// `kubectl logs`, and the kubelet's log.
func dumpOnFailure(t *testing.T, k framework.Kubectl) {
	t.Helper()
	framework.DumpOnFailure(t, func() string {
		return framework.Describe(context.Background(), cluster.Kubectl(), k.Namespace, "memcached,deployments,pods,leases")
	}, func() string {
		out, err := k.Run(context.Background(), "logs", "-l", "app.kubernetes.io/name="+operatorName, "--prefix", "--tail=60")
		return "===== kubectl logs -l app.kubernetes.io/name=" + operatorName + "\n" + out + errText(err)
	}, func() string {
		return "===== kubelet log (tail)\n" + tail(node.Log(context.Background(), "kubelet"), 40)
	})
}

func errText(err error) string {
	if err != nil {
		return "(error: " + err.Error() + ")\n"
	}
	return ""
}

// waitServing waits until Memcached name has converged on size with real pods:
// the operator's own Deployment, exactly size Running pods that passed their
// readiness probes on the real node, and a status that lists exactly them.
func waitServing(t *testing.T, name string, size int) framework.Observed {
	t.Helper()
	return waitServingIn(t, admin, name, size)
}

// waitServingIn is waitServing in k's namespace.
func waitServingIn(t *testing.T, k framework.Kubectl, name string, size int) framework.Observed {
	t.Helper()
	return waitServingWithin(t, k, name, size, readyTimeout)
}

// waitServingWithin is waitServingIn with a deadline of timeout.
func waitServingWithin(t *testing.T, k framework.Kubectl, name string, size int, timeout time.Duration) framework.Observed {
	t.Helper()
	var o framework.Observed
	err := framework.Eventually(context.Background(), timeout, fmt.Sprintf("memcached %s to serve with %d Ready pods", name, size), func(ctx context.Context) error {
		var err error
		if o, err = framework.Observe(ctx, k, name); err != nil {
			return err
		}
		if err := framework.Converged(o, size); err != nil {
			return err
		}
		for _, p := range o.Pods {
			if p.Spec.NodeName != framework.RealNodeName || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s is on node %q with IP %q, want the real node and an IP", p.Metadata.Name, p.Spec.NodeName, p.Status.PodIP)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// podAddr returns host:port of memcached in the pod named in status.nodes.
func podAddr(o framework.Observed, name string) (string, error) {
	for _, p := range o.Pods {
		if p.Metadata.Name == name {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(memcachedPort)), nil
		}
	}
	return "", fmt.Errorf("status.nodes names pod %s, which does not exist", name)
}

// operatorPod returns the operator pod of k's namespace that leads, once it is
// Running and Ready: deploy/operator.yaml runs two replicas, and the one whose
// name the Lease memcached-operator holds (holderIdentity) reconciles while the
// other stands by.
func operatorPod(ctx context.Context, k framework.Kubectl) (framework.Pod, error) {
	holder, err := leaseHolder(ctx, k)
	if err != nil {
		return framework.Pod{}, err
	}
	live, err := operatorPods(ctx, k)
	if err != nil {
		return framework.Pod{}, err
	}
	for _, p := range live {
		if p.Metadata.Name != holder {
			continue
		}
		if p.Status.Phase != "Running" || !p.Ready() {
			return p, fmt.Errorf("leading operator pod %s is %s, ready %t", p.Metadata.Name, p.Status.Phase, p.Ready())
		}
		return p, nil
	}
	return framework.Pod{}, fmt.Errorf("lease %s is held by %q, which is not a live operator pod", operatorName, holder)
}

// operatorPods returns the operator pods of k's namespace that are not being deleted.
func operatorPods(ctx context.Context, k framework.Kubectl) ([]framework.Pod, error) {
	var pods struct{ Items []framework.Pod }
	if err := k.GetJSON(ctx, &pods, "pods", "-l", "app.kubernetes.io/name="+operatorName); err != nil {
		return nil, err
	}
	var live []framework.Pod
	for _, p := range pods.Items {
		if p.Metadata.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, nil
}

// leaseHolder returns the holderIdentity of the operator's Lease in k's namespace.
func leaseHolder(ctx context.Context, k framework.Kubectl) (string, error) {
	var lease struct {
		Spec struct {
			HolderIdentity string `json:"holderIdentity"`
		} `json:"spec"`
	}
	if err := k.GetJSON(ctx, &lease, "lease", operatorName); err != nil {
		return "", err
	}
	return lease.Spec.HolderIdentity, nil
}

// containerProcess returns the host pid of the running container name in p.
func containerProcess(ctx context.Context, p framework.Pod, name string) (int, error) {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == name {
			return node.ContainerPID(ctx, c.ContainerID)
		}
	}
	return 0, fmt.Errorf("pod %s has no status for container %s", p.Metadata.Name, name)
}

// procStatusIDs returns the real uid and gid of a process, from /proc/PID/status.
func procStatusIDs(pid int) (uid, gid int, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	uid, gid = -1, -1
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Uid:":
			uid, err = strconv.Atoi(f[1])
		case "Gid:":
			gid, err = strconv.Atoi(f[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("parse %q: %v", line, err)
		}
	}
	return uid, gid, nil
}

// rootMountOptions returns the mount options of the root of a process's mount
// namespace, from /proc/PID/mountinfo ("ro,..." for a read-only root).
func rootMountOptions(pid int) (string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		return "", err
	}
	opts := ""
	for _, line := range strings.Split(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ...; the last mount on / wins.
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			opts = f[5]
		}
	}
	if opts == "" {
		return "", fmt.Errorf("no mount on / in /proc/%d/mountinfo", pid)
	}
	return opts, nil
}

// memoryLimit returns the memory limit the kernel enforces on a process: its
// memory cgroup's memory.limit_in_bytes (cgroup v1) or memory.max (cgroup v2).
func memoryLimit(pid int) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var file string
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			file = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes")
		case f[0] == "0" && f[1] == "" && isUnified():
			file = filepath.Join("/sys/fs/cgroup", f[2], "memory.max")
		default:
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	}
	return 0, fmt.Errorf("no memory cgroup for pid %d in:\n%s", pid, data)
}

// isUnified reports whether /sys/fs/cgroup is a cgroup v2 hierarchy.
func isUnified() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}
