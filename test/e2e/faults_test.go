package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	// outage is how long TestControlPlaneOutage pauses each component.
	outage = 30 * time.Second
	// recoveryTimeout is how soon after an outage or a recreated CRD the
	// operator must have converged again.
	recoveryTimeout = 30 * time.Second
	// leaseDuration is deploy/operator.yaml's --leader-elect-lease-duration
	// (the default): after an outage longer than the renew deadline, no
	// replica leads until it has seen the Lease unchanged for that long.
	leaseDuration = 12 * time.Second
	// outageRecoveryTimeout is how soon after an outage the replicas of
	// TestControlPlaneOutage must have converged again.
	outageRecoveryTimeout = leaseDuration + recoveryTimeout
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

// TestControlPlaneOutage: two replicas of the operator elect a leader, with
// --leader-elect and the timings deploy/operator.yaml ships. Then the API
// server, then etcd, stop answering for 30 s (SIGSTOP, then SIGCONT, as a
// hung process or a stalled disk would) just after a Memcached changed: far
// longer than the 8 s renew deadline, so the leader loses the Lease each
// time. Neither process exits: the one that led stands by and campaigns
// again. Their logs show that it lost the Lease, and that two never led at
// once. Neither spins: the requests they send through a counting proxy
// during the outage are few. They converge within a lease duration and 30 s
// of recovery, on the change made before the outage and on one made during
// it (etcd) or right after it (API server); then exactly one reports itself
// the leader in its metrics, and the Lease names it. The controller manager
// and the scheduler, which run without leader election, are still running
// afterwards, and cluster.sh status says the cluster serves.
//
// It runs serially: the paused API server and etcd are every test's.
func TestControlPlaneOutage(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	proxy := ns.viaProxy()
	replicas := ns.startReplicas(2, "--metrics-addr=127.0.0.1:0")
	running := func(context.Context) error {
		for _, op := range replicas {
			if !op.Running() {
				return framework.Permanent(fmt.Errorf("the operator of %s exited: %v", op.LogFile(), op.Stop(0)))
			}
		}
		return nil
	}
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
			leader := waitLeader(t, replicas)
			lossesBefore := strings.Count(leader.Log(), msgLeaseLost)
			// Just before the outage: the operator may or may not act
			// on it before the component stops.
			ns.setSize("cache", size)
			cpuBefore, err := replicasCPU(replicas)
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
			err = framework.Consistently(ctx, outage, "both replicas running through the outage", running)
			resumed := time.Now()
			if rerr := resume(); rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			cpuAfter, cerr := replicasCPU(replicas)
			if cerr != nil {
				t.Fatal(cerr)
			}
			reqs := proxy.Requests(paused, resumed)
			rate := float64(len(reqs)) / resumed.Sub(paused).Seconds()
			t.Logf("%s paused for %s: the two replicas sent %d requests (%.2f/s) and used %s of CPU%s", c.component, resumed.Sub(paused).Round(100*time.Millisecond), len(reqs), rate, (cpuAfter - cpuBefore).Round(10*time.Millisecond), requestSummary(reqs))
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
			// A replica takes the Lease a lease duration after it can read
			// it again, and then converges as a single process does.
			deadline := outageRecoveryTimeout - time.Since(resumed)
			err = framework.Eventually(ctx, deadline, fmt.Sprintf("both Memcacheds to converge within %s of the recovery", outageRecoveryTimeout), func(ctx context.Context) error {
				if err := running(ctx); err != nil {
					return err
				}
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

			if n := strings.Count(leader.Log(), msgLeaseLost); n <= lossesBefore {
				t.Errorf("the leader before the outage (%s) did not log the loss of the Lease (%q) during it", leader.LogFile(), msgLeaseLost)
			}
			spans := leadSpans(t, replicas)
			t.Logf("leading spans:\n%s", formatLeadSpans(spans))
			for i := 1; i < len(spans); i++ {
				if prev := spans[i-1]; prev.open || !prev.end.Before(spans[i].start) {
					t.Errorf("two replicas led at once: %s, then %s", prev, spans[i])
				}
			}
			requireOneLeaderReported(t, ns, replicas)

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

// Log messages of pkg/leader that mark when an operator process leads.
const (
	msgLeading   = `msg="leading: `
	msgLeaseLost = `msg="lost the leader lease`
	msgReleased  = `msg="released lease`
)

// leadSpan is when one operator process led, from its log: from its
// "leading" line to the line in which it lost or released the Lease; open
// if none came yet.
type leadSpan struct {
	log        string
	start, end time.Time
	open       bool
}

func (s leadSpan) String() string {
	end := "still leading"
	if !s.open {
		end = "until " + s.end.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s: led from %s %s", filepath.Base(s.log), s.start.Format("15:04:05.000"), end)
}

// leadSpans returns the leading spans in the stamped logs of ops (see
// startReplicas), by start.
func leadSpans(t *testing.T, ops []*framework.Operator) []leadSpan {
	t.Helper()
	var spans []leadSpan
	for _, op := range ops {
		var cur *leadSpan
		for _, line := range strings.Split(op.Log(), "\n") {
			stamp, text, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				continue // the framework's own lines have no stamp
			}
			switch {
			case strings.Contains(text, msgLeading):
				if cur != nil {
					t.Errorf("%s: led again at %s without a loss or a release since %s", op.LogFile(), at.Format("15:04:05.000"), cur.start.Format("15:04:05.000"))
				}
				cur = &leadSpan{log: op.LogFile(), start: at, open: true}
			case cur != nil && (strings.Contains(text, msgLeaseLost) || strings.Contains(text, msgReleased)):
				cur.end, cur.open = at, false
				spans = append(spans, *cur)
				cur = nil
			}
		}
		if cur != nil {
			spans = append(spans, *cur)
		}
	}
	slices.SortFunc(spans, func(a, b leadSpan) int { return a.start.Compare(b.start) })
	return spans
}

func formatLeadSpans(spans []leadSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	return b.String()
}

// waitLeader returns the replica of ops that leads, by its log, once one does.
func waitLeader(t *testing.T, ops []*framework.Operator) *framework.Operator {
	t.Helper()
	var leader *framework.Operator
	err := framework.Eventually(context.Background(), convergeTimeout, "a replica to lead", func(context.Context) error {
		spans := leadSpans(t, ops)
		if len(spans) == 0 || !spans[len(spans)-1].open {
			return fmt.Errorf("nobody leads; leading spans:\n%s", formatLeadSpans(spans))
		}
		for _, op := range ops {
			if op.LogFile() == spans[len(spans)-1].log {
				leader = op
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// requireOneLeaderReported waits until exactly one of ops reports
// memcached_operator_leader 1 on its /metrics, and the Lease names it.
func requireOneLeaderReported(t *testing.T, ns *namespace, ops []*framework.Operator) {
	t.Helper()
	err := framework.Eventually(context.Background(), convergeTimeout, "one replica to report itself the leader, the one the Lease names", func(ctx context.Context) error {
		var leaders []string
		for i, op := range ops {
			v, err := leaderMetric(ctx, op)
			if err != nil {
				return err
			}
			if v == 1 {
				leaders = append(leaders, fmt.Sprintf("replica-%d", i))
			}
		}
		holder, err := ns.kubectl.Run(ctx, "get", "lease", "memcached-operator", "-o", "jsonpath={.spec.holderIdentity}")
		if err != nil {
			return err
		}
		if len(leaders) != 1 || leaders[0] != strings.TrimSpace(holder) {
			return fmt.Errorf("replicas reporting memcached_operator_leader 1: %v; the Lease names %q", leaders, holder)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// leaderMetric returns memcached_operator_leader from op's /metrics, at the
// address its log names.
func leaderMetric(ctx context.Context, op *framework.Operator) (float64, error) {
	_, rest, ok := strings.Cut(op.Log(), "serving /metrics, /healthz and /readyz on ")
	if !ok {
		return 0, fmt.Errorf("%s names no metrics address yet", op.LogFile())
	}
	addr, _, _ := strings.Cut(rest, "\n")
	addr = strings.TrimSpace(strings.Trim(strings.TrimSpace(addr), `"`))
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("the /metrics of %s: %v", op.LogFile(), err)
	}
	for _, m := range families["memcached_operator_leader"].GetMetric() {
		return m.GetGauge().GetValue(), nil
	}
	return 0, fmt.Errorf("the /metrics of %s have no memcached_operator_leader", op.LogFile())
}

// replicasCPU returns the CPU time that the processes of ops have used.
func replicasCPU(ops []*framework.Operator) (time.Duration, error) {
	var sum time.Duration
	for _, op := range ops {
		cpu, err := framework.ProcessCPU(op.Pid())
		if err != nil {
			return 0, err
		}
		sum += cpu
	}
	return sum, nil
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
