package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStalledRequestTimesOut: the proxy in front of the API server holds the
// first status write of one Memcached unanswered, as a request lost on a
// half-open connection is. The operator's other workers go on: another
// Memcached converges while that request is held. The operator gives the
// request up after --kube-api-timeout and retries, and the stalled Memcached
// converges too. The caches' watches, which have no timeout, stay open: each
// cache listed once.
func TestStalledRequestTimesOut(t *testing.T) {
	t.Parallel()
	// Long enough for the other Memcached to converge while the request is
	// held; a few seconds on KWOK.
	const timeout = 20 * time.Second
	ns := newNamespace(t, "stall")
	proxy := ns.viaProxy()
	start := time.Now()
	ns.startOperator(fmt.Sprintf("--kube-api-timeout=%v", timeout))
	stall := proxy.StallNext("PUT", fmt.Sprintf("/apis/cache.example.com/v1alpha1/namespaces/%s/memcacheds/stalled/status", ns.name))

	ns.createMemcached("stalled", 1)
	select {
	case <-stall.Held():
	case <-time.After(convergeTimeout):
		t.Fatalf("memcached stalled got no status write within %v", convergeTimeout)
	}
	ns.createMemcached("other", 1)
	ns.waitConverged("other", 1)
	select {
	case <-stall.Abandoned():
		t.Fatalf("the stalled request was given up %v after it arrived, before memcached other converged: the test needs a longer timeout",
			stall.AbandonedAt().Sub(stall.HeldAt()).Round(time.Millisecond))
	default:
	}
	otherConverged := time.Now()

	ns.waitConverged("stalled", 1)
	select {
	case <-stall.Abandoned():
	default:
		t.Fatal("memcached stalled converged while its status write was still held")
	}
	held := stall.AbandonedAt().Sub(stall.HeldAt())
	t.Logf("memcached other converged %v after the status write of stalled was held; the operator gave that write up after %v",
		otherConverged.Sub(stall.HeldAt()).Round(time.Millisecond), held.Round(time.Millisecond))
	if held < timeout-time.Second || held > timeout+5*time.Second {
		t.Errorf("the stalled request was given up after %v, want about --kube-api-timeout=%v", held, timeout)
	}

	// A timeout on the caches' clients would cut every watch after it, and
	// each cache would list again.
	lists := map[string]int{}
	for _, r := range proxy.Requests(start, time.Now()) {
		path, _, _ := strings.Cut(r.URI, "?")
		if r.Method != "GET" || r.Watch() {
			continue
		}
		for _, kind := range []string{"deployments", "services", "poddisruptionbudgets", "pods"} {
			if strings.HasSuffix(path, "/namespaces/"+ns.name+"/"+kind) {
				lists[kind]++
			}
		}
	}
	for _, kind := range []string{"deployments", "services", "poddisruptionbudgets", "pods"} {
		if lists[kind] != 1 {
			t.Errorf("the %s cache listed %d times in %v, want once: were its watches cut?", kind, lists[kind], time.Since(start).Round(time.Second))
		}
	}
}
