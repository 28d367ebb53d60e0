package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// sidecarAuthShare is how long after the kubelet rewrote the -Y file the
// sidecar may take to make memcached load it: its 1 s check, memcached's
// load on its next 1 s clock tick, and the confirming login; and a margin
// for a busy machine.
const sidecarAuthShare = 15 * time.Second

// kubeletSyncFrequency returns the syncFrequency of the real node's kubelet,
// as the kubelet itself reports its configuration (/configz).
func kubeletSyncFrequency(ctx context.Context) (time.Duration, error) {
	out, err := admin.Run(ctx, "get", "--raw", "/api/v1/nodes/"+framework.RealNodeName+"/proxy/configz")
	if err != nil {
		return 0, err
	}
	var configz struct {
		KubeletConfig struct {
			SyncFrequency string `json:"syncFrequency"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(out), &configz); err != nil {
		return 0, fmt.Errorf("the kubelet's /configz: %v", err)
	}
	return time.ParseDuration(configz.KubeletConfig.SyncFrequency)
}

// secretBudget is how long a Secret's change may take to reach what
// memcached serves: the kubelet rewrites a Secret volume at its next sync of
// the pod, within syncFrequency plus half of it in jitter, and then the
// sidecar acts within sidecarAuthShare.
func secretBudget(t *testing.T) time.Duration {
	t.Helper()
	sync, err := kubeletSyncFrequency(context.Background())
	if err != nil {
		t.Fatalf("read the kubelet's syncFrequency: %v", err)
	}
	return sync*3/2 + sidecarAuthShare
}

// dialPlain connects to memcached at addr without TLS.
func dialPlain(ctx context.Context, addr string) (*mcConn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &mcConn{Conn: c, r: bufio.NewReader(c)}, nil
}

// authCache is a Memcached of TestPasswordRotation and how to reach its pods.
type authCache struct {
	name string
	// dial opens a connection to one of its pods, without a login.
	dial func(ctx context.Context, addr string) (*mcConn, error)
	// addrs are its pods' memcached addresses, by pod.
	addrs map[string]string
	// before are its containers' restart counts, by pod/container, and
	// uids its pods' UIDs, before the rotation.
	before map[string]int
	uids   map[string]string
}

// loginAs returns memcached's reply to a login as user on a new
// connection to addr, and the connection when it logged in.
func (c *authCache) loginAs(ctx context.Context, addr, user, password string) (string, *mcConn, error) {
	conn, err := c.dial(ctx, addr)
	if err != nil {
		return "", nil, err
	}
	reply, err := conn.login(user, password)
	if err != nil || reply != "STORED" {
		conn.Close()
		return reply, nil, err
	}
	return reply, conn, nil
}

// TestPasswordRotation edits the auth Secret of two Memcacheds in place on
// the real node, one with auth alone, whose pods run the sidecar for it, and
// one with TLS, auth and monitoring: the edit adds a user and removes the
// one memcached and the sidecar logged in with. Within the kubelet's
// syncFrequency (read from the kubelet) and half of it, plus the sidecar's
// share, every pod logs the new user in and refuses the old one, with no
// container restarted and no pod replaced, the keys written before still
// there, and the sidecar logged in again (memcached_up 1). A certificate
// rotation afterwards still reaches memcached: the sidecar's refresh_certs
// logs in with the new password.
func TestPasswordRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const plainName, tlsName = "pw-plain", "pw-tls"
	const authSecret, tlsSecret = "pw-users", "pw-tls-cert"
	const oldUser, oldPassword, newUser, newPassword = "app", "old-password", "app2", "new-password"
	budget := secretBudget(t)
	ca := newTestCA(t)
	certPEM, keyPEM, _ := ca.issue(t, 100)
	applySecret(t, admin, authSecret, "Opaque", map[string][]byte{"passwords": []byte(oldUser + ":" + oldPassword + "\n")})
	applySecret(t, admin, tlsSecret, "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.pem})
	applyMemcachedSpec(t, admin, plainName, "size: 1\nauth: {secretName: "+authSecret+"}")
	applyMemcachedSpec(t, admin, tlsName, `size: 2
tls: {secretName: `+tlsSecret+`}
auth: {secretName: `+authSecret+`}
monitoring: {enabled: true}`)
	caches := []*authCache{
		{name: plainName, dial: dialPlain},
		{name: tlsName, dial: func(ctx context.Context, addr string) (*mcConn, error) {
			c, _, err := dialTLS(ctx, addr, ca, nil)
			return c, err
		}},
	}
	sizes := map[string]int{plainName: 1, tlsName: 2}
	var tlsPods []framework.Pod
	for _, c := range caches {
		o := waitServing(t, c.name, sizes[c.name])
		c.before, c.addrs, c.uids = restartCounts(o), map[string]string{}, map[string]string{}
		for _, p := range o.Pods {
			addr, err := podAddr(o, p.Metadata.Name)
			if err != nil {
				t.Fatal(err)
			}
			c.addrs[p.Metadata.Name], c.uids[p.Metadata.Name] = addr, p.Metadata.UID
			if len(p.Status.ContainerStatuses) != 2 {
				t.Errorf("pod %s has %d containers, want memcached and the sidecar", p.Metadata.Name, len(p.Status.ContainerStatuses))
			}
		}
		if c.name == tlsName {
			tlsPods = o.Pods
		}
		for pod, addr := range c.addrs {
			reply, conn, err := c.loginAs(ctx, addr, oldUser, oldPassword)
			if err != nil || conn == nil {
				t.Fatalf("pod %s: login as %s: %q, %v", pod, oldUser, reply, err)
			}
			if reply, err := conn.do("set before-password-rotation 0 0 5\r\nkept!\r\n"); err != nil || reply != "STORED" {
				t.Fatalf("pod %s: set: %q, %v", pod, reply, err)
			}
			conn.Close()
		}
	}

	applySecret(t, admin, authSecret, "Opaque", map[string][]byte{"passwords": []byte(newUser + ":" + newPassword + "\n")})
	start := time.Now()
	seen := map[string]time.Duration{}
	err := framework.Eventually(ctx, budget, "every pod to take the new password and refuse the old one", func(ctx context.Context) error {
		var waiting []string
		for _, c := range caches {
			for pod, addr := range c.addrs {
				if _, ok := seen[pod]; ok {
					continue
				}
				reply, conn, err := c.loginAs(ctx, addr, newUser, newPassword)
				if err != nil {
					return fmt.Errorf("pod %s: %v", pod, err)
				}
				if conn == nil {
					waiting = append(waiting, fmt.Sprintf("%s (new user: %s)", pod, reply))
					continue
				}
				conn.Close()
				reply, conn, err = c.loginAs(ctx, addr, oldUser, oldPassword)
				if err != nil {
					return fmt.Errorf("pod %s: %v", pod, err)
				}
				if conn != nil {
					conn.Close()
					return fmt.Errorf("pod %s logs in both the new user and the old one, which the file no longer has", pod)
				}
				if !strings.HasPrefix(reply, "CLIENT_ERROR") {
					return fmt.Errorf("pod %s: the old user's login got %q, want CLIENT_ERROR", pod, reply)
				}
				seen[pod] = time.Since(start).Round(time.Second)
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("still on the old passwords: %v", waiting)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the new password logs in and the old one is refused this long after the Secret's edit (budget %v): %v", budget, seen)

	for _, c := range caches {
		after, err := framework.Observe(ctx, admin, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := restartCounts(after); fmt.Sprint(got) != fmt.Sprint(c.before) {
			t.Errorf("%s: restart counts went from %v to %v, want them unchanged and the same pods", c.name, c.before, got)
		}
		for _, p := range after.Pods {
			if c.uids[p.Metadata.Name] != p.Metadata.UID {
				t.Errorf("%s: pod %s (%s) is not one of the pods before the edit %v", c.name, p.Metadata.Name, p.Metadata.UID, c.uids)
			}
			// memcached takes the new file at the SIGHUP, before the sidecar
			// confirms the load with a login and logs it: the client above
			// can see the new password work first, so wait for the line.
			var out string
			err := framework.Eventually(ctx, time.Minute, "pod "+p.Metadata.Name+"'s sidecar to log the load of the new file", func(ctx context.Context) error {
				var err error
				if out, err = admin.Run(ctx, "logs", p.Metadata.Name, "-c", "sidecar"); err != nil {
					return err
				}
				if !strings.Contains(out, "memcached loaded its -Y file on SIGHUP") || !strings.Contains(out, "sidecarUser="+newUser) {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			if err != nil {
				t.Errorf("%v: the sidecar's log:\n%s", err, out)
			}
		}
		for pod, addr := range c.addrs {
			reply, conn, err := c.loginAs(ctx, addr, newUser, newPassword)
			if err != nil || conn == nil {
				t.Fatalf("pod %s: login as %s: %q, %v", pod, newUser, reply, err)
			}
			if v, err := conn.get("before-password-rotation"); err != nil || v != "kept!" {
				t.Errorf("pod %s: the key written before the edit: %q, %v; want kept!", pod, v, err)
			}
			conn.Close()
		}
	}
	for _, p := range tlsPods {
		err := framework.Eventually(ctx, sidecarAuthShare, "the sidecar of "+p.Metadata.Name+" to read memcached's stats as the new user", func(ctx context.Context) error {
			page, err := scrapeSidecar(ctx, p)
			if err != nil {
				return err
			}
			if v := value(page, "memcached_up"); v != 1 {
				return fmt.Errorf("memcached_up = %v", v)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}

	// A certificate rotation after the password's still reaches memcached.
	newCert, newKey, _ := ca.issue(t, 101)
	applySecret(t, admin, tlsSecret, "kubernetes.io/tls", map[string][]byte{"tls.crt": newCert, "tls.key": newKey, "ca.crt": ca.pem})
	tls := caches[1]
	err = framework.Eventually(ctx, budget, "every pod of "+tlsName+" to serve the new certificate", func(ctx context.Context) error {
		for pod, addr := range tls.addrs {
			c, peer, err := dialTLS(ctx, addr, ca, nil)
			if err != nil {
				return err
			}
			c.Close()
			if peer.SerialNumber.Int64() != 101 {
				return fmt.Errorf("pod %s serves serial %s", pod, peer.SerialNumber)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tlsPods {
		page, err := scrapeSidecar(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if v := value(page, `memcached_sidecar_certificate_refreshes_total{result="success"}`); v != 1 {
			t.Errorf("pod %s: refreshes success = %v, want 1", p.Metadata.Name, v)
		}
		if v := value(page, `memcached_sidecar_auth_reloads_total{result="failure"}`); v != 0 {
			t.Errorf("pod %s: failed -Y loads = %v, want 0", p.Metadata.Name, v)
		}
	}
	t.Logf("the certificate rotation after the password's reached every pod of %s", tlsName)
}
