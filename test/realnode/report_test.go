package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// reportBudget is issue 26's bound: a failure in the pod that the kubelet
// cannot see shows on the Memcached within 2 minutes of the Secret's change.
const reportBudget = 2 * time.Minute

// TestRefreshFailureInStatus rotates the TLS Secret of a Memcached with TLS
// alone (no monitoring: its sidecar serves the report only) to a certificate
// that does not match its key. memcached keeps serving the old certificate,
// the pod stays Ready and nothing restarts, and within reportBudget the
// Memcached says Degraded=True CertificateRefreshFailed naming the pod and
// the key mismatch, with a Warning Event of that reason, while Available
// stays True. Rotated to a good pair, memcached serves it and Degraded
// clears within reportBudget.
func TestRefreshFailureInStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, secret = "refresh-fails", "refresh-fails-tls"
	ca := newTestCA(t)
	certPEM, keyPEM, _ := ca.issue(t, 100)
	applySecret(t, admin, secret, "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	applyMemcachedSpec(t, admin, name, "size: 1\ntls: {secretName: "+secret+"}")
	pod, addr, before := waitServingOnePod(t, name)

	badCert, _, _ := ca.issue(t, 101)
	_, otherKey, _ := ca.issue(t, 102)
	applySecret(t, admin, secret, "kubernetes.io/tls", map[string][]byte{"tls.crt": badCert, "tls.key": otherKey})
	requireSidecarReport(ctx, t, name, pod, "CertificateRefreshFailed", "private key does not match public key")
	c, peer, err := dialTLS(ctx, addr, ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if peer.SerialNumber.Int64() != 100 {
		t.Errorf("memcached serves serial %s while the mounted pair does not load, want the old 100", peer.SerialNumber)
	}

	goodCert, goodKey, _ := ca.issue(t, 103)
	applySecret(t, admin, secret, "kubernetes.io/tls", map[string][]byte{"tls.crt": goodCert, "tls.key": goodKey})
	start := time.Now()
	requireHealedWithoutRestart(ctx, t, admin, name, before, start, reportBudget, "memcached to serve the good pair (serial 103)", func(ctx context.Context) error {
		c, peer, err := dialTLS(ctx, addr, ca, nil)
		if err != nil {
			return err
		}
		c.Close()
		if peer.SerialNumber.Int64() != 103 {
			return fmt.Errorf("memcached serves serial %s", peer.SerialNumber)
		}
		return nil
	})
}

// waitServingOnePod waits until memcached name serves with one Ready pod
// and returns that pod's name, its address on the memcached port and the
// restart counts of its containers, which a test of a fix made in place
// compares after.
func waitServingOnePod(t *testing.T, name string) (pod, addr string, before map[string]int) {
	t.Helper()
	o := waitServing(t, name, 1)
	before = restartCounts(o)
	pod = o.Memcached.Status.Nodes[0]
	addr, err := podAddr(o, pod)
	if err != nil {
		t.Fatal(err)
	}
	return pod, addr, before
}

// requireHealedWithoutRestart waits within budget until served passes and the Memcached
// name says Degraded=False AsExpected again, then checks that no container of its pods
// restarted since before (restart counts by pod/container).
func requireHealedWithoutRestart(ctx context.Context, t *testing.T, admin framework.Kubectl, name string, before map[string]int, start time.Time, budget time.Duration, what string, served func(context.Context) error) {
	t.Helper()
	err := framework.Eventually(ctx, budget, what+" and Degraded to clear", func(ctx context.Context) error {
		if err := served(ctx); err != nil {
			return err
		}
		m, err := getMemcached(ctx, admin, name)
		if err != nil {
			return err
		}
		if d := m.Condition("Degraded"); d == nil || d.Status != "False" || d.Reason != "AsExpected" {
			return fmt.Errorf("condition Degraded = %+v", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v after the fix: %s, Degraded=False AsExpected", time.Since(start).Round(time.Second), what)
	after, err := framework.Observe(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := restartCounts(after); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("restart counts went from %v to %v, want them unchanged and the same pod", before, got)
	}
}

// TestMalformedPasswordsInStatus edits the auth Secret of a Memcached with
// auth alone to a -Y file with an empty line, which memcached would refuse
// whole: the sidecar sends no SIGHUP, memcached keeps the old password, and
// within reportBudget the Memcached says Degraded=True AuthReloadFailed
// naming the pod and the line, with a Warning Event. Fixed, the new
// password logs in and Degraded clears within reportBudget.
func TestMalformedPasswordsInStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, secret = "malformed-users", "malformed-users-auth"
	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte("app:old-password\n")})
	applyMemcachedSpec(t, admin, name, "size: 1\nauth: {secretName: "+secret+"}")
	pod, addr, before := waitServingOnePod(t, name)
	login := func(ctx context.Context, user, password string) (string, error) {
		c, err := dialPlain(ctx, addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.login(user, password)
	}

	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte("app:old-password\n\nnew:new-password\n")})
	requireSidecarReport(ctx, t, name, pod, "AuthReloadFailed", "line 2 is not user:password")
	if reply, err := login(ctx, "app", "old-password"); err != nil || reply != "STORED" {
		t.Errorf("the old password while the file is malformed: %q, %v; want STORED", reply, err)
	}

	applySecret(t, admin, secret, "Opaque", map[string][]byte{"passwords": []byte("new:new-password\n")})
	start := time.Now()
	requireHealedWithoutRestart(ctx, t, admin, name, before, start, reportBudget, "the new password to log in", func(ctx context.Context) error {
		if reply, err := login(ctx, "new", "new-password"); err != nil || reply != "STORED" {
			return fmt.Errorf("login as new: %q, %v", reply, err)
		}
		return nil
	})
}

// requireSidecarReport waits up to reportBudget, from the Secret's change just
// applied, for Memcached name to be Degraded=True reason with a message that
// names pod and says want, as the sidecar's report gives it, and then for the
// Warning Event of that message.
func requireSidecarReport(ctx context.Context, t *testing.T, name, pod, reason, want string) {
	t.Helper()
	start := time.Now()
	var degraded *framework.Condition
	err := framework.Eventually(ctx, reportBudget, "Degraded=True "+reason+" naming pod "+pod, func(ctx context.Context) error {
		var err error
		degraded, err = sidecarDegraded(ctx, name, reason, "pod "+pod+":", want)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v after the Secret's change: Degraded=True %s: %s", time.Since(start).Round(time.Second), degraded.Reason, degraded.Message)
	if err := waitWarningEvent(ctx, admin, name, reason, degraded.Message, reportBudget-time.Since(start)); err != nil {
		t.Error(err)
	}
}

// waitWarningEvent waits up to budget for a Warning Event reason about
// Memcached name with message. The operator's recorder sends Events from a
// goroutine of its own, so an Event can land after the status that says the
// same, and a read made the moment the status shows can come before it.
func waitWarningEvent(ctx context.Context, admin framework.Kubectl, name, reason, message string, budget time.Duration) error {
	return framework.Eventually(ctx, budget, "a Warning Event "+reason+" about memcached "+name+" with Degraded's message", func(ctx context.Context) error {
		var events struct {
			Items []struct{ Message string } `json:"items"`
		}
		if err := admin.GetJSON(ctx, &events, "events", "--field-selector", "type=Warning,reason="+reason+",involvedObject.kind=Memcached,involvedObject.name="+name); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Message == message {
				return nil
			}
		}
		return fmt.Errorf("Warning Events %s: %+v, want one with %q", reason, events.Items, message)
	})
}

// sidecarDegraded returns Memcached name's Degraded condition once it is True
// with reason and a message that holds each of wants, while Available stays
// True: what a sidecar reports never takes a serving memcached out of the
// count. Otherwise it returns the error that says what differs.
func sidecarDegraded(ctx context.Context, name, reason string, wants ...string) (*framework.Condition, error) {
	m, err := getMemcached(ctx, admin, name)
	if err != nil {
		return nil, err
	}
	c := m.Condition("Degraded")
	if c == nil || c.Status != "True" || c.Reason != reason {
		return nil, fmt.Errorf("condition Degraded = %+v, want True %s", c, reason)
	}
	for _, want := range wants {
		if !strings.Contains(c.Message, want) {
			return nil, fmt.Errorf("Degraded's message %q does not say %q", c.Message, want)
		}
	}
	if a := m.Condition("Available"); a == nil || a.Status != "True" {
		return nil, fmt.Errorf("condition Available = %+v, want True: memcached serves", a)
	}
	return c, nil
}
