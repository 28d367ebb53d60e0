package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// clusterName differs from the demo's (memcached-demo), so `make e2e` never
	// touches a running demo.
	clusterName = "memcached-e2e"
	// nodes is the number of KWOK nodes; the suite runs at most a few dozen pods.
	nodes   = 3
	crdName = "memcacheds.cache.example.com"
)

var (
	paths   framework.Paths
	cluster *framework.Cluster
	// scratch is tmp/_output/e2e: kubeconfigs and operator logs.
	scratch string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	var err error
	if paths, err = framework.NewPaths(); err != nil {
		return fail(err)
	}
	// Fail, never skip, when something is missing: `make e2e` builds these first.
	if err := paths.RequireTools(framework.ClusterTools...); err != nil {
		return fail(err)
	}
	if err := framework.RequireFiles("make build", paths.OperatorBinary()); err != nil {
		return fail(err)
	}
	scratch = filepath.Join(paths.Output(), "e2e")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return fail(err)
	}

	start := time.Now()
	cluster, err = framework.StartCluster(ctx, paths, clusterName, filepath.Join(scratch, "kubeconfig"), nodes)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster %s ready in %s\n", clusterName, time.Since(start).Round(100*time.Millisecond))
	if os.Getenv("E2E_KEEP_CLUSTER") == "" {
		deleteCluster := func() {
			if err := cluster.Delete(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			}
		}
		defer deleteCluster()
		framework.CleanupOnSignal("e2e: deleting cluster "+clusterName, deleteCluster)
	} else {
		defer fmt.Fprintf(os.Stderr, "e2e: E2E_KEEP_CLUSTER is set; cluster %s keeps running (KUBECONFIG=%s)\n", clusterName, cluster.Kubeconfig)
	}

	admin := cluster.Kubectl()
	if _, err := admin.Run(ctx, "apply", "-f", paths.Deploy("crd.yaml")); err != nil {
		return fail(err)
	}
	if _, err := admin.Run(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crdName); err != nil {
		return fail(err)
	}
	code := m.Run()
	fmt.Fprintf(os.Stderr, "e2e: %s\n", framework.KubectlUsage())
	return code
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
	return 1
}
