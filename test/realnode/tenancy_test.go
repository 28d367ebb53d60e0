package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// tenancyOps is the namespace of the operator that TestHostileTenant
	// shares between tenants.
	tenancyOps = "tenancy-ops"
	// tenancyHostile and tenancyVictim are two tenants' namespaces, both
	// served by the shared operator; tenancyUnserved is one it does not
	// serve.
	tenancyHostile  = "tenancy-a"
	tenancyVictim   = "tenancy-b"
	tenancyUnserved = "tenancy-c"
	// tenancyLabel labels the namespaces that the shared operator serves
	// (its NAMESPACE_SELECTOR), so that it leaves the suite's other tests,
	// each served by an operator of its own, alone.
	tenancyLabel = "memcached.example.com/tenancy=shared"
	// tenantSA is the hostile tenant's identity: the built-in edit role in
	// its namespace and nothing else.
	tenantSA = "dev"
	// floodPods and floodConnsPerPod are how many pods the hostile tenant
	// floods the victim's discovery endpoint from, and how many
	// connections each opens: in half of the pods plain ones that send
	// nothing, in the other half TLS ones that never finish their
	// handshake. One pod holds fewer than its container's file limit.
	floodPods, floodConnsPerPod = 10, 1000
	// memoryMargin is how far the shared operator's resident memory may
	// grow over its level before the attack.
	memoryMargin = 64 << 20
)

// TestHostileTenant shares one operator, which serves every namespace of
// tenancyLabel, between a hostile tenant, who has the built-in edit role
// in its namespace and nothing more, and another tenant. The hostile tenant
// does what a tenant can to reach the operator or the other tenant's
// caches:
//   - pods that pass for its own Memcached's, whose sidecar port answers
//     the operator's poll with an endless report, in its namespace, and
//     with the operator's labels in a namespace the operator does not serve
//     and with no ReplicaSet, neither of which the operator may ask;
//   - Deployments that claim its Memcached as their controller, marked as
//     paced rolls, whose pods never schedule, against the fleet's only roll
//     slot (--max-concurrent-rolls=1);
//   - a loosened securityContext in its Memcached's Deployment;
//   - 10,000 connections that send nothing or half a TLS handshake to the
//     other tenant's discovery endpoint, and a slow request to its sidecar's
//     HTTP port.
//
// Meanwhile the other tenant's caches get a fleet roll, a new default
// memcached image, and a size change. The operator and the other tenant's
// containers never restart, the operator's memory stays within
// memoryMargin of its level before, the other tenant's rolls and size
// change land, a fresh discovery client is answered within a second, and
// the hostile tenant's own Memcached says what is wrong with its pods.
func TestHostileTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := cluster.Kubectl()
	for _, ns := range []string{tenancyOps, tenancyHostile, tenancyVictim, tenancyUnserved} {
		createTenancyNamespace(t, ns, ns == tenancyHostile || ns == tenancyVictim)
	}
	tenant := tenantKubectl(t, tenancyHostile)
	ops := deploySharedOperator(t)
	victim := cl.WithNamespace(tenancyVictim)
	dumpOnFailure(t, victim)
	dumpOnFailure(t, ops)
	tenantImage, err := framework.ImageRef(ctx, paths, "tenant")
	if err != nil {
		t.Fatal(err)
	}

	// The other tenant's caches: one with monitoring, whose size changes,
	// and one with TLS and discovery, whose endpoint the flood aims at.
	ca := newTestCA(t)
	certPEM, keyPEM, _ := ca.issue(t, 3)
	applySecret(t, victim, "shop-cert", "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.pem})
	applyMemcachedSpec(t, victim, "shop", "size: 1\nmonitoring: {enabled: true}")
	applyMemcachedSpec(t, victim, "tls-shop", "size: 1\ndiscovery: {enabled: true}\ntls: {secretName: shop-cert}")
	waitServingIn(t, victim, "shop", 1)
	tlsShop := waitServingIn(t, victim, "tls-shop", 1).Pods[0]
	// The hostile tenant's own cache, created as the tenant.
	tenant.apply(t, "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: own}\nspec: {size: 1, monitoring: {enabled: true}}\n")
	own := waitServingIn(t, tenant.admin, "own", 1)

	leader, err := operatorPod(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	before, err := containerMemory(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the shared operator %s: %d MiB resident before the attack", leader.Metadata.Name, (before.RSSAnon+before.RSSFile)>>20)

	// Pods the operator must never ask: one with the labels of the
	// hostile tenant's Memcached but no ReplicaSet of it, and one of a
	// Memcached's ReplicaSet in a namespace the operator does not serve.
	tenant.apply(t, tenantPod("stray", tenantImage, "own", "report", `":9150"`))
	unserved := cl.WithNamespace(tenancyUnserved)
	if err := unserved.Apply(ctx, "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: own}\nspec: {size: 1}\n"+
		"---\n"+claimingReplicaSet("own", tenantImage)); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(t, tenant.admin, "name=stray", 1)
	waitPodsRunning(t, unserved, "evil=own", 1)
	// Then the pod the operator does ask, one of a ReplicaSet of the
	// Memcached's name: an endless report, read up to its limit, which
	// only the tenant's own Memcached shows.
	tenant.apply(t, claimingReplicaSet("own", tenantImage))
	waitPodsRunning(t, tenant.admin, "evil=own", 1)

	// The slot holders.
	for _, name := range []string{"hold-1", "hold-2"} {
		tenant.apply(t, slotHolder(name, own.Memcached.Metadata.UID, tenantImage, "first"))
		tenant.apply(t, slotHolder(name, own.Memcached.Metadata.UID, tenantImage, "second"))
	}

	// The loosened securityContext: a container may run as root again.
	if _, err := tenant.run(ctx, "patch", "deployment", "own", "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/securityContext/runAsNonRoot","value":false}]`); err != nil {
		t.Fatal(err)
	}

	// The flood.
	target := net.JoinHostPort(tlsShop.Status.PodIP, "11212")
	tenant.apply(t, floodDeployment("flood-plain", tenantImage, target, "plain"))
	tenant.apply(t, floodDeployment("flood-tls", tenantImage, target, "tls"))
	flooding := time.Now()
	if err := framework.Eventually(ctx, readyTimeout, fmt.Sprintf("%d pods to open %d connections each to %s", floodPods, floodConnsPerPod, target), func(ctx context.Context) error {
		logs, err := tenant.admin.Run(ctx, "logs", "-l", "flood", "--prefix", "--tail=-1", "--max-log-requests=20")
		if err != nil {
			return err
		}
		if n := strings.Count(logs, "done: opened"); n != floodPods {
			return fmt.Errorf("%d of %d pods are done:\n%s", n, floodPods, tail(logs, 12))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("+%v: %d connections opened to %s", time.Since(flooding).Round(time.Second), floodPods*floodConnsPerPod, target)

	// While the flood holds what it can: fresh clients are answered.
	for i := range 5 {
		start := time.Now()
		c, _, err := dialTLS(ctx, target, ca, nil)
		if err != nil {
			t.Fatalf("fresh discovery client %d: %v", i, err)
		}
		r, err := askDiscovery(c)
		c.Close()
		took := time.Since(start)
		// The membership may still be empty: the kubelet writes the
		// ConfigMap's file within its sync period.
		if err != nil || took > time.Second {
			t.Fatalf("fresh discovery client %d: %+v, %v after %v; want an answer within 1s", i, r, err, took)
		}
	}
	requireSlowRequestCut(ctx, t, tlsShop)
	if err := framework.Eventually(ctx, 2*time.Minute, "the discovery endpoint to close every flooding connection", func(ctx context.Context) error {
		logs, err := tenant.admin.Run(ctx, "logs", "-l", "flood", "--prefix", "--tail=1", "--max-log-requests=20")
		if err != nil {
			return err
		}
		if n := strings.Count(logs, fmt.Sprintf("closed by the server %d\n", floodConnsPerPod)); n != floodPods {
			return fmt.Errorf("%d of %d pods had all their connections closed:\n%s", n, floodPods, logs)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The hostile tenant's own Memcached says what is wrong with the pod
	// that claims its ReplicaSet, after the operator asked that pod twice;
	// by then it had never asked the others; the security edit is undone.
	err = framework.Eventually(ctx, 3*time.Minute, "memcached own to report its pod's invalid report", func(ctx context.Context) error {
		m, err := getMemcached(ctx, tenant.admin, "own")
		if err != nil {
			return err
		}
		c := m.Condition("Degraded")
		if c == nil || c.Status != "True" || c.Reason != "SidecarReportInvalid" || !strings.Contains(c.Message, "own-evil-") {
			return fmt.Errorf("Degraded: %+v", c)
		}
		asked, err := tenant.admin.Run(ctx, "logs", "-l", "evil=own", "--tail=-1")
		if n := strings.Count(asked, "GET /status"); err != nil || n < 2 {
			return fmt.Errorf("the pod claiming own's ReplicaSet was asked %d times (%v)", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, never := range []struct {
		k        framework.Kubectl
		selector string
	}{{tenant.admin, "name=stray"}, {unserved, "evil=own"}} {
		if logs, err := never.k.Run(ctx, "logs", "-l", never.selector, "--tail=-1"); err != nil || strings.Contains(logs, "GET") {
			t.Errorf("pod %s in %s: asked: %q, %v; want never", never.selector, never.k.Namespace, logs, err)
		}
	}
	if err := framework.Eventually(ctx, readyTimeout, "the operator to put back own's pod security", func(ctx context.Context) error {
		out, err := tenant.admin.Run(ctx, "get", "deployment", "own", "-o", "jsonpath={.spec.template.spec.containers[*].securityContext}")
		if err != nil || strings.Contains(out, "runAsNonRoot") {
			return fmt.Errorf("the containers' securityContext: %s (%v)", out, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := requireNoRestarts(ctx, victim, "tls-shop"); err != nil {
		t.Fatal(err)
	}
	peakOld, err := containerMemory(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}

	// The fleet roll: the same memcached image by its digest is a new
	// default image to the operator. The one slot must go round, past
	// the hostile tenant's Deployments; the size change must not wait.
	image, err := imageByDigest(ctx, memcachedImage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Run(ctx, "set", "env", "deployment/"+operatorName, "MEMCACHED_IMAGE="+image); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Run(ctx, "scale", "memcached/shop", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	waitServingIn(t, victim, "shop", 2)
	for _, name := range []string{"shop", "tls-shop"} {
		if err := framework.Eventually(ctx, 2*readyTimeout, "memcached "+name+" to roll to "+image, func(ctx context.Context) error {
			o, err := framework.Observe(ctx, victim, name)
			if err != nil {
				return err
			}
			if err := framework.Converged(o, o.Memcached.Spec.Size); err != nil {
				return err
			}
			// A container's status names the image by its tag, whatever
			// reference the pod asked for: the pods' specs tell.
			out, err := victim.Run(ctx, "get", "pods", "-l", "memcached_cr="+name, "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{"\n"}{end}`)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasSuffix(line, " "+image) {
					return fmt.Errorf("pod and image: %s", line)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	newLeader, err := operatorPod(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	peakNew, err := containerMemory(ctx, newLeader)
	if err != nil {
		t.Fatal(err)
	}
	limit := before.RSSAnon + before.RSSFile + memoryMargin
	t.Logf("peak resident memory: %d MiB before the roll, %d MiB of the new leader %s; limit %d MiB", peakOld.PeakRSS>>20, peakNew.PeakRSS>>20, newLeader.Metadata.Name, limit>>20)
	if peakOld.PeakRSS > limit || peakNew.PeakRSS > limit {
		t.Errorf("the shared operator's peak resident memory went past %d MiB", limit>>20)
	}
	for _, k := range []framework.Kubectl{ops, victim} {
		if err := requireNoRestarts(ctx, k, ""); err != nil {
			t.Error(err)
		}
	}
}

// createTenancyNamespace creates namespace ns under Pod Security
// "restricted", labelled tenancyLabel when served, and deletes it when the
// test ends.
func createTenancyNamespace(t *testing.T, ns string, served bool) {
	t.Helper()
	ctx := context.Background()
	cl := cluster.Kubectl()
	labels := "    pod-security.kubernetes.io/enforce: restricted\n"
	if served {
		key, value, _ := strings.Cut(tenancyLabel, "=")
		labels += fmt.Sprintf("    %s: %s\n", key, value)
	}
	if err := cl.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n  labels:\n"+labels); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cl.Run(context.Background(), "delete", "namespace", ns, "--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// tenantClient is kubectl as the tenant: the ServiceAccount tenantSA of
// its namespace, with the built-in edit role there, impersonated by the
// admin.
type tenantClient struct {
	// admin is kubectl as the admin in the tenant's namespace, for reads
	// the test makes.
	admin framework.Kubectl
	user  string
}

// tenantKubectl creates the tenant's ServiceAccount in ns, binds it to the
// built-in edit role there, and returns kubectl as it.
func tenantKubectl(t *testing.T, ns string) tenantClient {
	t.Helper()
	admin := cluster.Kubectl().WithNamespace(ns)
	if err := admin.Apply(context.Background(), fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-edit}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
roleRef: {kind: ClusterRole, name: edit, apiGroup: rbac.authorization.k8s.io}
`, tenantSA, ns)); err != nil {
		t.Fatal(err)
	}
	return tenantClient{admin: admin, user: fmt.Sprintf("system:serviceaccount:%s:%s", ns, tenantSA)}
}

// run runs kubectl as the tenant.
func (c tenantClient) run(ctx context.Context, args ...string) (string, error) {
	return c.admin.Run(ctx, append([]string{"--as=" + c.user}, args...)...)
}

// apply applies manifest as the tenant.
func (c tenantClient) apply(t *testing.T, manifest string) {
	t.Helper()
	if _, err := c.admin.RunWithInput(context.Background(), manifest, "--as="+c.user, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// deploySharedOperator deploys the operator to tenancyOps as `make deploy
// SCOPE=cluster` does, serving the namespaces of tenancyLabel alone, with
// one roll slot, and removes its cluster-wide RBAC when the test ends.
func deploySharedOperator(t *testing.T) framework.Kubectl {
	t.Helper()
	ctx := context.Background()
	cl := cluster.Kubectl()
	ops := cl.WithNamespace(tenancyOps)
	rendered, err := exec.CommandContext(ctx, filepath.Join(paths.Root, "tmp/build/render-operator.sh"), operatorImage).Output()
	if err != nil {
		t.Fatalf("render-operator.sh: %v", err)
	}
	operator, err := ops.RunWithInput(ctx, string(rendered), "set", "env", "--local", "-f", "-", "-c", operatorName, "-o", "yaml",
		"WATCH_NAMESPACE=", "NAMESPACE_SELECTOR="+tenancyLabel, "MEMCACHED_IMAGE="+memcachedImage, "MAX_CONCURRENT_ROLLS=1")
	if err != nil {
		t.Fatal(err)
	}
	binding, err := os.ReadFile(filepath.Join(paths.Root, "deploy/cluster/cluster-role-binding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const bindingName = "memcached-operator-tenancy"
	b := strings.Replace(string(binding), "  name: memcached-operator\nsubjects", "  name: "+bindingName+"\nsubjects", 1)
	b = strings.Replace(b, "    namespace: default\n", "    namespace: "+tenancyOps+"\n", 1)
	if !strings.Contains(b, bindingName) || !strings.Contains(b, tenancyOps) {
		t.Fatalf("deploy/cluster/cluster-role-binding.yaml changed shape:\n%s", binding)
	}
	t.Cleanup(func() {
		if _, err := cl.Run(context.Background(), "delete", "clusterrolebinding", bindingName, "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	var manifests []string
	for _, f := range []string{"deploy/sa.yaml", "deploy/cluster/cluster-role.yaml", "deploy/cluster/leader-election.yaml"} {
		data, err := os.ReadFile(filepath.Join(paths.Root, f))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(data))
	}
	manifests = append(manifests, b, operator)
	if err := ops.Apply(ctx, strings.Join(manifests, "\n---\n")); err != nil {
		t.Fatal(err)
	}
	if err := framework.Eventually(ctx, readyTimeout, "the shared operator to lead", func(ctx context.Context) error {
		_, err := operatorPod(ctx, ops)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ops
}

// restrictedPod returns what Pod Security "restricted" asks of a pod spec
// besides its containers, at indent.
func restrictedPod(indent string) string {
	return indent + "securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}\n" +
		indent + "automountServiceAccountToken: false\n"
}

// restrictedContainer is a container's securityContext that Pod Security
// "restricted" asks for.
const restrictedContainer = `securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}`

// tenantPod is a bare pod named name that runs the tenant image with args
// in a container named sidecar, labelled as a pod of Memcached memcached.
func tenantPod(name, image, memcached string, args ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: memcached, memcached_cr: %s, name: %s}
spec:
  containers:
    - name: sidecar
      image: %s
      args: [%s]
      %s
%s`, name, memcached, name, image, strings.Join(args, ", "), restrictedContainer, restrictedPod("  "))
}

// claimingReplicaSet is a ReplicaSet named memcached-evil of one pod with
// the labels of Memcached memcached's pods, pod-template-hash "evil", so
// that its pods pass for the pods of the Memcached's own ReplicaSets, and
// a container named sidecar that answers every request with an endless
// report.
func claimingReplicaSet(memcached, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: %[1]s-evil
  labels: {evil: %[1]s}
spec:
  replicas: 1
  selector:
    matchLabels: {evil: %[1]s, pod-template-hash: evil}
  template:
    metadata:
      labels: {app: memcached, memcached_cr: %[1]s, pod-template-hash: evil, evil: %[1]s}
    spec:
      containers:
        - name: sidecar
          image: %[2]s
          args: [report, ":9150"]
          %[3]s
%[4]s`, memcached, image, restrictedContainer, restrictedPod("      "))
}

// slotHolder is a Deployment named name that claims Memcached own of uid
// as its controller, marked as a paced roll, whose pods never schedule, of
// the template hash hash: applied again with another hash, it has a pod of
// an older template that never leaves.
func slotHolder(name, uid, image, hash string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app: memcached, memcached_cr: %[1]s}
  ownerReferences:
    - {apiVersion: cache.example.com/v1alpha1, kind: Memcached, name: own, uid: %[2]s, controller: true}
spec:
  replicas: 1
  selector:
    matchLabels: {app: memcached, memcached_cr: %[1]s}
  template:
    metadata:
      labels: {app: memcached, memcached_cr: %[1]s}
      annotations: {cache.example.com/template-hash: %[4]s, cache.example.com/paced-roll: "true"}
    spec:
      nodeSelector: {memcached.example.com/nowhere: "true"}
      containers:
        - name: memcached
          image: %[3]s
          args: [report, ":9150"]
          %[5]s
%[6]s`, name, uid, image, hash, restrictedContainer, restrictedPod("      "))
}

// floodDeployment is a Deployment of floodPods/2 pods that each open
// floodConnsPerPod connections of mode (plain or tls) to target and hold
// them.
func floodDeployment(name, image, target, mode string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d
  selector:
    matchLabels: {flood: %[1]s}
  template:
    metadata:
      labels: {flood: %[1]s}
    spec:
      containers:
        - name: flood
          image: %[3]s
          args: [flood, "%[4]s", "%[5]d", %[6]s]
          %[7]s
%[8]s`, name, floodPods/2, image, target, floodConnsPerPod, mode, restrictedContainer, restrictedPod("      "))
}

// waitPodsRunning waits until n pods that selector selects run, with an IP.
func waitPodsRunning(t *testing.T, k framework.Kubectl, selector string, n int) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, fmt.Sprintf("%d pods %s to run", n, selector), func(ctx context.Context) error {
		var pods struct{ Items []framework.Pod }
		if err := k.GetJSON(ctx, &pods, "pods", "-l", selector); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == "Running" && p.Status.PodIP != "" && p.Ready() {
				running++
			}
		}
		if running != n {
			return fmt.Errorf("%d of %d run", running, len(pods.Items))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// containerMemory returns the memory figures of the operator container of
// pod p, from the host.
func containerMemory(ctx context.Context, p framework.Pod) (framework.ProcessMemory, error) {
	pid, err := containerProcess(ctx, p, operatorName)
	if err != nil {
		return framework.ProcessMemory{}, err
	}
	return framework.ProcessMemoryOf(pid)
}

// requireNoRestarts fails when a container of a pod in k's namespace, of
// Memcached name or of every pod when name is "", has restarted.
func requireNoRestarts(ctx context.Context, k framework.Kubectl, name string) error {
	args := []string{"pods"}
	if name != "" {
		args = append(args, "-l", "memcached_cr="+name)
	}
	var pods struct{ Items []framework.Pod }
	if err := k.GetJSON(ctx, &pods, args...); err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				return fmt.Errorf("container %s of pod %s/%s restarted %d times", c.Name, k.Namespace, p.Metadata.Name, c.RestartCount)
			}
		}
	}
	return nil
}

// imageByDigest returns ref, an image of the local registry, as
// ref@sha256:..., the registry's digest of its manifest: the same image
// under another name.
func imageByDigest(ctx context.Context, ref string) (string, error) {
	host, rest, _ := strings.Cut(ref, "/")
	repo, tag, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("image %s has no tag", ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+host+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest) {
		return "", fmt.Errorf("HEAD %s: %s, digest %q", req.URL, resp.Status, digest)
	}
	return ref + "@" + digest, nil
}

// requireSlowRequestCut sends a request to the sidecar port of pod p, one
// header line every second and never the end of the headers, and fails
// unless the sidecar closes the connection within a minute, while a
// request from another connection is answered.
func requireSlowRequestCut(ctx context.Context, t *testing.T, p framework.Pod) {
	t.Helper()
	addr := net.JoinHostPort(p.Status.PodIP, "9150")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_, _ = io.Copy(io.Discard, c)
		closed <- time.Since(start)
	}()
	if _, err := io.WriteString(c, "GET /status HTTP/1.1\r\nHost: sidecar\r\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	answered := false
	for {
		select {
		case took := <-closed:
			if !answered {
				t.Fatalf("the sidecar closed the slow request after %v, before another was answered", took)
			}
			t.Logf("the sidecar closed a slow request after %v", took.Round(100*time.Millisecond))
			return
		case <-deadline:
			t.Fatalf("the sidecar of %s held a request that never ends its headers for a minute", p.Metadata.Name)
		case <-tick.C:
			_, _ = fmt.Fprintf(c, "X-Slow-%d: %s\r\n", time.Now().UnixNano(), strconv.Itoa(1))
			if !answered {
				_, err := getSidecarReport(ctx, p)
				answered = err == nil
			}
		}
	}
}
