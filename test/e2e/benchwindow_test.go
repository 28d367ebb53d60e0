package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// windowImage is the new default image of the window phase. KWOK's
	// nodes pull nothing, so any name does.
	windowImage = "example.com/memcached:window-bench"
	// windowFloorAnnotation marks the pod templates that the window
	// phase's floor patches.
	windowFloorAnnotation = "bench.example.com/floor"
	// operatorQPS, operatorBurst and operatorWorkers are the operator's
	// defaults (--kube-api-qps, --kube-api-burst, --workers), which the
	// window phase's floor sends its patches with.
	operatorQPS, operatorBurst, operatorWorkers = 50, 100, 4
	// maxConcurrentRollsPercent is --max-concurrent-rolls' default, 10%.
	maxConcurrentRollsPercent = 10
)

// windowResult holds the figures of the window phase: a new default image
// for every Memcached, waiting for the default maintenance window, which
// opens for all of them at the same instant.
type windowResult struct {
	// Slots is how many paced rolls --max-concurrent-rolls allows at once:
	// the grants that the opening can make before a roll ends.
	Slots int `json:"slots"`
	// LeadSeconds is how long before the opening the operator started;
	// ReconciledSeconds how long it took to reconcile every Memcached
	// once, each of them then waiting for the window.
	LeadSeconds       float64 `json:"lead_seconds"`
	ReconciledSeconds float64 `json:"reconciled_seconds"`
	// GrantSeconds is the time from the opening until a watch of the
	// Deployments saw the Slots-th pod template of the new image.
	GrantSeconds float64 `json:"grant_seconds"`
	// FloorSeconds is the time from the first of Slots patches of
	// Deployments' pod templates that the bench sends itself, with the
	// operator's client limits and workers, until the same watch saw the
	// last; Ratio is GrantSeconds over it.
	FloorSeconds float64 `json:"floor_seconds"`
	Ratio        float64 `json:"ratio"`
	// CPUSeconds is the operator's CPU time from the opening to the
	// Slots-th grant.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Requests counts the operator's requests from the opening to the
	// Slots-th grant, by verb and resource, watches and discovery aside:
	// with the client's rate limit, what bounds the grants' pace.
	Requests map[string]int `json:"requests"`
	// LockWaits counts the operator's waits for the pacing's lock over
	// the whole phase, LockWaitsOverOneSecond those longer than about a
	// second (the bucket of 1.05 s), and LongestLockWaitSeconds bounds the
	// longest: the upper bound of the smallest bucket that holds every
	// wait (memcached_operator_roll_pacing_wait_seconds).
	LockWaits              uint64  `json:"lock_waits"`
	LockWaitsOverOneSecond uint64  `json:"lock_waits_over_one_second"`
	LongestLockWaitSeconds float64 `json:"longest_lock_wait_seconds"`
}

// targetWindowRatio is issue 40's goal for the opening: the grants within
// 1.2 times the floor of the same number of template patches.
const targetWindowRatio = 1.2

// measureWindowOpening runs the window phase on the want Memcacheds of ns,
// converged under an operator with the default image: a new operator
// process with a new --memcached-image and a --maintenance-window that
// opens after every Memcached has been reconciled once, so that every one
// of them is queued for the same instant, as when a platform team ships a
// new image under a shared window. It measures how long the opening takes
// to hand out the slots that --max-concurrent-rolls allows, the operator's
// CPU meanwhile and its waits for the pacing's lock, and then, the
// operator stopped, the floor: the same number of template patches sent by
// the bench.
func measureWindowOpening(b *testing.B, ns *namespace, h homes, dyn dynamic.Interface, want int) *windowResult {
	b.Helper()
	w := &windowResult{Slots: int(math.Ceil(float64(want) * maxConcurrentRollsPercent / 100))}
	// Every Memcached gets a status write when it starts waiting, at the
	// client's 50 requests/s, before the window may open.
	lead := 90*time.Second + time.Duration(want)*30*time.Millisecond
	started := time.Now()
	opening := started.Add(lead).UTC().Truncate(time.Minute).Add(time.Minute)
	w.LeadSeconds = opening.Sub(started).Seconds()
	window := fmt.Sprintf("%s %s 1h", opening.Weekday(), opening.Format("15:04"))
	op, err := framework.StartOperator(framework.OperatorConfig{
		Binary:         ns.operatorBinary(),
		Env:            ns.env,
		Kubeconfig:     ns.operatorKubeconfig,
		WatchNamespace: ns.watchNamespace(),
		LogFile:        filepath.Join(ns.dir, "operator-window.log"),
		Args:           []string{"--log-level=info", "--metrics-addr=127.0.0.1:0", "--memcached-image=" + windowImage, "--maintenance-window=" + window},
	})
	if err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := op.Stop(30 * time.Second); err != nil {
			b.Errorf("the window phase's operator did not stop cleanly: %v\n%s", err, op.Log())
		}
	}
	defer stop()
	addr := metricsAddr(b, ns, op)
	awaitReconciled(b, op, addr, want, time.Until(opening)-5*time.Second, "before the window opens at "+opening.Format(time.TimeOnly)+", the operator")
	w.ReconciledSeconds = time.Since(started).Seconds()
	if n := countImage(b, dyn, h.watch(), windowImage); n != 0 {
		b.Fatalf("%d Deployments have the new image before the window opened", n)
	}
	grants := newTracker(dyn, deploymentsGVR, h.watch(), "", w.Slots, templateImage(windowImage))
	defer grants.stop()
	time.Sleep(time.Until(opening)) // the window opens at a wall-clock instant
	cpu0, err := framework.ProcessCPU(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	last, err := grants.wait(benchTimeout)
	if err != nil {
		b.Fatalf("the window opened at %s: %v\n%s", opening.Format(time.TimeOnly), err, op.Log())
	}
	cpu1, err := framework.ProcessCPU(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	w.GrantSeconds, w.CPUSeconds = last.Sub(opening).Seconds(), (cpu1 - cpu0).Seconds()
	w.Requests = map[string]int{}
	for verb, count := range countRequests(ns.proxy.Requests(opening, last)) {
		if verb != verbDiscovery && !strings.HasPrefix(verb, "WATCH ") {
			w.Requests[verb] = count
		}
	}
	w.LockWaits, w.LockWaitsOverOneSecond, w.LongestLockWaitSeconds = pacingWaits(b, addr)
	stop()

	w.FloorSeconds = patchTemplates(b, dyn, h.watch(), w.Slots)
	if w.FloorSeconds > 0 {
		w.Ratio = w.GrantSeconds / w.FloorSeconds
	}
	return w
}

// metricsAddr returns the address where op serves /metrics, from its log.
func metricsAddr(b *testing.B, ns *namespace, op *framework.Operator) string {
	b.Helper()
	var addr string
	ns.eventually("the operator to serve its metrics", func(context.Context) error {
		_, rest, ok := strings.Cut(op.Log(), "serving /metrics, /healthz and /readyz on ")
		if !ok {
			return fmt.Errorf("no metrics address in its log yet")
		}
		addr, _, _ = strings.Cut(rest, "\n")
		addr = strings.TrimSpace(strings.Trim(strings.TrimSpace(addr), `"`))
		return nil
	})
	return addr
}

// awaitReconciled waits up to timeout until op, serving its metrics at
// addr, has reconciled want Memcacheds and has none queued; who names op
// in the failure.
func awaitReconciled(b *testing.B, op *framework.Operator, addr string, want int, timeout time.Duration, who string) {
	b.Helper()
	err := framework.Eventually(context.Background(), timeout, fmt.Sprintf("%s to reconcile all %d memcacheds", who, want), func(ctx context.Context) error {
		if !op.Running() {
			return framework.Permanent(fmt.Errorf("%s exited:\n%s", who, op.Log()))
		}
		reconciles, depth, err := reconcileProgress(ctx, addr)
		if err != nil {
			return err
		}
		if reconciles < float64(want) || depth > 0 {
			return fmt.Errorf("%.0f reconciles, %.0f queued", reconciles, depth)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// templateImage is ready for a Deployment whose pod template runs image.
func templateImage(image string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if c, ok := c.(map[string]interface{}); ok && c["image"] == image {
				return true
			}
		}
		return false
	}
}

// countImage counts the Deployments in namespace (every one with "")
// whose pod template runs image.
func countImage(b *testing.B, dyn dynamic.Interface, namespace, image string) int {
	b.Helper()
	list, err := dyn.Resource(deploymentsGVR).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if templateImage(image)(&list.Items[i]) {
			n++
		}
	}
	return n
}

// patchTemplates is the window phase's floor: it patches the pod template
// of n Deployments in namespace (every one with ""), with the operator's
// client limits and as many senders as it has workers, and returns the
// time from the first patch until a watch saw the last.
func patchTemplates(b *testing.B, dyn dynamic.Interface, namespace string, n int) float64 {
	b.Helper()
	list, err := dyn.Resource(deploymentsGVR).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(list.Items) < n {
		b.Fatalf("%d Deployments for a floor of %d patches", len(list.Items), n)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = operatorQPS, operatorBurst
	limited, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	stamp := time.Now().Format(time.RFC3339Nano)
	seen := newTracker(dyn, deploymentsGVR, namespace, "", n, func(u *unstructured.Unstructured) bool {
		return u.GetAnnotations() != nil && templateAnnotation(u, windowFloorAnnotation) == stamp
	})
	defer seen.stop()
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, windowFloorAnnotation, stamp)
	todo := make(chan *unstructured.Unstructured, n)
	for i := range n {
		todo <- &list.Items[i]
	}
	close(todo)
	var wg sync.WaitGroup
	errs := make(chan error, operatorWorkers)
	start := time.Now()
	for range operatorWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range todo {
				if _, err := limited.Resource(deploymentsGVR).Namespace(d.GetNamespace()).Patch(context.Background(), d.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					errs <- fmt.Errorf("patch deployment %s/%s: %v", d.GetNamespace(), d.GetName(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	last, err := seen.wait(benchTimeout)
	if err != nil {
		b.Fatal(err)
	}
	return last.Sub(start).Seconds()
}

// templateAnnotation returns the annotation key of u's pod template.
func templateAnnotation(u *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", key)
	return v
}

// pacingWaits reads memcached_operator_roll_pacing_wait_seconds from the
// operator's /metrics at addr: how many waits, how many beyond the bucket
// that ends just above a second, and the upper bound of the smallest
// bucket that holds them all.
func pacingWaits(b *testing.B, addr string) (count, overOneSecond uint64, longest float64) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("the operator's /metrics: %v", err)
	}
	f := families["memcached_operator_roll_pacing_wait_seconds"]
	if f == nil || len(f.GetMetric()) != 1 {
		b.Fatalf("the operator's /metrics has no memcached_operator_roll_pacing_wait_seconds")
	}
	h := f.GetMetric()[0].GetHistogram()
	return waitsOf(h)
}

// waitsOf returns what pacingWaits reports of the histogram h.
func waitsOf(h *dto.Histogram) (count, overOneSecond uint64, longest float64) {
	count, longest = h.GetSampleCount(), math.Inf(1)
	overOneSecond = count
	for _, bucket := range h.GetBucket() {
		if bucket.GetUpperBound() >= 1 && overOneSecond == count {
			overOneSecond = count - bucket.GetCumulativeCount()
		}
		if bucket.GetCumulativeCount() == count && bucket.GetUpperBound() < longest {
			longest = bucket.GetUpperBound()
		}
	}
	return count, overOneSecond, longest
}

// windowLines prints the window phase's figures.
func windowLines(w *windowResult, verdict func(bool) string) []string {
	if w == nil {
		return []string{"window opening        not measured (BENCH_WINDOW=0)"}
	}
	return []string{
		fmt.Sprintf("window opening        %d slots granted in %.1f s from the opening, %.2f× the floor of %d template patches (%.1f s); target <= %.1f: %s",
			w.Slots, w.GrantSeconds, w.Ratio, w.Slots, w.FloorSeconds, targetWindowRatio, verdict(w.Ratio <= targetWindowRatio)),
		fmt.Sprintf("                      requests from the opening to the last of them: %s", requestsLine(w.Requests, w.Slots)),
		fmt.Sprintf("                      pacing lock: %d waits, the longest <= %.3g s, %d over 1 s; target 0: %s; operator CPU %.2f s; every Memcached reconciled %.0f s after the start, %.0f s before the opening",
			w.LockWaits, w.LongestLockWaitSeconds, w.LockWaitsOverOneSecond, verdict(w.LockWaitsOverOneSecond == 0), w.CPUSeconds, w.ReconciledSeconds, w.LeadSeconds-w.ReconciledSeconds),
	}
}

func TestWaitsOfAHistogram(t *testing.T) {
	histogram := func(count uint64, buckets map[float64]uint64) *dto.Histogram {
		h := &dto.Histogram{SampleCount: &count}
		for _, le := range []float64{1e-6, 0.016, 1.048576, 4.194304} {
			le, c := le, buckets[le]
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &le, CumulativeCount: &c})
		}
		return h
	}
	tests := []struct {
		name          string
		h             *dto.Histogram
		count, over   uint64
		longestAtMost float64
	}{
		{name: "no wait", h: histogram(0, nil), longestAtMost: 1e-6},
		{name: "all short", h: histogram(5, map[float64]uint64{1e-6: 3, 0.016: 5, 1.048576: 5, 4.194304: 5}), count: 5, longestAtMost: 0.016},
		{name: "one of two seconds", h: histogram(5, map[float64]uint64{1e-6: 3, 0.016: 4, 1.048576: 4, 4.194304: 5}), count: 5, over: 1, longestAtMost: 4.194304},
		{name: "one beyond every bucket", h: histogram(2, map[float64]uint64{1e-6: 1, 0.016: 1, 1.048576: 1, 4.194304: 1}), count: 2, over: 1, longestAtMost: math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, over, longest := waitsOf(tt.h)
			if count != tt.count || over != tt.over || longest != tt.longestAtMost {
				t.Errorf("got %d waits, %d over 1 s, longest <= %v; want %d, %d, %v", count, over, longest, tt.count, tt.over, tt.longestAtMost)
			}
		})
	}
}

// requestsLine prints requests by verb, and their sum, per slot granted.
func requestsLine(requests map[string]int, slots int) string {
	verbs := slices.Sorted(maps.Keys(requests))
	total := 0
	parts := make([]string, 0, len(verbs))
	for _, v := range verbs {
		total += requests[v]
		parts = append(parts, fmt.Sprintf("%s %d", v, requests[v]))
	}
	return fmt.Sprintf("%d (%s), %.2f a grant", total, strings.Join(parts, ", "), float64(total)/float64(max(slots, 1)))
}
