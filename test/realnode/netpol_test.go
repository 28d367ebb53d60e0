package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// kubeRouter is the real node's NetworkPolicy firewall, started by the first test
// that asks for it (enforceNetworkPolicies) and stopped by TestMain's teardown.
var (
	kubeRouterMu  sync.Mutex
	kubeRouter    *framework.KubeRouter
	kubeRouterErr error
)

// enforceNetworkPolicies starts kube-router's firewall on the real node, once for
// the suite, and returns it. The node's CNI bridge enforces no NetworkPolicy by
// itself; TestNetworkPolicyIsEnforced proves that the node does with kube-router.
func enforceNetworkPolicies(t *testing.T) *framework.KubeRouter {
	t.Helper()
	kubeRouterMu.Lock()
	defer kubeRouterMu.Unlock()
	if kubeRouter == nil && kubeRouterErr == nil {
		start := time.Now()
		kubeRouter, kubeRouterErr = framework.StartKubeRouter(context.Background(), paths, cluster,
			framework.RealNodeName, filepath.Join(scratch, "kube-router.log"))
		if kubeRouterErr == nil {
			t.Logf("kube-router's firewall runs on %s (hooked in %v; log %s)", framework.RealNodeName, time.Since(start).Round(100*time.Millisecond), kubeRouter.LogPath())
		}
	}
	if kubeRouterErr != nil {
		t.Fatalf("start kube-router: %v", kubeRouterErr)
	}
	return kubeRouter
}

// stopKubeRouter stops kube-router if a test started it; it fails when the host's
// firewall is not then as kube-router found it.
func stopKubeRouter(ctx context.Context) error {
	kubeRouterMu.Lock()
	defer kubeRouterMu.Unlock()
	if kubeRouter == nil {
		return nil
	}
	if err := kubeRouter.Stop(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "realnode: kube-router stopped, its firewall state removed (%s); the host's iptables rules and ipsets are as it found them\n", kubeRouter.Removed())
	return nil
}

const (
	// netpolNamespace is TestNetworkPolicyIsEnforced's namespace.
	netpolNamespace = "netpol-enforced"
	// netpolLabel marks the test's pods; its value is the pod's name.
	netpolLabel = "netpol-test"
	// netpolTimeout bounds each wait for the firewall to follow a change.
	netpolTimeout = 2 * time.Minute
)

// TestNetworkPolicyIsEnforced proves that the real node enforces NetworkPolicies,
// so that no test trusts one that nothing enforces. A client pod probes two plain
// memcached pods (a TCP connection, then memcached's version command; pod to
// pod, since the node always lets the host reach its pods, for probes): it reaches
// both; under a deny-all ingress policy that selects one of them, it no longer
// reaches that one but still reaches the other; once the policy is deleted, it
// reaches both again.
func TestNetworkPolicyIsEnforced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kr := enforceNetworkPolicies(t)
	cl := cluster.Kubectl()
	if err := cl.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+netpolNamespace+
		"\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cl.Run(context.Background(), "delete", "namespace", netpolNamespace, "--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	k := cl.WithNamespace(netpolNamespace)
	framework.DumpOnFailure(t, func() string {
		return framework.Describe(context.Background(), cl, netpolNamespace, "pods,networkpolicies")
	}, func() string {
		return kr.Diagnostics(context.Background())
	}, func() string {
		return "===== kubelet log (tail)\n" + tail(node.Log(context.Background(), "kubelet"), 30)
	})
	tenantImage, err := framework.ImageRef(ctx, paths, "tenant")
	if err != nil {
		t.Fatal(err)
	}

	// Two plain servers, "open" and "guarded", and the client.
	for _, name := range []string{"open", "guarded"} {
		if err := k.Apply(ctx, netpolPod(name, memcachedImage)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Apply(ctx, netpolPod("client", tenantImage, "idle")); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(t, k, netpolLabel, 3)
	var pods struct{ Items []framework.Pod }
	if err := k.GetJSON(ctx, &pods, "pods", "-l", netpolLabel); err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{}
	for _, p := range pods.Items {
		addr[p.Metadata.Name] = net.JoinHostPort(p.Status.PodIP, fmt.Sprint(memcachedPort))
	}

	expectReach(t, k, addr, "with no policy", true, true)

	policy := fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: deny-guarded
spec:
  podSelector:
    matchLabels: {%s: guarded}
  policyTypes: [Ingress]
`, netpolLabel)
	if err := k.Apply(ctx, policy); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	denied := expectReach(t, k, addr, "under deny-all ingress on guarded", true, false)
	t.Logf("+%v: the client no longer reaches guarded (%s) and still reaches open", time.Since(applied).Round(100*time.Millisecond), denied)
	// It holds: the firewall does not flap on its next syncs.
	if err := framework.Consistently(ctx, 5*time.Second, "guarded to stay unreachable and open reachable", func(ctx context.Context) error {
		return reachAsExpected(ctx, k, addr, true, false)
	}); err != nil {
		t.Fatal(err)
	}

	if _, err := k.Run(ctx, "delete", "networkpolicy", "deny-guarded"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	expectReach(t, k, addr, "after the policy is deleted", true, true)
	t.Logf("+%v: the client reaches both again", time.Since(deleted).Round(100*time.Millisecond))
}

// expectReach waits until the client reaches the open server or not, as
// wantOpen says, and the guarded server or not, as wantGuarded says, and returns
// the last probe's output for guarded.
func expectReach(t *testing.T, k framework.Kubectl, addr map[string]string, when string, wantOpen, wantGuarded bool) string {
	t.Helper()
	var guarded string
	what := fmt.Sprintf("%s: the client to reach open %s and guarded %s", when, yesNo(wantOpen), yesNo(wantGuarded))
	err := framework.EventuallyEvery(context.Background(), netpolTimeout, time.Second, what, func(ctx context.Context) error {
		if err := reachAsExpected(ctx, k, addr, wantOpen, wantGuarded); err != nil {
			return err
		}
		_, guarded, _ = probeFromClient(ctx, k, addr["guarded"])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return guarded
}

// reachAsExpected probes both servers from the client and says how the outcome
// differs from what is wanted.
func reachAsExpected(ctx context.Context, k framework.Kubectl, addr map[string]string, wantOpen, wantGuarded bool) error {
	var problems []string
	for _, s := range []struct {
		name string
		want bool
	}{{"open", wantOpen}, {"guarded", wantGuarded}} {
		reached, out, err := probeFromClient(ctx, k, addr[s.name])
		switch {
		case err != nil:
			return err
		case reached != s.want:
			problems = append(problems, fmt.Sprintf("%s %s: %s", s.name, addr[s.name], out))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// probeFromClient runs `tenant probe addr` in the client pod. reached says whether
// memcached at addr answered; out is the probe's line. A connection that the
// firewall refuses or drops is not reached; err is for an exec that gave no verdict.
func probeFromClient(ctx context.Context, k framework.Kubectl, addr string) (reached bool, out string, err error) {
	// The probe gives up after 3 s for the connection and 3 s for the answer.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stdout, err := k.Run(ctx, "exec", "client", "--", "/tenant", "probe", addr)
	out = strings.TrimSpace(stdout)
	switch {
	case err == nil && strings.HasPrefix(out, "ok "):
		return true, out, nil
	case err != nil && (strings.HasPrefix(out, "connect: ") || strings.HasPrefix(out, "version: ")):
		return false, out, nil
	case err != nil:
		return false, out, fmt.Errorf("probe %s from the client: %v (output %q)", addr, err, out)
	}
	return false, out, fmt.Errorf("probe %s from the client: unexpected output %q", addr, out)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// netpolPod is a bare pod named name, labelled netpolLabel=name, that runs image
// with args under Pod Security "restricted".
func netpolPod(name, image string, args ...string) string {
	argList := ""
	if len(args) > 0 {
		argList = fmt.Sprintf("\n      args: [%s]", strings.Join(args, ", "))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  labels: {%[2]s: %[1]s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: %[3]s%[4]s
      %[5]s
%[6]s`, name, netpolLabel, image, argList, restrictedContainer, restrictedPod("  "))
}
