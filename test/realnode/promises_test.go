package realnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// promiseTimeout bounds each wait for the end state that a step leaves: the operator's
// restore, the kubelet's and the status' catching up. Generous, so that a slow machine only
// makes the test slower; a broken promise never reaches the end state.
const promiseTimeout = 3 * time.Minute

// promiseStep is one thing that real clusters do to the operator's caches. run applies it to
// every cache of e and waits for what the step itself must bring about (a certificate served,
// a new leader); the invariants that hold after every step are checked by requirePromises.
type promiseStep struct {
	name string
	run  func(ctx context.Context, t *testing.T, e *promiseEnv)
}

// promiseEnv is what the steps share: the OLM install, the caches, how to reach them, and
// what every cache must still be after each step.
type promiseEnv struct {
	olm     olmInstall
	caches  []upgradeCache
	ca      *testCA
	clients cacheClients
	// pods are each cache's pods by name, as they were before the first step: no step
	// replaces or restarts one.
	pods map[string]map[string]podState
	// children are each cache's Deployment and Service as the API server had them before
	// the first step, by kind: every hand edit must be put back to them.
	children map[string]map[string]map[string]any
	// tlsSerial is the serial of the certificate each TLS cache's Secret holds.
	tlsSerial map[string]int64
}

// TestPromisesAcrossFeatures checks that the operator's promises hold together, for the caches
// that production teams run and under what real clusters do to them. It installs the operator
// 0.0.1 through OLM (installThroughOLM: the guide's flow, CSV Pending until its requirements
// exist), creates side by side the guide's two plain caches, one with TLS and one with TLS,
// client certificates, auth and monitoring, writes a key to every pod, and then applies each
// step of the table to all of them: a hand edit of the Deployment and the Service, an in-place
// edit of the auth Secret, a rotation of the TLS Secrets, a change of the operator's leader,
// and the OLM upgrade to 0.0.2. After
// each step, requirePromises checks on every cache that the status says what the pods do,
// that no pod was replaced or restarted (no step needs one), that the keys written before
// read back through TLS and the login where the cache has them, and that the Deployment and
// the Service equal their originals, so every hand edit was put back.
//
// The upgrade step keeps every check of the OLM upgrade test that it replaces
// (TestOLMInstallsAndUpgradesOperator): the operator Deployment updated in place, the 0.0.2
// leader has reconciled every cache, and the caches' Deployments keep their generation and
// template. OLM is cluster-wide, so the suite installs it once (startOLM); this test's
// OwnNamespace install and TestOLMAllNamespacesUpgrade's take turns (holdOperatorGroup).
func TestPromisesAcrossFeatures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The secured cache's spec.networkPolicy is enforced: the operator's
	// poll of its sidecars, and the sidecars themselves, must get through it.
	enforceNetworkPolicies(t)
	e := &promiseEnv{olm: installThroughOLM(ctx, t), caches: upgradeCaches, ca: newTestCA(t)}
	k := e.olm.k

	t.Log("creating the guide's two plain Memcacheds, one with TLS and one with TLS, client certificates, auth and monitoring; writing a key to every pod")
	e.tlsSerial = map[string]int64{upgradeTLSSecret: 100, upgradeSecuredSecret: 101}
	for secret, serial := range e.tlsSerial {
		e.applyTLSSecret(t, secret, serial)
	}
	applySecret(t, k, upgradeUsersSecret, "Opaque", map[string][]byte{"passwords": []byte(upgradeUser + ":" + upgradePassword + "\n")})
	_, _, clientCert := e.ca.issue(t, 200)
	e.clients = cacheClients{ca: e.ca, cert: &clientCert, user: upgradeUser, password: upgradePassword}
	for _, c := range e.caches {
		mustApply(ctx, t, k, memcached(c.name, c.size, c.spec))
	}
	e.pods = map[string]map[string]podState{}
	e.children = map[string]map[string]map[string]any{}
	for _, c := range e.caches {
		e.pods[c.name] = waitForMemcached(ctx, t, k, c.name, c.size)
		for pod, s := range e.pods[c.name] {
			if err := e.clients.set(ctx, c, s.addr(), pod); err != nil {
				t.Fatalf("%s: pod %s: %v", c.name, pod, err)
			}
		}
		e.children[c.name] = map[string]map[string]any{}
		kinds := []string{"deployment", "service"}
		if c.networkPolicy {
			kinds = append(kinds, "networkpolicy")
		}
		for _, kind := range kinds {
			obj, err := childJSON(ctx, k, kind, c.name)
			if err != nil {
				t.Fatal(err)
			}
			e.children[c.name][kind] = obj
		}
		t.Logf("%s: pods %v hold %s", c.name, podNames(e.pods[c.name]), upgradeKey)
	}
	e.requirePromises(ctx, t, "creation")

	steps := []promiseStep{
		{"hand edit of the Deployment and the Service", handEdit},
		{"in-place edit of the auth Secret", rotatePasswords},
		{"rotation of the TLS Secrets", rotateCertificates},
		{"leader change", changeLeader},
		{"OLM upgrade 0.0.1 -> 0.0.2", upgradeOperator},
	}
	for i, s := range steps {
		t.Logf("step %d: %s", i+1, s.name)
		start := time.Now()
		s.run(ctx, t, e)
		e.requirePromises(ctx, t, s.name)
		if t.Failed() {
			t.FailNow() // the next steps start from what this one must have left
		}
		t.Logf("step %d: %s: every promise holds on every cache (%v)", i+1, s.name, time.Since(start).Round(time.Second))
	}
}

// handEdit removes the app and memcached_cr labels of every cache's Deployment and Service and
// raises its strategy's maxUnavailable: edits of what the operator set that roll no pod.
// requirePromises waits until the API server's objects equal their originals again.
func handEdit(ctx context.Context, t *testing.T, e *promiseEnv) {
	for _, c := range e.caches {
		mustRun(ctx, t, e.olm.k, "label", "deployment", c.name, "app-", "memcached_cr-")
		mustRun(ctx, t, e.olm.k, "label", "service", c.name, "app-", "memcached_cr-")
		mustRun(ctx, t, e.olm.k, "patch", "deployment", c.name, "--type=json", "-p",
			`[{"op":"replace","path":"/spec/strategy/rollingUpdate/maxUnavailable","value":3}]`)
		if c.networkPolicy {
			// No rule left: every connection to the pods refused until it is put back.
			mustRun(ctx, t, e.olm.k, "patch", "networkpolicy", c.name, "--type=json", "-p", `[{"op":"remove","path":"/spec/ingress"}]`)
		}
	}
}

// rotatePasswords edits the auth Secret in place: a new user, and the one the test logged in
// with gone. Within secretBudget, derived from the kubelet's sync period, every pod of the
// caches with auth logs the new user in and refuses the old one; from then on the test logs
// in as the new user, and the rotation after this step must still reach memcached through
// the sidecar's login.
func rotatePasswords(ctx context.Context, t *testing.T, e *promiseEnv) {
	const newUser, newPassword = "promises-rotated", "rotated-password-2"
	applySecret(t, e.olm.k, upgradeUsersSecret, "Opaque", map[string][]byte{"passwords": []byte(newUser + ":" + newPassword + "\n")})
	waitFor(ctx, t, secretBudget(t), "every pod of the caches with auth to log the new user in and refuse the old one", func(ctx context.Context) error {
		for _, c := range e.caches {
			if !c.auth {
				continue
			}
			var cert *tls.Certificate
			if c.clientCert {
				cert = e.clients.cert
			}
			for pod, s := range e.pods[c.name] {
				conn, _, err := session(ctx, s.addr(), e.ca, cert, newUser, newPassword)
				if err != nil {
					return fmt.Errorf("%s: pod %s: the new login: %v", c.name, pod, err)
				}
				conn.Close()
				conn, _, err = session(ctx, s.addr(), e.ca, cert, e.clients.user, e.clients.password)
				if err == nil {
					conn.Close()
					return fmt.Errorf("%s: pod %s: the old login still works", c.name, pod)
				}
				if !strings.Contains(err.Error(), "CLIENT_ERROR") {
					return fmt.Errorf("%s: pod %s: the old login: %v", c.name, pod, err)
				}
			}
		}
		return nil
	})
	e.clients.user, e.clients.password = newUser, newPassword
}

// rotateCertificates gives each TLS cache's Secret a certificate from a new key and waits
// until every pod of those caches serves it to new connections. The deadline is
// rotationBudget, derived from the test node's kubelet sync period, which bounds when the
// kubelet rewrites a Secret volume.
func rotateCertificates(ctx context.Context, t *testing.T, e *promiseEnv) {
	for secret := range e.tlsSerial {
		e.tlsSerial[secret] += 10
		e.applyTLSSecret(t, secret, e.tlsSerial[secret])
	}
	start := time.Now()
	seen := map[string]time.Duration{}
	waitFor(ctx, t, rotationBudget, "every pod of the TLS caches to serve its Secret's new certificate", func(ctx context.Context) error {
		var missing []string
		for _, c := range e.caches {
			if !c.tls {
				continue
			}
			want := e.tlsSerial[c.tlsSecret]
			cert := e.clients.cert
			if !c.clientCert {
				cert = nil
			}
			for pod, s := range e.pods[c.name] {
				if _, ok := seen[pod]; ok {
					continue
				}
				conn, peer, err := dialTLS(ctx, s.addr(), e.ca, cert)
				if err != nil {
					return fmt.Errorf("%s: pod %s: %v", c.name, pod, err)
				}
				conn.Close()
				if got := peer.SerialNumber.Int64(); got != want {
					missing = append(missing, fmt.Sprintf("%s serves serial %d, want %d", pod, got, want))
					continue
				}
				seen[pod] = time.Since(start).Round(time.Second)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s", strings.Join(missing, "; "))
		}
		return nil
	})
	t.Logf("new connections get the new certificate this long after the Secrets' change: %v", seen)
}

// changeLeader deletes the operator pod that holds the Lease and waits until another live pod
// holds it, that leader has reconciled every cache with nothing queued, and OLM's Deployment
// again runs a Ready standby. The new leader is usually the standby, but may be the pod that
// replaced the deleted one (see TestLeaderFailover).
func changeLeader(ctx context.Context, t *testing.T, e *promiseEnv) {
	k := e.olm.k
	leader, standby := leaderAndStandby(t, k)
	before, err := getLease(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(ctx, t, k, "delete", "pod", leader.Metadata.Name)
	var successor string
	waitFor(ctx, t, promiseTimeout, "another operator pod to hold the Lease", func(ctx context.Context) error {
		holder, err := leaseHolder(ctx, k)
		if err != nil {
			return err
		}
		if holder == "" || holder == leader.Metadata.Name {
			return fmt.Errorf("lease held by %q; the deleted leader was %s", holder, leader.Metadata.Name)
		}
		successor = holder
		return requireLiveOperatorPod(ctx, k, holder)
	})
	waitForReconciledBy(ctx, t, k, e.olm.images.operator["0.0.1"], len(e.caches))
	after, err := getLease(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	role := "the standby"
	if successor != standby.Metadata.Name {
		role = "the pod that replaced it"
	}
	t.Logf("deleted the leader %s; %s, %s, holds the Lease (transitions %d -> %d)",
		leader.Metadata.Name, role, successor, before.Spec.LeaseTransitions, after.Spec.LeaseTransitions)
	leaderAndStandby(t, k)
}

// upgradeOperator upgrades the operator through OLM to 0.0.2, waits until the 0.0.2 leader has
// reconciled every cache, holds a while on the pods, so that pods that a written template
// began to replace would be caught, and checks that no cache's Deployment spec was written:
// a new template, even one that the paced rolls held back, would have moved its generation.
func upgradeOperator(ctx context.Context, t *testing.T, e *promiseEnv) {
	k := e.olm.k
	templates := map[string]deploymentTemplate{}
	for _, c := range e.caches {
		templates[c.name] = getDeploymentTemplate(ctx, t, k, c.name)
	}
	e.olm.upgrade(ctx, t, len(e.caches))
	err := framework.Consistently(ctx, 15*time.Second, "memcached pods unchanged after the upgrade", func(ctx context.Context) error {
		for _, c := range e.caches {
			now, err := listPods(ctx, k, c.name)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(now, e.pods[c.name]) {
				return fmt.Errorf("%s pods changed: before %v, now %v", c.name, e.pods[c.name], now)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range e.caches {
		if now := getDeploymentTemplate(ctx, t, k, c.name); !reflect.DeepEqual(now, templates[c.name]) {
			t.Errorf("%s: Deployment was %+v before the upgrade, %+v after; want it unchanged", c.name, templates[c.name], now)
		}
	}
}

// requirePromises checks, after step, the four invariants on every cache: the status says what
// the pods do, and the Deployment and the Service equal their originals (it waits for both, as
// a step's restore takes a while); then that the pods are the same pods, none of whose
// containers restarted; that the key written to each pod before the first step reads back;
// and that the sidecars of the caches with monitoring reach their memcached.
func (e *promiseEnv) requirePromises(ctx context.Context, t *testing.T, step string) {
	t.Helper()
	k := e.olm.k
	for _, c := range e.caches {
		err := framework.Eventually(ctx, promiseTimeout, c.name+"'s status to tell its pods and its children to equal their originals", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, k, c.name)
			if err != nil {
				return err
			}
			if err := statusTellsPods(o, c.size); err != nil {
				return err
			}
			for kind, want := range e.children[c.name] {
				got, err := childJSON(ctx, k, kind, c.name)
				if err != nil {
					return err
				}
				if err := sameChild(got, want); err != nil {
					return fmt.Errorf("%s %s: %v", kind, c.name, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("after the %s: %v", step, err)
			continue
		}
		now, err := listPods(ctx, k, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(now, e.pods[c.name]) {
			t.Errorf("after the %s: %s's pods were %v, now %v; want the same pods, no container restarted", step, c.name, e.pods[c.name], now)
			continue
		}
		for pod, s := range e.pods[c.name] {
			if err := e.clients.get(ctx, c, s.addr(), pod); err != nil {
				t.Errorf("after the %s: %s: pod %s: %v", step, c.name, pod, err)
			}
		}
	}
	requireSidecarsUp(ctx, t, e.caches, e.pods)
}

// statusTellsPods returns nil when o has converged on size (framework.Converged: status.nodes
// are the live pods' names, all Running and Ready, observedGeneration current, Degraded=False)
// and its conditions say so for the current generation: Available=True, Degraded=False and
// Progressing=False Complete.
func statusTellsPods(o framework.Observed, size int) error {
	if err := framework.Converged(o, size); err != nil {
		return err
	}
	m := &o.Memcached
	for _, want := range []struct{ typ, status, reason string }{
		{"Available", "True", ""},
		{"Degraded", "False", ""},
		{"Progressing", "False", "Complete"},
	} {
		c := m.Condition(want.typ)
		if c == nil || c.Status != want.status || (want.reason != "" && c.Reason != want.reason) || c.ObservedGeneration != m.Metadata.Generation {
			return fmt.Errorf("condition %s = %+v, want %s %s for generation %d", want.typ, c, want.status, want.reason, m.Metadata.Generation)
		}
	}
	return nil
}

// applyTLSSecret writes Secret name with a new certificate of serial for tlsServerName from
// e's CA, its key and the CA.
func (e *promiseEnv) applyTLSSecret(t *testing.T, name string, serial int64) {
	t.Helper()
	certPEM, keyPEM, _ := e.ca.issue(t, serial)
	applySecret(t, e.olm.k, name, "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": e.ca.pem})
}

// childJSON returns the kind object name of k's namespace as the API server has it.
func childJSON(ctx context.Context, k framework.Kubectl, kind, name string) (map[string]any, error) {
	var obj map[string]any
	err := k.GetJSON(ctx, &obj, kind, name)
	return obj, err
}

// sameChild says how got differs from want in what the operator sets on a child: its UID
// (the same object, not a new one), its labels, and a Deployment's strategy, selector and pod
// template or a Service's selector and ports.
func sameChild(got, want map[string]any) error {
	meta := func(o map[string]any, f string) any { m, _ := o["metadata"].(map[string]any); return m[f] }
	for _, f := range []string{"uid", "labels"} {
		if !reflect.DeepEqual(meta(got, f), meta(want, f)) {
			return fmt.Errorf("metadata.%s %v, want %v", f, meta(got, f), meta(want, f))
		}
	}
	gs, _ := got["spec"].(map[string]any)
	ws, _ := want["spec"].(map[string]any)
	for _, f := range []string{"strategy", "template", "selector", "ports", "podSelector", "ingress", "policyTypes"} {
		if !reflect.DeepEqual(gs[f], ws[f]) {
			return fmt.Errorf("spec.%s %v, want %v", f, gs[f], ws[f])
		}
	}
	return nil
}
