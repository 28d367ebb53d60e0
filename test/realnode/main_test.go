// Package realnode runs the getting-started guide on a real kubelet: a local
// control plane whose only node is the machine's real node (test/scripts/node.sh),
// with containerd, runc and a CNI bridge. The operator runs in a pod from its image,
// deployed by `make deploy`; memcached runs from the image that test/scripts/images.sh
// builds from Debian's package; and the tests talk to memcached over the pods' IPs.
//
// The suite fails, and never skips, when the machine cannot run the node.
package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// clusterName differs from the demo's and the other suites' clusters.
	clusterName = "memcached-node-e2e"
	// namespace is where `make deploy` puts the operator; Pod Security enforces
	// "restricted" in it, so every pod the kubelet runs here passed that profile.
	namespace = "memcached-real"
	// operatorSA is the ServiceAccount of deploy/sa.yaml.
	operatorSA = "memcached-operator"
	// operatorName is the Deployment of deploy/operator.yaml.
	operatorName = "memcached-operator"
	// readyTimeout bounds each wait for real pods to start and pass their probes.
	readyTimeout = 2 * time.Minute
)

var (
	paths   framework.Paths
	cluster *framework.Cluster
	node    *framework.RealNode
	// admin is kubectl as the cluster admin, in namespace.
	admin framework.Kubectl
	// memcachedImage and operatorImage are the local registry's images.
	memcachedImage, operatorImage string
	scratch                       string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx := context.Background()
	var err error
	if paths, err = framework.NewPaths(); err != nil {
		return fail(err)
	}
	if err := paths.RequireTools(append(framework.ClusterTools, "kubelet", "kube-proxy", "kube-router")...); err != nil {
		return fail(err)
	}
	version, err := makeVariable("VERSION")
	if err != nil {
		return fail(err)
	}
	if operatorImage, err = framework.ImageRef(ctx, paths, "operator", version); err != nil {
		return fail(err)
	}
	if memcachedImage, err = framework.ImageRef(ctx, paths, "memcached"); err != nil {
		return fail(err)
	}
	// deploy/operator.yaml's sidecar image, quay.io/example/memcached-sidecar, comes
	// from the local registry through the node's quay.io mirror.
	sidecarImage, err := framework.ImageRef(ctx, paths, "sidecar")
	if err != nil {
		return fail(err)
	}
	if err := framework.RequireImages(ctx, paths, operatorImage, memcachedImage, sidecarImage); err != nil {
		return fail(err)
	}
	scratch = filepath.Join(paths.Output(), "realnode")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return fail(err)
	}

	start := time.Now()
	cluster, err = framework.StartCluster(ctx, paths, clusterName, filepath.Join(scratch, "kubeconfig"), 0)
	if err != nil {
		return fail(err)
	}
	stopped := false
	teardown := func() {
		if stopped {
			return
		}
		stopped = true
		stopOLM()
		// kube-router goes before the node: node.sh down sweeps every KUBE-
		// chain, which would hide what kube-router's own Stop left behind.
		if err := stopKubeRouter(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
			code = 1
		}
		if node != nil {
			// node.sh down fails when the host is not restored; that fails the suite.
			if err := node.Stop(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
				code = 1
			}
		}
		if os.Getenv("E2E_KEEP_CLUSTER") == "" {
			if err := cluster.Delete(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
			}
		}
	}
	defer teardown()
	framework.CleanupOnSignal("realnode: stopping the real node and deleting cluster "+clusterName, teardown)

	if node, err = framework.StartRealNode(ctx, paths, cluster); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "realnode: cluster %s with real node %s ready in %s\n", clusterName, framework.RealNodeName, time.Since(start).Round(100*time.Millisecond))

	admin = cluster.Kubectl().WithNamespace(namespace)
	if err := requireOperatorCreatesAsServiceAccount(ctx); err != nil {
		return fail(err)
	}
	if err := deployOperator(ctx, namespace, memcachedImage); err != nil {
		fmt.Fprintln(os.Stderr, framework.Describe(ctx, cluster.Kubectl(), namespace, "deployments,pods"))
		fmt.Fprintln(os.Stderr, tail(node.Log(ctx, "kubelet"), 40))
		return fail(err)
	}
	code = m.Run()
	fmt.Fprintf(os.Stderr, "realnode: %s\n", framework.KubectlUsage())
	return code
}

// deployOperator does what the README tells a user: a namespace ns that enforces
// Pod Security "restricted", then `make deploy` with the local operator image and
// memcached image mc, then a wait for the operator pod to be Ready.
func deployOperator(ctx context.Context, ns, mc string) error {
	cl := cluster.Kubectl()
	if _, err := cl.Run(ctx, "create", "namespace", ns); err != nil {
		return err
	}
	if _, err := cl.Run(ctx, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "deploy",
		"KUBECONFIG="+cluster.Kubeconfig, "NAMESPACE="+ns,
		"IMG="+operatorImage, "MEMCACHED_IMAGE="+mc)
	cmd.Dir = paths.Root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(paths.Tool("kubectl"))+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make deploy: %v\n%s", err, out)
	}
	return framework.Eventually(ctx, readyTimeout, "the operator pod in "+ns+" to be Running and Ready", func(ctx context.Context) error {
		_, err := operatorPod(ctx, cl.WithNamespace(ns))
		return err
	})
}

// requireOperatorCreatesAsServiceAccount installs an admission policy that refuses
// any memcached Deployment in the namespace that is not created by the operator's
// ServiceAccount. Every Deployment that then exists proves the operator in its pod
// talks to the API server with its own token, not some other credential.
func requireOperatorCreatesAsServiceAccount(ctx context.Context) error {
	user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, operatorSA)
	return cluster.Kubectl().Apply(ctx, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: memcached-deployments-by-operator
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["deployments"]
  validations:
    - expression: "request.userInfo.username == '%[1]s'"
      messageExpression: "'memcached deployments are created only by %[1]s, not ' + request.userInfo.username"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: memcached-deployments-by-operator
spec:
  policyName: memcached-deployments-by-operator
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %[2]s
    objectSelector:
      matchLabels:
        app: memcached
`, user, namespace))
}

// makeVariable prints a variable of the Makefile, as make resolves it.
func makeVariable(name string) (string, error) {
	out, err := exec.Command("make", "--no-print-directory", "-C", paths.Root, "-s",
		"--eval", "print-var: ; @echo $("+name+")", "print-var").Output()
	if err != nil {
		return "", fmt.Errorf("make print-var %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
	return 1
}
