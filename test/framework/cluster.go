package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cluster is a local kwok cluster run by test/scripts/cluster.sh (kwokctl's binary
// runtime with the tools of `make tools`). Its admin kubeconfig is a file of its own.
type Cluster struct {
	// Name is the kwokctl cluster name; suites use distinct names so that they and
	// `make demo` never share a cluster.
	Name string
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig string

	paths Paths
	// lease is held from StartCluster to Delete (or the process's exit), so that two
	// runs of one suite queue instead of recreating each other's cluster.
	lease *os.File
}

// StartCluster creates cluster name with nodes fake nodes and writes its admin
// kubeconfig to kubeconfig. A cluster of that name left by an earlier run (kept with
// a keep flag, or orphaned by a killed test binary) is deleted first, so a suite
// never inherits objects (see cluster.sh recreate).
func StartCluster(ctx context.Context, paths Paths, name, kubeconfig string, nodes int) (*Cluster, error) {
	if err := paths.RequireTools(ClusterTools...); err != nil {
		return nil, err
	}
	lease, err := takeLease(filepath.Join(paths.Output(), "kwok", name+".lease"), clusterLeaseWait)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Kubeconfig: kubeconfig, paths: paths, lease: lease}
	if _, err := c.script(ctx, "recreate", name, kubeconfig, strconv.Itoa(nodes)); err != nil {
		lease.Close()
		return nil, err
	}
	return c, nil
}

// clusterLeaseWait bounds how long a suite waits for another run of itself.
const clusterLeaseWait = 30 * time.Minute

// Delete deletes the cluster and its kubeconfig, and releases the cluster's lease.
func (c *Cluster) Delete(ctx context.Context) error {
	defer c.lease.Close()
	_, err := c.script(ctx, "down", c.Name, c.Kubeconfig)
	return err
}

// Kubectl returns a kubectl that acts as the cluster admin.
func (c *Cluster) Kubectl() Kubectl {
	return Kubectl{Binary: c.paths.Tool("kubectl"), Kubeconfig: c.Kubeconfig, CacheDir: c.paths.KubeCacheDir()}
}

// ComponentLog returns the log of a control-plane component, such as
// kube-controller-manager or kwok-controller.
func (c *Cluster) ComponentLog(ctx context.Context, component string) (string, error) {
	return c.script(ctx, "logs", c.Name, component)
}

// ServiceAccountKubeconfig writes to out a kubeconfig that authenticates as
// ServiceAccount namespace/name with a token valid for d, so that a process run with
// it has exactly the RBAC permissions of that ServiceAccount.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name, out string, d time.Duration) error {
	_, err := c.script(ctx, "sa-kubeconfig", c.Kubeconfig, namespace, name, out, d.String())
	return err
}

// script runs test/scripts/cluster.sh and returns its standard output; its progress
// lines (standard error) go to the test's standard error.
func (c *Cluster) script(ctx context.Context, args ...string) (string, error) {
	return c.paths.RunScript(ctx, 5*time.Minute, "cluster.sh", args...)
}

// Serving returns nil when cluster.sh status says the cluster serves: its API
// server answers /readyz and every component's process runs.
func (c *Cluster) Serving(ctx context.Context) error {
	_, err := c.script(ctx, "status", c.Name, c.Kubeconfig)
	return err
}

// kwokWorkdir is where kwokctl keeps the state of the clusters that
// cluster.sh creates: KWOK_WORKDIR as test/scripts/lib.sh sets it.
func (c *Cluster) kwokWorkdir() string {
	if dir := os.Getenv("KWOK_WORKDIR"); dir != "" {
		return dir
	}
	return filepath.Join(c.paths.Output(), "kwok")
}

// ComponentPID returns the process id of a control-plane component (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller)
// from the pid file that kwokctl's binary runtime keeps.
func (c *Cluster) ComponentPID(component string) (int, error) {
	file := filepath.Join(c.kwokWorkdir(), "clusters", c.Name, "pids", component+".pid")
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: %v", file, err)
	}
	return pid, nil
}

// ComponentAlive returns nil when a component's process exists, running or
// stopped, and an error that says otherwise.
func (c *Cluster) ComponentAlive(component string) error {
	pid, err := c.ComponentPID(component)
	if err != nil {
		return err
	}
	state, err := processState(pid)
	if err != nil {
		return fmt.Errorf("%s (pid %d) is gone: %v", component, pid, err)
	}
	if state == "Z" || state == "X" {
		return fmt.Errorf("%s (pid %d) has exited (state %s)", component, pid, state)
	}
	return nil
}

// Pause stops a component with SIGSTOP, as a hung process would be: the
// kernel still accepts connections to its ports, but nothing answers. Call
// resume, which sends SIGCONT and may be called more than once, in a defer or
// a cleanup. A watchdog process of its own resumes the component after max in
// any case, even if the test binary is killed first.
func (c *Cluster) Pause(component string, max time.Duration) (resume func() error, err error) {
	pid, err := c.ComponentPID(component)
	if err != nil {
		return nil, err
	}
	watchdog := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep %d; kill -CONT %d", int(max.Seconds()+1), pid))
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watchdog.Start(); err != nil {
		return nil, fmt.Errorf("start the watchdog that resumes %s: %v", component, err)
	}
	// The watchdog leads a session and process group of its own: killing
	// the group ends its sleep too.
	stopWatchdog := func() {
		_ = syscall.Kill(-watchdog.Process.Pid, syscall.SIGKILL)
		_ = watchdog.Wait() // reports the kill; nothing to check
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		stopWatchdog()
		return nil, fmt.Errorf("SIGSTOP %s (pid %d): %v", component, pid, err)
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			err = syscall.Kill(pid, syscall.SIGCONT)
			stopWatchdog()
		})
		if err != nil {
			return fmt.Errorf("SIGCONT %s (pid %d): %v", component, pid, err)
		}
		return nil
	}, nil
}

// ScaleNodes makes the cluster have n KWOK fake nodes, made as cluster.sh up
// makes them (with ephemeral storage, which every container the operator
// builds requests), and waits until at least n nodes are Ready. A fake node
// takes 110 pods.
func (c *Cluster) ScaleNodes(ctx context.Context, n int) error {
	_, err := c.script(ctx, "scale", c.Name, c.Kubeconfig, strconv.Itoa(n))
	return err
}
