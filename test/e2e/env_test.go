package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// convergeTimeout bounds every wait for the operator and the control plane to
	// reach a state; on KWOK it normally takes a few seconds.
	convergeTimeout = 90 * time.Second
	// operatorSA is the ServiceAccount of deploy/sa.yaml that deploy/rbac.yaml binds.
	operatorSA = "memcached-operator"
)

// namespace is a test's own namespace, with deploy/sa.yaml and deploy/rbac.yaml
// applied, and at most one operator watching it.
type namespace struct {
	t    testing.TB
	name string
	// kubectl acts as the cluster admin, in this namespace.
	kubectl  framework.Kubectl
	operator *framework.Operator
	// operatorKubeconfig authenticates as the namespace's memcached-operator
	// ServiceAccount; startOperator writes it.
	operatorKubeconfig string
	dir                string
	// binary, when set, is the operator startOperator runs instead of the one
	// `make build` writes (see startRaceOperator).
	binary string
	// env are extra KEY=VALUE entries of the operator's environment.
	env []string
	// watch, when set, is the operator's WATCH_NAMESPACE instead of the
	// namespace's own name (see serve); watchAll makes it "", every
	// namespace (see serveAll).
	watch    string
	watchAll bool
	// proxy, when set, is the API server for startOperator's operator (see
	// viaProxy).
	proxy *framework.APIProxy
}

// newNamespace creates a namespace named after the test plus prefix and a random
// suffix, applies the operator's ServiceAccount and RBAC to it, and deletes it when
// the test ends. On failure, the test log gets `kubectl describe` of it.
func newNamespace(t testing.TB, prefix string) *namespace {
	t.Helper()
	ctx := context.Background()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails
	name := fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(suffix))
	ns := &namespace{
		t:       t,
		name:    name,
		kubectl: cluster.Kubectl().WithNamespace(name),
		dir:     filepath.Join(scratch, name),
	}
	if _, err := cluster.Kubectl().Run(ctx, "create", "namespace", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Deleting the namespace deletes everything in it; the cluster goes at the end.
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "namespace", name, "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	framework.DumpOnFailure(t, func() string {
		return framework.Describe(context.Background(), cluster.Kubectl(), name, "memcached,deployments,replicasets,pods")
	}, func() string {
		return controllerManagerLog(name)
	})
	if _, err := ns.kubectl.Run(ctx, "apply", "-f", paths.Deploy("sa.yaml"), "-f", paths.Deploy("rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	return ns
}

// startOperator runs the operator binary with WATCH_NAMESPACE set to this namespace
// and a kubeconfig for its memcached-operator ServiceAccount, and stops it when the
// test ends. On failure, the test log gets the operator's log.
func (ns *namespace) startOperator(args ...string) *framework.Operator {
	ns.t.Helper()
	if ns.operator != nil {
		ns.t.Fatalf("namespace %s already has an operator", ns.name)
	}
	ns.operator = ns.runOperator(framework.OperatorConfig{LogFile: filepath.Join(ns.dir, "operator.log"), Args: args})
	return ns.operator
}

// startReplicas runs n operators as startOperator does, but with
// --leader-elect and each with an identity of its own (POD_NAME replica-0,
// replica-1 ...), as deploy/operator.yaml runs its replicas, with the
// election timings it leaves at their defaults. Each logs to a file of its
// own, every line stamped (see framework.OperatorConfig.Stamped).
func (ns *namespace) startReplicas(n int, args ...string) []*framework.Operator {
	ns.t.Helper()
	if ns.operator != nil {
		ns.t.Fatalf("namespace %s already has an operator", ns.name)
	}
	var ops []*framework.Operator
	for i := range n {
		name := fmt.Sprintf("replica-%d", i)
		ops = append(ops, ns.runOperator(framework.OperatorConfig{
			LogFile: filepath.Join(ns.dir, name+".log"),
			Args:    append([]string{"--leader-elect"}, args...),
			Env:     []string{"POD_NAME=" + name},
			Stamped: true,
		}))
	}
	ns.operator = ops[0]
	return ops
}

// runOperator starts the operator of cfg, with the namespace's binary,
// environment, kubeconfig and WATCH_NAMESPACE, and flags for KWOK's pods
// before cfg's, and stops it when the test ends.
func (ns *namespace) runOperator(cfg framework.OperatorConfig) *framework.Operator {
	t := ns.t
	t.Helper()
	if ns.operatorKubeconfig == "" {
		kubeconfig := filepath.Join(ns.dir, "operator.kubeconfig")
		if err := cluster.ServiceAccountKubeconfig(context.Background(), ns.name, operatorSA, kubeconfig, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ns.proxy != nil {
			proxied := filepath.Join(ns.dir, "operator-via-proxy.kubeconfig")
			if err := ns.proxy.Kubeconfig(kubeconfig, proxied); err != nil {
				t.Fatal(err)
			}
			kubeconfig = proxied
		}
		ns.operatorKubeconfig = kubeconfig
	}
	cfg.Binary = ns.operatorBinary()
	cfg.Env = append(slices.Clone(ns.env), cfg.Env...)
	cfg.Kubeconfig = ns.operatorKubeconfig
	cfg.WatchNamespace = ns.watchNamespace()
	// KWOK's pods run no containers, so there is no sidecar to ask,
	// and their IPs lead nowhere on this machine: the poll is off.
	cfg.Args = append([]string{"--log-level=debug", "--sidecar-poll-interval=0"}, cfg.Args...)
	op, err := framework.StartOperator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := op.Stop(30 * time.Second); err != nil {
			t.Errorf("operator in %s (%s) did not stop cleanly: %v", ns.name, op.LogFile(), err)
		}
	})
	framework.DumpOnFailure(t, func() string {
		return fmt.Sprintf("===== operator log (WATCH_NAMESPACE=%s, %s)\n%s", ns.watchNamespace(), op.LogFile(), op.Log())
	})
	return op
}

// serve makes startOperator's operator, which runs as ns's ServiceAccount
// and keeps its Lease in ns (POD_NAMESPACE), watch the namespaces of watched
// instead of ns, as a WATCH_NAMESPACE list, and binds deploy/rbac.yaml's Role
// of each of them, which newNamespace applied, to that ServiceAccount: a list
// needs no right beyond each namespace's Role.
func (ns *namespace) serve(watched ...*namespace) {
	ns.t.Helper()
	var names []string
	for _, w := range watched {
		w.run("create", "rolebinding", "memcached-operator-of-"+ns.name, "--role=memcached-operator", "--serviceaccount="+ns.name+":"+operatorSA)
		names = append(names, w.name)
	}
	ns.watch = strings.Join(names, ",")
	ns.env = append(ns.env, "POD_NAMESPACE="+ns.name)
}

// serveAll makes startOperator's operator, which runs as ns's
// ServiceAccount and keeps its Lease in ns (POD_NAMESPACE), watch every
// namespace, with deploy/cluster/'s ClusterRole bound to that
// ServiceAccount until the test ends. Only a test that runs alone may, or
// one whose operator --namespace-selector confines to the test's own
// namespaces (TestNamespaceSelector): unconfined, the operator would
// reconcile every other test's Memcacheds too.
func (ns *namespace) serveAll() {
	ns.t.Helper()
	ctx := context.Background()
	binding := "memcached-operator-of-" + ns.name
	if _, err := cluster.Kubectl().Run(ctx, "apply", "-f", paths.Deploy("cluster/cluster-role.yaml")); err != nil {
		ns.t.Fatal(err)
	}
	if _, err := cluster.Kubectl().Run(ctx, "create", "clusterrolebinding", binding, "--clusterrole=memcached-operator", "--serviceaccount="+ns.name+":"+operatorSA); err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(func() {
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "clusterrolebinding", binding, "--ignore-not-found"); err != nil {
			ns.t.Errorf("cleanup: %v", err)
		}
	})
	ns.watchAll = true
	ns.env = append(ns.env, "POD_NAMESPACE="+ns.name)
}

// label sets the labels of the namespace itself, such as key=value.
func (ns *namespace) label(labels ...string) {
	ns.t.Helper()
	if _, err := cluster.Kubectl().Run(context.Background(), append([]string{"label", "namespace", ns.name}, labels...)...); err != nil {
		ns.t.Fatal(err)
	}
}

// watchNamespace is the WATCH_NAMESPACE of ns's operators: its own name,
// the list that serve set, or "" after serveAll.
func (ns *namespace) watchNamespace() string {
	switch {
	case ns.watchAll:
		return ""
	case ns.watch != "":
		return ns.watch
	}
	return ns.name
}

// scope is how ns's operators name what they watch in their log, after
// "watching " (see kube.Scope.String).
func (ns *namespace) scope() string {
	switch {
	case ns.watchAll:
		return "all namespaces"
	case ns.watch != "":
		names := strings.Split(ns.watch, ",")
		if len(names) == 1 {
			return "namespace " + names[0]
		}
		slices.Sort(names)
		return "namespaces " + strings.Join(names, ",")
	}
	return "namespace " + ns.name
}

// operatorBinary is the operator that startOperator runs: ns.binary, or
// the one `make build` writes.
func (ns *namespace) operatorBinary() string {
	if ns.binary != "" {
		return ns.binary
	}
	return paths.OperatorBinary()
}

// viaProxy makes startOperator's operator reach the API server through a new
// APIProxy, which records its requests, and returns the proxy.
func (ns *namespace) viaProxy() *framework.APIProxy {
	ns.t.Helper()
	p, err := framework.StartAPIProxy(cluster.Kubeconfig)
	if err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(p.Close)
	ns.proxy = p
	return p
}

// run runs kubectl in the namespace and fails the test on error.
func (ns *namespace) run(args ...string) string {
	ns.t.Helper()
	out, err := ns.kubectl.Run(context.Background(), args...)
	if err != nil {
		ns.t.Fatal(err)
	}
	return out
}

// apply applies a manifest in the namespace and fails the test on error.
func (ns *namespace) apply(manifest string) {
	ns.t.Helper()
	if err := ns.kubectl.Apply(context.Background(), manifest); err != nil {
		ns.t.Fatal(err)
	}
}

// eventually fails the test unless check passes within convergeTimeout.
func (ns *namespace) eventually(what string, check func(context.Context) error) {
	ns.t.Helper()
	if err := framework.Eventually(context.Background(), convergeTimeout, what, check); err != nil {
		ns.t.Fatal(err)
	}
}

// createMemcached creates a Memcached with spec.size size.
func (ns *namespace) createMemcached(name string, size int) {
	ns.t.Helper()
	ns.apply(fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: %s
spec:
  size: %d
`, name, size))
}

// setSize edits spec.size, as `kubectl edit` would.
func (ns *namespace) setSize(name string, size int) {
	ns.t.Helper()
	ns.run("patch", "memcached", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, size))
}

// scale changes spec.size through the scale subresource.
func (ns *namespace) scale(name string, size int) {
	ns.t.Helper()
	ns.run("scale", "memcached/"+name, fmt.Sprintf("--replicas=%d", size))
}

// waitConverged waits until Memcached name is in the steady state for its spec.size
// (see framework.Converged) and returns what it then observed.
func (ns *namespace) waitConverged(name string, size int) framework.Observed {
	ns.t.Helper()
	var o framework.Observed
	ns.eventually(fmt.Sprintf("memcached %s/%s to converge on size %d", ns.name, name, size), func(ctx context.Context) error {
		var err error
		o, err = framework.Observe(ctx, ns.kubectl, name)
		if err != nil {
			return err
		}
		return framework.Converged(o, size)
	})
	return o
}

// snapshot observes name once and fails the test on error.
func (ns *namespace) snapshot(name string) framework.Observed {
	ns.t.Helper()
	o, err := framework.Observe(context.Background(), ns.kubectl, name)
	if err != nil {
		ns.t.Fatal(err)
	}
	return o
}

// events returns the Events about Memcached name with the given reason.
func (ns *namespace) events(ctx context.Context, name, reason string) ([]framework.Event, error) {
	var list struct{ Items []framework.Event }
	err := ns.kubectl.GetJSON(ctx, &list, "events",
		"--field-selector", "involvedObject.kind=Memcached,involvedObject.name="+name+",reason="+reason)
	return list.Items, err
}

// slug turns a test name into a namespace prefix: TestScale -> scale.
func slug(testName string) string {
	s := strings.ToLower(strings.TrimPrefix(testName, "Test"))
	s = strings.NewReplacer("/", "-", "_", "-").Replace(s)
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.Trim(s, "-")
}

// controllerManagerLog returns the last kube-controller-manager log lines that
// mention namespace ns: the garbage collector's and the Deployment controller's
// view, for failures the operator's log cannot explain.
func controllerManagerLog(ns string) string {
	const max = 40
	out, err := cluster.ComponentLog(context.Background(), "kube-controller-manager")
	if err != nil {
		return fmt.Sprintf("(kube-controller-manager log: %v)", err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, ns) {
			lines = append(lines, l)
		}
	}
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return fmt.Sprintf("===== kube-controller-manager log, last %d lines about %s\n%s", len(lines), ns, strings.Join(lines, "\n"))
}
