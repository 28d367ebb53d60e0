package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RealNodeName is the node that test/scripts/node.sh registers.
const RealNodeName = "real-node"

// nodeLeaseWait bounds how long a suite waits for another suite's real node.
const nodeLeaseWait = 30 * time.Minute

// RealNode is the machine's one real kubelet node (test/scripts/node.sh), joined to
// a local cluster. Suites that need it take a lease on it for their whole run, so
// that `go test ./...`, which runs packages in parallel, runs them one at a time.
type RealNode struct {
	cluster *Cluster
	paths   Paths
	lease   *os.File
}

// StartRealNode waits for the machine's real-node lease, then starts the real node
// for c (node.sh up) and waits until it is Ready. It fails, and never skips, when
// the machine cannot run it, with node.sh check's reasons.
func StartRealNode(ctx context.Context, paths Paths, c *Cluster) (*RealNode, error) {
	if err := paths.RequireTools("kubelet", "kube-proxy"); err != nil {
		return nil, err
	}
	lease, err := takeLease(filepath.Join(paths.Output(), "node.lease"), nodeLeaseWait)
	if err != nil {
		return nil, err
	}
	n := &RealNode{cluster: c, paths: paths, lease: lease}
	if _, err := n.script(ctx, 5*time.Minute, "up", c.Name, c.Kubeconfig); err != nil {
		_ = lease.Close()
		return nil, err
	}
	return n, nil
}

// takeLease locks file, waiting up to wait and saying so when it has to.
func takeLease(file string, wait time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	announced := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %v", file, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another run has held %s for %s", file, wait)
		}
		if !announced {
			fmt.Fprintf(os.Stderr, "framework: waiting for another run to release %s\n", file)
			announced = true
		}
		time.Sleep(time.Second)
	}
}

// Stop stops the node and restores the host (node.sh down, which fails if anything
// is left changed), then releases the lease.
func (n *RealNode) Stop(ctx context.Context) error {
	defer n.lease.Close()
	_, err := n.script(ctx, 3*time.Minute, "down")
	return err
}

// Log returns the log of containerd, the kubelet or kube-proxy.
func (n *RealNode) Log(ctx context.Context, component string) string {
	out, err := n.script(ctx, time.Minute, "logs", component)
	if err != nil {
		return fmt.Sprintf("(cannot read the %s log: %v)", component, err)
	}
	return out
}

// ContainerPID returns the host pid of the main process of a container, given the
// containerID of its pod's status ("containerd://<id>").
func (n *RealNode) ContainerPID(ctx context.Context, containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	if id == containerID || id == "" {
		return 0, fmt.Errorf("container id %q is not a containerd id", containerID)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	socket := filepath.Join(n.paths.Output(), "node", "run", "containerd.sock")
	out, err := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %v: %s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == id && fields[2] == "RUNNING" {
			return strconv.Atoi(fields[1])
		}
	}
	return 0, fmt.Errorf("container %s is not running on the real node:\n%s", id, out)
}

func (n *RealNode) script(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	return n.paths.RunScript(ctx, timeout, "node.sh", args...)
}

// ImageRef returns the local registry's reference of an image that
// test/scripts/images.sh builds: "pause", "memcached", "sidecar" (its one release,
// pkg/sidecar/VERSION), or "operator" with a version.
func ImageRef(ctx context.Context, paths Paths, image string, version ...string) (string, error) {
	out, err := paths.RunScript(ctx, 30*time.Second, "images.sh", append([]string{"ref", image}, version...)...)
	return strings.TrimSpace(out), err
}

// RequireImages starts the local registry if it is not running (its images are kept
// on disk) and fails unless every ref is in it, naming `make images`, which builds
// them.
func RequireImages(ctx context.Context, paths Paths, refs ...string) error {
	if _, err := paths.RunScript(ctx, time.Minute, "registry.sh", "up"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var missing []string
	for _, r := range refs {
		ref, err := name.ParseReference(r, name.Insecure)
		if err != nil {
			return fmt.Errorf("parse image %s: %v", r, err)
		}
		if _, err := remote.Head(ref, remote.WithContext(ctx)); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", r, err))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("images missing from the local registry (build them with `make images`):\n  %s", strings.Join(missing, "\n  "))
	}
	return nil
}
