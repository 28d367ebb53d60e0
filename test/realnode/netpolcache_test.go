package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// The namespaces of TestNetworkPolicyAdmitsOnlyNamedClients's client pods,
// besides the suite's own, where the Memcached is.
const (
	// npAllowed carries npClientLabel, which spec.networkPolicy.from names.
	npAllowed = "np-allowed"
	// npOther is no one's: it must never get in.
	npOther = "np-other"
	// npMonitoring is where --monitoring-namespace-selector's default
	// (kubernetes.io/metadata.name=monitoring) admits scrapers from.
	npMonitoring = "monitoring"
	// npClientLabel marks npAllowed.
	npClientLabel = "np-client"
	// npClient is the client pod of each namespace.
	npClient = "np-client"
)

// TestNetworkPolicyAdmitsOnlyNamedClients runs a cache with auth, discovery and
// monitoring, and spec.networkPolicy on, under kube-router's firewall
// (enforceNetworkPolicies), and a client pod in each of four namespaces: the
// cache's own, np-allowed, np-other and monitoring. Every probe goes pod to pod;
// the node's own traffic always passes.
//
//   - With no peers listed, only the cache's own namespace reaches memcached's
//     port (the client logs in, stores a key and reads it back) and the discovery
//     port; the others cannot connect. Only monitoring, besides the operator,
//     reaches the metrics port.
//   - The operator still gets the sidecar's report through the policy: a
//     malformed password file turns the Memcached Degraded=True
//     AuthReloadFailed, and the fix clears it.
//   - A hand edit that empties the policy's rules is put back, and the own
//     namespace's client gets in again.
//   - from naming np-allowed's label lets np-allowed in and keeps the own
//     namespace out; turned off, the policy is gone and np-other gets in; turned
//     on again with from emptied, np-other is out again and the own namespace in.
//
// No pod is replaced or restarted by any of it.
func TestNetworkPolicyAdmitsOnlyNamedClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kr := enforceNetworkPolicies(t)
	const name, secret, user, password = "np-cache", "np-cache-auth", "app", "s3cret"
	cl := cluster.Kubectl()
	tenantImage, err := framework.ImageRef(ctx, paths, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]string{
		npAllowed:    "\n    " + npClientLabel + ": \"yes\"",
		npOther:      "",
		npMonitoring: "",
	}
	for ns, labels := range namespaces {
		if err := cl.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+
			"\n  labels:\n    pod-security.kubernetes.io/enforce: restricted"+labels+"\n"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := cl.Run(context.Background(), "delete", "namespace", ns, "--ignore-not-found", "--wait=false"); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	clients := map[string]framework.Kubectl{namespace: admin}
	for ns := range namespaces {
		clients[ns] = cl.WithNamespace(ns)
	}
	for ns, k := range clients {
		if err := k.Apply(ctx, netpolClientPod(tenantImage)); err != nil {
			t.Fatalf("client pod in %s: %v", ns, err)
		}
		if ns == namespace {
			t.Cleanup(func() {
				if _, err := admin.Run(context.Background(), "delete", "pod", npClient, "--ignore-not-found", "--wait=false"); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
		}
	}
	framework.DumpOnFailure(t, func() string {
		var b strings.Builder
		for ns := range clients {
			b.WriteString(framework.Describe(context.Background(), cl, ns, "pods,networkpolicies"))
		}
		return b.String()
	}, func() string {
		return kr.Diagnostics(context.Background())
	})

	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte(user + ":" + password + "\n")})
	spec := "size: 1\nauth: {secretName: " + secret + "}\ndiscovery: {enabled: true}\nmonitoring: {enabled: true}\nnetworkPolicy: {enabled: true}"
	applyMemcachedSpec(t, admin, name, spec)
	for _, k := range clients {
		waitPodsRunning(t, k, "np-test="+npClient, 1)
	}
	pod, _, before := waitServingOnePod(t, name)
	pods, err := listPods(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	ip := pods[pod].IP
	e := npEnv{clients: clients, ip: ip, user: user, password: password}

	t.Log("no peers listed: the own namespace alone reaches memcached and discovery; monitoring alone reaches the metrics port")
	e.expect(t, "with spec.networkPolicy on and no peers", map[npProbe]bool{
		{namespace, memcachedPort}: true, {npAllowed, memcachedPort}: false, {npOther, memcachedPort}: false, {npMonitoring, memcachedPort}: false,
		{namespace, discoveryPort}: true, {npOther, discoveryPort}: false,
		{npMonitoring, sidecarMetricsPort}: true, {npOther, sidecarMetricsPort}: false, {namespace, sidecarMetricsPort}: false,
	})

	t.Log("the operator's poll of the sidecar's report passes the policy")
	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte(user + ":" + password + "\n\nnew:new-password\n")})
	requireSidecarReport(ctx, t, name, pod, "AuthReloadFailed", "line 2 is not user:password")
	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte(user + ":" + password + "\n")})
	requireHealedWithoutRestart(ctx, t, admin, name, before, time.Now(), reportBudget, "the fixed file", func(context.Context) error { return nil })

	t.Log("a hand edit that empties the policy's rules is put back")
	mustRun(ctx, t, admin, "patch", "networkpolicy", name, "--type=json", `-p=[{"op":"remove","path":"/spec/ingress"}]`)
	e.expect(t, "after a hand edit of the policy", map[npProbe]bool{
		{namespace, memcachedPort}: true, {npOther, memcachedPort}: false,
	})
	if err := framework.Eventually(ctx, netpolTimeout, "the policy's rules to be put back", func(ctx context.Context) error {
		out, err := admin.Run(ctx, "get", "networkpolicy", name, "-o", "jsonpath={.spec.ingress[*].ports[*].port}")
		if err != nil {
			return err
		}
		if got := strings.Fields(out); !reflect.DeepEqual(got, []string{"11211", "11212", "9150"}) {
			return fmt.Errorf("the policy's ports are %v", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	t.Log("from names np-allowed's label: np-allowed gets in, the own namespace does not")
	mustRun(ctx, t, admin, "patch", "memcached", name, "--type=merge",
		`-p={"spec":{"networkPolicy":{"enabled":true,"from":[{"namespaceSelector":{"matchLabels":{"`+npClientLabel+`":"yes"}}}]}}}`)
	e.expect(t, "with from naming np-allowed", map[npProbe]bool{
		{npAllowed, memcachedPort}: true, {namespace, memcachedPort}: false, {npOther, memcachedPort}: false,
		{npAllowed, discoveryPort}: true, {npOther, discoveryPort}: false,
	})

	t.Log("turned off: the policy is gone and np-other gets in")
	mustRun(ctx, t, admin, "patch", "memcached", name, "--type=merge", `-p={"spec":{"networkPolicy":{"enabled":false}}}`)
	if err := framework.Eventually(ctx, netpolTimeout, "the policy to be deleted", func(ctx context.Context) error {
		out, err := admin.Run(ctx, "get", "networkpolicy", "--ignore-not-found", "-o", "name", name)
		if err != nil {
			return err
		}
		if out = strings.TrimSpace(out); out != "" {
			return fmt.Errorf("%s is still there", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.expect(t, "with spec.networkPolicy off", map[npProbe]bool{
		{npOther, memcachedPort}: true, {npOther, sidecarMetricsPort}: true,
	})

	t.Log("turned on again, from emptied: np-other is out again, the own namespace in")
	mustRun(ctx, t, admin, "patch", "memcached", name, "--type=merge", `-p={"spec":{"networkPolicy":{"enabled":true,"from":null}}}`)
	e.expect(t, "with spec.networkPolicy on again", map[npProbe]bool{
		{namespace, memcachedPort}: true, {npOther, memcachedPort}: false, {npOther, sidecarMetricsPort}: false,
	})

	after, err := listPods(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, pods) {
		t.Errorf("the pods were %v, now %v: want the same pod, no container restarted, through every change of the policy", pods, after)
	}
	o, err := framework.Observe(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := statusTellsPods(o, 1); err != nil {
		t.Errorf("at the end: %v", err)
	}
}

// npProbe is a connection from the client pod of a namespace to a port of the
// cache's pod.
type npProbe struct {
	from string
	port int
}

// npEnv holds TestNetworkPolicyAdmitsOnlyNamedClients's clients and the cache's
// pod IP and login.
type npEnv struct {
	clients        map[string]framework.Kubectl
	ip             string
	user, password string
}

// expect waits until every probe of want gets in, or not, as it says: getting
// into memcached's port means logging in, storing a key and reading it back;
// into the others, a TCP connection. Once they all do, they must keep doing so
// for a few seconds: the firewall does not flap.
func (e npEnv) expect(t *testing.T, when string, want map[npProbe]bool) {
	t.Helper()
	ctx := context.Background()
	check := func(ctx context.Context) error {
		var problems []string
		for p, in := range want {
			got, out, err := e.probe(ctx, p)
			if err != nil {
				return err
			}
			if got != in {
				problems = append(problems, fmt.Sprintf("from %s to port %d: %s", p.from, p.port, out))
			}
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	}
	what := fmt.Sprintf("%s: the clients to get in where %v says so", when, want)
	start := time.Now()
	if err := framework.EventuallyEvery(ctx, netpolTimeout, time.Second, what, check); err != nil {
		t.Fatal(err)
	}
	if err := framework.Consistently(ctx, 3*time.Second, what, check); err != nil {
		t.Fatal(err)
	}
	t.Logf("+%v: %s: %d probes as expected", time.Since(start).Round(100*time.Millisecond), when, len(want))
}

// probe runs the tenant's keys mode (memcached's port) or probe mode (the others)
// in the client pod of p.from, and says whether it got in: err is for an exec
// that gave no verdict.
func (e npEnv) probe(ctx context.Context, p npProbe) (in bool, out string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr := net.JoinHostPort(e.ip, strconv.Itoa(p.port))
	args := []string{"exec", npClient, "--", "/tenant", "probe", addr}
	if p.port == memcachedPort {
		args = []string{"exec", npClient, "--", "/tenant", "keys", addr, e.user, e.password}
	}
	stdout, err := e.clients[p.from].Run(ctx, args...)
	out = strings.TrimSpace(stdout)
	switch {
	case err == nil && strings.HasPrefix(out, "ok "):
		return true, out, nil
	case strings.HasPrefix(out, "connect: "):
		return false, out, nil
	case err != nil && p.port != memcachedPort && strings.HasPrefix(out, "version: "):
		// Connected to a port that speaks no memcached: in.
		return true, out, nil
	case err != nil && p.port == memcachedPort && strings.HasPrefix(out, "keys: "):
		return false, out, fmt.Errorf("from %s: connected to memcached %s but the login, store or read failed: %s", p.from, addr, out)
	}
	return false, out, fmt.Errorf("from %s to %s: %v (output %q)", p.from, addr, err, out)
}

// netpolClientPod is the bare client pod of a namespace, running the tenant
// image idle under Pod Security "restricted", for `kubectl exec` probes.
func netpolClientPod(image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  labels: {np-test: %[1]s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: %[2]s
      args: [idle]
      %[3]s
%[4]s`, npClient, image, restrictedContainer, restrictedPod("  "))
}
