package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
}

// StartCluster creates cluster name with nodes fake nodes and writes its admin
// kubeconfig to kubeconfig. A cluster of that name left by an earlier run (kept with
// a keep flag, or orphaned by a killed test binary) is deleted first, so a suite
// never inherits objects (see cluster.sh recreate).
func StartCluster(ctx context.Context, paths Paths, name, kubeconfig string, nodes int) (*Cluster, error) {
	if err := paths.RequireTools(ClusterTools...); err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Kubeconfig: kubeconfig, paths: paths}
	if _, err := c.script(ctx, "recreate", name, kubeconfig, strconv.Itoa(nodes)); err != nil {
		return nil, err
	}
	return c, nil
}

// Delete deletes the cluster and its kubeconfig.
func (c *Cluster) Delete(ctx context.Context) error {
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
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.paths.Script("cluster.sh"), args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("cluster.sh %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}
