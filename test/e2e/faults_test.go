package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// outage is how long TestControlPlaneOutage pauses each component.
	outage = 30 * time.Second
	// recoveryTimeout is how soon after an outage or a recreated CRD the
	// operator must have converged again.
	recoveryTimeout = 30 * time.Second
	// maxIdleRate bounds the operator's requests per second while the API
	// server, etcd or the Memcached API is gone. An operator that spins on
	// errors sends them as fast as its rate limits allow, 50/s for the
	// reconcile alone; one that waits sends a few: client-go's reflectors
	// retry a failed list once a second each.
	maxIdleRate = 5.0
	// crdGoneWindow is how long TestCRDDeletedAndRecreated watches the
	// operator while its CRD is gone.
	crdGoneWindow = 15 * time.Second
)

// controlPlane are the cluster's processes (kwokctl's binary runtime), all of
// which must survive an outage of any one of them.
var controlPlane = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// TestControlPlaneOutage: the API server, then etcd, stop answering for 30 s
// (SIGSTOP, then SIGCONT, as a hung process or a stalled disk would) just
// after a Memcached changed. The operator neither exits nor spins: the
// requests it sends through a counting proxy during the outage are few. It
// converges within 30 s of recovery, on the change made before the outage
// and on one made during it (etcd) or right after it (API server). The
// controller manager and the scheduler, which run without leader election,
// are still running afterwards, and cluster.sh status says the cluster
// serves.
//
// It runs serially: the paused API server and etcd are every test's.
func TestControlPlaneOutage(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	proxy := ns.viaProxy()
	op := ns.startOperator()
	ns.createMemcached("cache", 1)
	ns.createMemcached("other", 1)
	ns.waitConverged("cache", 1)
	ns.waitConverged("other", 1)

	for i, c := range []struct {
		component string
		// writeDuring says whether a write made during the outage can
		// succeed: the API server holds it until etcd answers again,
		// while a client of a paused API server times out its TLS
		// handshake after 10 s.
		writeDuring bool
	}{
		{component: "kube-apiserver"},
		{component: "etcd", writeDuring: true},
	} {
		ok := t.Run(c.component+" paused", func(t *testing.T) {
			ns := ns.withT(t)
			size := 2 + i
			// Just before the outage: the operator may or may not act
			// on it before the component stops.
			ns.setSize("cache", size)
			cpuBefore, err := framework.ProcessCPU(op.Pid())
			if err != nil {
				t.Fatal(err)
			}
			resume, err := cluster.Pause(c.component, outage+time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := resume(); err != nil {
					t.Error(err)
				}
			}()
			paused := time.Now()

			during := make(chan error, 1)
			if c.writeDuring {
				go func() {
					wctx, cancel := context.WithTimeout(ctx, outage+recoveryTimeout)
					defer cancel()
					_, err := ns.kubectl.Run(wctx, "patch", "memcached", "other", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, size))
					during <- err
				}()
			}
			err = framework.Consistently(ctx, outage, "the operator running through the outage", func(context.Context) error {
				if !op.Running() {
					return fmt.Errorf("the operator exited: %v", op.Stop(0))
				}
				return nil
			})
			resumed := time.Now()
			if rerr := resume(); rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			cpuAfter, cerr := framework.ProcessCPU(op.Pid())
			if cerr != nil {
				t.Fatal(cerr)
			}
			reqs := proxy.Requests(paused, resumed)
			rate := float64(len(reqs)) / resumed.Sub(paused).Seconds()
			t.Logf("%s paused for %s: the operator sent %d requests (%.2f/s) and used %s of CPU%s", c.component, resumed.Sub(paused).Round(100*time.Millisecond), len(reqs), rate, (cpuAfter - cpuBefore).Round(10*time.Millisecond), requestSummary(reqs))
			if rate > maxIdleRate {
				t.Errorf("%.2f requests/s during the outage, want at most %.0f:\n%s", rate, maxIdleRate, requestList(reqs))
			}

			if c.writeDuring {
				if err := <-during; err != nil {
					t.Fatalf("the write made during the outage: %v", err)
				}
			} else {
				ns.setSize("other", size)
			}
			err = framework.Eventually(ctx, recoveryTimeout-time.Since(resumed), fmt.Sprintf("both Memcacheds to converge within %s of the recovery", recoveryTimeout), func(ctx context.Context) error {
				for _, name := range []string{"cache", "other"} {
					o, err := framework.Observe(ctx, ns.kubectl, name)
					if err != nil {
						return err
					}
					if err := framework.Converged(o, size); err != nil {
						return fmt.Errorf("%s: %v", name, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("converged %s after %s resumed", time.Since(resumed).Round(100*time.Millisecond), c.component)

			for _, component := range controlPlane {
				if err := cluster.ComponentAlive(component); err != nil {
					t.Errorf("after the outage: %v", err)
				}
			}
			if err := cluster.Serving(ctx); err != nil {
				t.Errorf("after the outage, the cluster does not serve: %v", err)
			}
		})
		if !ok {
			return
		}
	}
}

// TestCRDDeletedAndRecreated: the Memcached CRD is deleted under a running
// operator, which deletes every Memcached, then created again. The operator
// says in its log that the Memcached API is gone, keeps running without
// spinning, says when the API is back, and serves new Memcacheds at once.
//
// It runs serially: every test's Memcacheds go with the CRD.
func TestCRDDeletedAndRecreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	proxy := ns.viaProxy()
	op := ns.startOperator()
	ns.createMemcached("before", 1)
	ns.waitConverged("before", 1)

	admin := cluster.Kubectl()
	restore := func() error {
		if _, err := admin.Run(ctx, "apply", "-f", paths.Deploy("crd.yaml")); err != nil {
			return err
		}
		_, err := admin.Run(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crdName)
		return err
	}
	// Every later test needs the CRD.
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Errorf("cleanup: restore the CRD: %v", err)
		}
	})

	deleting := time.Now()
	if _, err := admin.Run(ctx, "delete", "crd", crdName, "--wait=true", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	t.Logf("CRD and its Memcacheds deleted in %s", gone.Sub(deleting).Round(100*time.Millisecond))

	const goneMessage = "the Memcached API cache.example.com/v1alpha1 is not served"
	ok := t.Run("the operator says the API is gone and does not spin", func(t *testing.T) {
		err := framework.Consistently(ctx, crdGoneWindow, "the operator running without its CRD", func(context.Context) error {
			if !op.Running() {
				return fmt.Errorf("the operator exited: %v", op.Stop(0))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reqs := proxy.Requests(gone, time.Now())
		rate := float64(len(reqs)) / time.Since(gone).Seconds()
		t.Logf("without its CRD for %s, the operator sent %d requests (%.2f/s)%s", time.Since(gone).Round(100*time.Millisecond), len(reqs), rate, requestSummary(reqs))
		if rate > maxIdleRate {
			t.Errorf("%.2f requests/s, want at most %.0f:\n%s", rate, maxIdleRate, requestList(reqs))
		}
		if n := strings.Count(op.Log(), goneMessage); n != 1 {
			t.Errorf("the operator's log says %q %d times, want once", goneMessage, n)
		}
	})
	if !ok {
		return
	}

	if err := restore(); err != nil {
		t.Fatal(err)
	}
	recreated := time.Now()
	t.Run("the recreated API is served", func(t *testing.T) {
		ns := ns.withT(t)
		ns.createMemcached("after", 2)
		err := framework.Eventually(ctx, recoveryTimeout, "memcached after to converge", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "after")
			if err != nil {
				return err
			}
			return framework.Converged(o, 2)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a new Memcached converged %s after the CRD was recreated", time.Since(recreated).Round(100*time.Millisecond))
		const backMessage = "the Memcached API cache.example.com/v1alpha1 is served again"
		if !strings.Contains(op.Log(), backMessage) {
			t.Errorf("the operator's log does not say %q", backMessage)
		}
	})
	t.Run("the children of the deleted Memcached are collected", func(t *testing.T) {
		ns.withT(t).eventually("deployment before to be collected", func(ctx context.Context) error {
			out, err := ns.kubectl.Run(ctx, "get", "deployment", "before", "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if out != "" {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
	})
}

// requestSummary counts requests by method and path, most frequent first,
// one a line after a colon; it is empty for no requests.
func requestSummary(reqs []framework.ProxiedRequest) string {
	counts := map[string]int{}
	for _, r := range reqs {
		path, _, _ := strings.Cut(r.URI, "?")
		if r.Watch() {
			path += " (watch)"
		}
		counts[r.Method+" "+path]++
	}
	keys := slices.Collect(maps.Keys(counts))
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d %s", counts[k], k)
	}
	if b.Len() == 0 {
		return ""
	}
	return ":" + b.String()
}

// requestList formats requests one a line, for failure messages.
func requestList(reqs []framework.ProxiedRequest) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}
