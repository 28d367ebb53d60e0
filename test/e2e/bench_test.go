package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

// The benchmark's settings, from the environment that `make bench` sets.
const (
	// benchPodsPerNode is how many pods the benchmark puts on one KWOK node
	// at most, under the kubelet's default of 110, so that N resources of
	// SIZE pods get N*SIZE/100 nodes: 24 for the default 1,000 of 2, at
	// least (see benchNodes).
	benchPodsPerNode = 100
	// benchIdle is how long the benchmark watches the operator's requests
	// once every resource has converged.
	benchIdle = 60 * time.Second
)

// benchTimeout bounds each phase's wait for convergence and each cleanup:
// 15 minutes a thousand resources, since every phase's time grows with N
// (N=1000 converges in about 2 minutes on this machine). The benchmark sets
// it from BENCH_N before its first phase.
var benchTimeout = 15 * time.Minute

// The targets of issue 9, printed next to the figures.
const (
	targetRatio           = 1.25
	targetCPUSeconds      = 5.0
	targetPeakRSSBytes    = 64 << 20
	targetRequestsPerItem = 3.0
	targetIdleRequests    = 0
	targetLatencySeconds  = 1.0
)

// podsGVR is the resource of the pods the status latency watches.
var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// benchResult is what BenchmarkOperatorAgainstFloor writes to
// tmp/_output/bench/result.json.
type benchResult struct {
	N    int `json:"n"`
	Size int `json:"size"`
	// Namespaces is how many namespaces each phase spreads its N
	// resources over, round robin: with more than one, the operator
	// watches every namespace (WATCH_NAMESPACE=""), as one operator for
	// the whole cluster does.
	Namespaces int `json:"namespaces"`
	// FloorSeconds is how long N plain Deployments of Size replicas took
	// from the start of their `kubectl apply` until every one had Size
	// ready replicas; OperatorSeconds the same for N Memcached resources
	// until every one listed Size pods in status.nodes, all Ready.
	FloorSeconds    float64 `json:"floor_seconds"`
	OperatorSeconds float64 `json:"operator_seconds"`
	// ChildrenFloorSeconds is how long the children the operator would
	// build for the N Memcached resources, ChildrenFloorKinds of each, took
	// from the start of their `kubectl apply` until every Deployment had
	// Size ready replicas, as FloorSeconds: the same work without the
	// operator (see operatorChildren).
	ChildrenFloorSeconds float64  `json:"children_floor_seconds"`
	ChildrenFloorKinds   []string `json:"children_floor_kinds,omitempty"`
	// Ratio is OperatorSeconds / FloorSeconds, ChildrenRatio
	// OperatorSeconds / ChildrenFloorSeconds.
	Ratio         float64 `json:"ratio"`
	ChildrenRatio float64 `json:"children_ratio"`
	// FloorApplySeconds, ChildrenFloorApplySeconds and OperatorApplySeconds
	// are how long each phase's `kubectl apply` took, of its time above.
	FloorApplySeconds         float64 `json:"floor_apply_seconds"`
	ChildrenFloorApplySeconds float64 `json:"children_floor_apply_seconds"`
	OperatorApplySeconds      float64 `json:"operator_apply_seconds"`
	// ControlPlaneCPU is the CPU seconds (user and system) that each
	// control-plane process used during each phase's convergence, by phase
	// (phaseFloor, phaseChildrenFloor, phaseOperator) and component: where
	// the machine's two cores went while the operator, and the floors,
	// waited for them.
	ControlPlaneCPU map[string]map[string]float64 `json:"control_plane_cpu_seconds"`
	// MachineCPU is, by phase, where the rest of the machine's CPU went
	// meanwhile, and how much of it stayed idle: on two cores, a phase
	// that leaves none idle waits for CPU, one that leaves much idle waits
	// for something else.
	MachineCPU map[string]machineCPU `json:"machine_cpu_seconds"`
	// Lag is, by phase, how long each resource took from its creation
	// until it converged. Unlike the phase's time, it leaves out how long
	// the `kubectl apply` took to reach the resource: it is what each
	// user waits for one cache, while the cluster creates all the others.
	Lag map[string]lag `json:"lag_seconds"`
	// ControlPlaneWrites is, by phase, the writes (POST, PUT, PATCH,
	// DELETE, APPLY) that the API server served during the phase's convergence,
	// from every client, by resource and subresource, divided by N: the
	// whole cascade each resource sets off.
	ControlPlaneWrites map[string]map[string]float64 `json:"control_plane_writes_per_resource"`
	// CPUSeconds is the operator's user and system CPU time during the
	// burst; PeakRSSBytes its peak resident set (VmHWM) at the end of it.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// EndRSSAnonBytes and EndRSSFileBytes split the resident set at the
	// end of the burst into anonymous memory (the Go heap, stacks and
	// runtime) and pages mapped from files (the operator's code).
	EndRSSAnonBytes int64 `json:"end_rss_anon_bytes"`
	EndRSSFileBytes int64 `json:"end_rss_file_bytes"`
	// RequestsPerResource counts the operator's requests during the burst,
	// watches and discovery aside, divided by N; RequestsByVerb breaks them
	// down by verb and resource, also per resource.
	RequestsPerResource float64            `json:"requests_per_resource"`
	RequestsByVerb      map[string]float64 `json:"requests_by_verb"`
	// IdleRequests counts the operator's requests in the benchIdle seconds
	// after convergence, discovery aside; IdleDiscoveryRequests counts the
	// discovery requests in that window (see test/README.md, Performance).
	IdleSeconds           float64 `json:"idle_seconds"`
	IdleRequests          int     `json:"idle_requests"`
	IdleDiscoveryRequests int     `json:"idle_discovery_requests"`
	// LatencySeconds is, for one new resource on the idle operator, the time
	// from the moment all its pods ran to its complete status.nodes.
	LatencySeconds float64 `json:"latency_seconds"`
	// Binary is the operator measured, when not the one `make build` writes.
	Binary string `json:"binary,omitempty"`
	// OperatorEnv is what BENCH_OPERATOR_ENV added to its environment.
	OperatorEnv []string `json:"operator_env,omitempty"`
	// Profiles are the operator's pprof profiles of the run.
	CPUProfile  string `json:"cpu_profile"`
	HeapProfile string `json:"heap_profile"`
	// RestartCPUProfile and RestartHeapProfile are the new leader's: its
	// CPU from its start until it stopped, and its heap as its last
	// collection before it stopped found it, once it had reconciled all.
	RestartCPUProfile  string `json:"restart_cpu_profile"`
	RestartHeapProfile string `json:"restart_heap_profile"`
	// MemoryLimitBytes is deploy/operator.yaml's memory limit, which the
	// operator's MEMORY_LIMIT is, as the downward API sets it there; the
	// operator sets the Go runtime's limit below it.
	MemoryLimitBytes int64 `json:"memory_limit_bytes"`
	// PeakLiveHeapBytes and RestartPeakLiveHeapBytes are the largest heap
	// that the collector found live (GODEBUG=gctrace=1) during the burst
	// and during the restart: what the operator needs, whatever the
	// limit, where the peak RSS is what the limit let the heap grow to.
	PeakLiveHeapBytes        int64 `json:"peak_live_heap_bytes"`
	RestartPeakLiveHeapBytes int64 `json:"restart_peak_live_heap_bytes"`
	// RestartSeconds is how long a new operator process, started once
	// every resource had converged, took to list everything, as every
	// replica does when it starts, and reconcile every resource once, as a
	// new leader does; RestartPeakRSSBytes
	// and RestartEndRSSAnonBytes are its memory then, RestartCPUSeconds its
	// CPU time, which deploy/operator.yaml's CPU limit would stretch.
	RestartSeconds         float64 `json:"restart_seconds"`
	RestartCPUSeconds      float64 `json:"restart_cpu_seconds"`
	RestartPeakRSSBytes    int64   `json:"restart_peak_rss_bytes"`
	RestartEndRSSAnonBytes int64   `json:"restart_end_rss_anon_bytes"`
	// Window is the window phase's (see measureWindowOpening), unless
	// BENCH_WINDOW=0 left it out.
	Window *windowResult `json:"window,omitempty"`
	// BaselineRestart is what another build of the operator, such as an
	// earlier commit's, took as a new leader of the same resources, just
	// before the measured one (BENCH_BASELINE): its restart figures side by
	// side with the measured build's in one run.
	BaselineRestart *newLeaderResult `json:"baseline_restart,omitempty"`
}

// newLeaderResult is what a new operator process took to list everything
// and reconcile all (see restartLikeANewLeader).
type newLeaderResult struct {
	Binary            string  `json:"binary"`
	Seconds           float64 `json:"seconds"`
	CPUSeconds        float64 `json:"cpu_seconds"`
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`
	EndRSSAnonBytes   int64   `json:"end_rss_anon_bytes"`
	PeakLiveHeapBytes int64   `json:"peak_live_heap_bytes"`
	CPUProfile        string  `json:"cpu_profile"`
	HeapProfile       string  `json:"heap_profile"`
}

// The phases of the benchmark, as keys of benchResult's maps.
const (
	phaseFloor         = "floor"
	phaseChildrenFloor = "children_floor"
	phaseOperator      = "operator"
)

// BenchmarkOperatorAgainstFloor measures what users with many caches feel:
// how long N Memcached resources of SIZE pods take to converge, against two
// floors applied the same way on the same cluster: N plain Deployments of
// SIZE replicas, and the N resources' children as the operator builds them,
// without the operator. The first is what a user would write by hand; the
// second is the operator's own job, so the ratio to it is the operator's
// cost alone, not that of the Services and budgets it must create. It also
// measures what the operator costs meanwhile (CPU, memory and API requests,
// counted by a proxy in front of the API server), then at rest.
// Run it with `make bench` (N=1000 SIZE=2 by default).
func BenchmarkOperatorAgainstFloor(b *testing.B) {
	if b.N > 1 {
		b.Fatalf("b.N = %d: one run takes minutes and measures itself; run with -benchtime 1x, as make bench does", b.N)
	}
	n, size := envInt(b, "BENCH_N", 1000), envInt(b, "BENCH_SIZE", 2)
	spread := envInt(b, "BENCH_NAMESPACES", 1)
	benchTimeout = time.Duration(max(1, n/1000)) * 15 * time.Minute
	if spread > n {
		b.Fatalf("BENCH_NAMESPACES=%d: more namespaces than the %d resources", spread, n)
	}
	ctx := context.Background()
	out := filepath.Join(paths.Output(), "bench")
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := cluster.ScaleNodes(ctx, benchNodes(n, size)); err != nil {
		b.Fatal(err)
	}
	dyn := dynamicClient(b)
	r := benchResult{N: n, Size: size, Namespaces: spread, MemoryLimitBytes: shippedMemoryLimit(b), RequestsByVerb: map[string]float64{},
		ControlPlaneCPU: map[string]map[string]float64{}, ControlPlaneWrites: map[string]map[string]float64{},
		MachineCPU: map[string]machineCPU{}, Lag: map[string]lag{}}

	// BENCH_FLOOR=0 leaves both floors out, for a run that measures the
	// operator alone, such as its memory at a large N, without their phases.
	// BENCH_FLOOR=children leaves out the plain Deployments alone: at
	// N=10,000 their phase and its cleanup cost a quarter of the run, and the
	// children floor is the one the operator's own cost is measured against.
	floors := os.Getenv("BENCH_FLOOR")
	if floors != "0" && floors != "" && floors != "children" {
		b.Fatalf("BENCH_FLOOR=%q: want empty (both floors), children (the children floor alone) or 0 (none)", floors)
	}
	if floors == "" {
		r.FloorSeconds, r.FloorApplySeconds = measureFloor(b, dyn, phaseFloor, n, size, spread, &r,
			func(i int) string { return floorDeployment(i, size) })
	}
	if floors != "0" {
		children := operatorChildren(b, dyn, os.Getenv("BENCH_BINARY"), size)
		for _, c := range children {
			r.ChildrenFloorKinds = append(r.ChildrenFloorKinds, c.GetKind())
		}
		r.ChildrenFloorSeconds, r.ChildrenFloorApplySeconds = measureFloor(b, dyn, phaseChildrenFloor, n, size, spread, &r,
			func(i int) string { return childrenOf(b, children, benchName(i)) })
	}

	// The operator, from a namespace of its own, through a counting proxy:
	// it watches that namespace alone, or with BENCH_NAMESPACES every
	// namespace, the resources spread over namespaces of their own.
	ns := newNamespace(b, "bench")
	homes := spreadOver(b, ns, "bench", spread)
	if spread > 1 {
		ns.serveAll()
	}
	// BENCH_BINARY measures another build of the operator, such as an
	// earlier commit's, on the same terms.
	ns.binary = os.Getenv("BENCH_BINARY")
	// The operator runs with the MEMORY_LIMIT that deploy/operator.yaml
	// gives it, and traces its collections for the live heap.
	// BENCH_OPERATOR_ENV adds KEY=VALUE entries, separated by spaces, to
	// the operator's environment alone, such as GOGC or a GOMEMLIMIT,
	// which wins, to measure the Go runtime's trade of memory for CPU.
	ns.env = append(ns.env, fmt.Sprintf("MEMORY_LIMIT=%d", r.MemoryLimitBytes), "GODEBUG=gctrace=1")
	ns.env = append(ns.env, strings.Fields(os.Getenv("BENCH_OPERATOR_ENV"))...)
	r.OperatorEnv = ns.env
	proxy := ns.viaProxy()
	r.CPUProfile, r.HeapProfile = filepath.Join(out, "cpu.pprof"), filepath.Join(out, "heap.pprof")
	r.Binary = ns.binary
	op := ns.startOperator("--log-level=info", "--cpuprofile="+r.CPUProfile, "--memprofile="+r.HeapProfile)
	ns.eventually("the operator to watch", func(context.Context) error {
		if !strings.Contains(op.Log(), "watching "+ns.scope()) {
			return fmt.Errorf("not yet watching")
		}
		return nil
	})
	cpu0, err := framework.ProcessCPU(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	cp0, w0, m0 := controlPlaneCPU(b), apiServerWrites(b), machineNow(b)
	start := time.Now()
	opTime, opApply, opLag := converge(b, dyn, memcachedsGVR, homes.watch(), n, memcachedReady(size), func() {
		homes.apply(b, n, func(i int) string { return memcached(i, size) })
	})
	end := start.Add(opTime)
	r.ControlPlaneCPU[phaseOperator] = cpuSince(b, cp0)
	r.MachineCPU[phaseOperator], r.Lag[phaseOperator] = machineNow(b).since(m0), opLag
	r.ControlPlaneWrites[phaseOperator] = writesSince(b, w0, n)
	r.OperatorApplySeconds = opApply.Seconds()
	cpu1, err := framework.ProcessCPU(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	mem, err := framework.ProcessMemoryOf(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	r.PeakRSSBytes, r.EndRSSAnonBytes, r.EndRSSFileBytes = mem.PeakRSS, mem.RSSAnon, mem.RSSFile
	r.PeakLiveHeapBytes = peakLiveHeap(op.Log())
	r.OperatorSeconds = opTime.Seconds()
	if r.FloorSeconds > 0 {
		r.Ratio = r.OperatorSeconds / r.FloorSeconds
	}
	if r.ChildrenFloorSeconds > 0 {
		r.ChildrenRatio = r.OperatorSeconds / r.ChildrenFloorSeconds
	}
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	burst := countRequests(proxy.Requests(start, end))
	for verb, count := range burst {
		if verb == verbDiscovery || strings.HasPrefix(verb, "WATCH ") {
			continue
		}
		r.RequestsByVerb[verb] = float64(count) / float64(n)
		r.RequestsPerResource += float64(count) / float64(n)
	}

	// At rest: nothing changes, so nothing should be asked.
	idleStart := time.Now()
	time.Sleep(benchIdle) // a measurement window, not a wait for a state
	idleEnd := time.Now()
	r.IdleSeconds = idleEnd.Sub(idleStart).Seconds()
	for verb, count := range countRequests(proxy.Requests(idleStart, idleEnd)) {
		if verb == verbDiscovery {
			r.IdleDiscoveryRequests += count
		} else {
			r.IdleRequests += count
		}
	}

	r.LatencySeconds = statusLatency(b, dyn, ns, size).Seconds()
	if err := op.Stop(30 * time.Second); err != nil {
		b.Fatal(err)
	}
	// BENCH_BASELINE measures another build as a new leader first, such
	// as an earlier commit's, for a comparison within one run.
	if baseline := os.Getenv("BENCH_BASELINE"); baseline != "" {
		base := restartLikeANewLeader(b, ns, baseline, "baseline-restart", n+1)
		r.BaselineRestart = &base
	}
	restart := restartLikeANewLeader(b, ns, ns.operatorBinary(), "restart", n+1)
	r.RestartSeconds, r.RestartCPUSeconds, r.RestartPeakRSSBytes, r.RestartEndRSSAnonBytes = restart.Seconds, restart.CPUSeconds, restart.PeakRSSBytes, restart.EndRSSAnonBytes
	r.RestartPeakLiveHeapBytes, r.RestartCPUProfile, r.RestartHeapProfile = restart.PeakLiveHeapBytes, restart.CPUProfile, restart.HeapProfile
	// BENCH_WINDOW=0 leaves out the window phase, which adds about a
	// minute and a half, plus 30 ms a resource, of waiting for the opening.
	if os.Getenv("BENCH_WINDOW") != "0" {
		r.Window = measureWindowOpening(b, ns, homes, dyn, n+1)
	}
	report(b, r, filepath.Join(out, "result.json"))
	for what, peak := range map[string]int64{"during the burst": r.PeakRSSBytes, "after a restart": r.RestartPeakRSSBytes} {
		if peak >= r.MemoryLimitBytes {
			b.Errorf("the operator's peak RSS %s, %.1f MiB, reached deploy/operator.yaml's memory limit of %.0f MiB: in a pod it could have been OOM-killed",
				what, float64(peak)/(1<<20), float64(r.MemoryLimitBytes)/(1<<20))
		}
	}
}

// measureFloor measures one floor: it applies the n resources' documents
// that doc makes, each a floor's objects, to the control plane, in a
// namespace of its own or spread over spread namespaces as the operator's
// resources are, records the control plane's CPU and writes meanwhile in r
// under phase, and returns how long it took, and its apply alone, until n
// Deployments had size ready replicas. Then it deletes them, so that the
// next phase gets the cluster as this one found it.
func measureFloor(b *testing.B, dyn dynamic.Interface, phase string, n, size, spread int, r *benchResult, doc func(i int) string) (total, applied float64) {
	b.Helper()
	prefix := strings.ReplaceAll(phase, "_", "-")
	floor := newNamespace(b, prefix)
	homes := spreadOver(b, floor, prefix, spread)
	cp0, w0, m0 := controlPlaneCPU(b), apiServerWrites(b), machineNow(b)
	floorTime, floorApply, floorLag := converge(b, dyn, deploymentsGVR, homes.watch(), n, deploymentReady(size), func() {
		homes.apply(b, n, doc)
	})
	r.ControlPlaneCPU[phase] = cpuSince(b, cp0)
	r.MachineCPU[phase], r.Lag[phase] = machineNow(b).since(m0), floorLag
	r.ControlPlaneWrites[phase] = writesSince(b, w0, n)
	b.Logf("%s: %d deployments of %d ready in %.1f s; deleting them", phase, n, size, floorTime.Seconds())
	homes.delete(b)
	deleteNamespace(b, floor.name)
	return floorTime.Seconds(), floorApply.Seconds()
}

// homes are the namespaces a phase spreads its resources over: the phase's
// own namespace alone, or namespaces made for it, labelled with the
// phase's name and a random suffix so that one delete by label removes
// them.
type homes struct {
	own *namespace
	// names are the namespaces made for the phase, none when the phase
	// uses own alone; label selects them.
	names []string
	label string
}

// spreadOver returns the homes of a phase with namespace own: own alone
// for spread 1, else spread new namespaces, created at once, before the
// phase's clock starts, and deleted when the benchmark ends if the phase
// has not deleted them.
func spreadOver(b *testing.B, own *namespace, prefix string, spread int) homes {
	b.Helper()
	h := homes{own: own}
	if spread == 1 {
		return h
	}
	h.label = "memcached-bench=" + own.name
	var sb strings.Builder
	for i := range spread {
		name := fmt.Sprintf("%s-%d-%s", prefix, i, strings.TrimPrefix(own.name, prefix+"-"))
		h.names = append(h.names, name)
		fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {memcached-bench: %s}\n", name, own.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if err := cluster.Kubectl().Apply(ctx, sb.String()); err != nil {
		b.Fatal(err)
	}
	// A namespace takes pods only once the ServiceAccount controller has
	// made its default ServiceAccount: before, admission refuses them, and
	// the ReplicaSet controller retries with a back-off that grows to
	// minutes. A tenant's namespace is older than its caches, so the phase
	// starts once every namespace has one.
	sas := dynamicClient(b).Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"})
	if err := framework.Eventually(ctx, benchTimeout, "a default ServiceAccount in each namespace", func(ctx context.Context) error {
		list, err := sas.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=default"})
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, sa := range list.Items {
			have[sa.GetNamespace()] = true
		}
		for _, name := range h.names {
			if !have[name] {
				return fmt.Errorf("namespace %s has none yet", name)
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// One delete per namespace: at N=10,000 the API server, busy with the
		// window phase's rolls, takes more than kubectl's usual minute.
		ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
		defer cancel()
		if _, err := cluster.Kubectl().Run(ctx, "delete", "namespace", "-l", h.label, "--wait=false", "--ignore-not-found"); err != nil {
			b.Errorf("cleanup: %v", err)
		}
	})
	return h
}

// watch is the namespace a tracker of the phase's resources watches: own,
// or every namespace.
func (h homes) watch() string {
	if len(h.names) == 0 {
		return h.own.name
	}
	return ""
}

// apply applies the n documents that doc makes with one kubectl apply, as a
// user would: in own, or the i-th in the (i mod spread)-th namespace.
func (h homes) apply(b *testing.B, n int, doc func(i int) string) {
	b.Helper()
	if len(h.names) == 0 {
		applyAll(b, h.own.kubectl, manifests(n, doc))
		return
	}
	applyAll(b, cluster.Kubectl(), manifests(n, func(i int) string {
		return inNamespace(doc(i), h.names[i%len(h.names)])
	}))
}

// delete deletes the namespaces made for the phase and waits until they
// are gone.
func (h homes) delete(b *testing.B) {
	b.Helper()
	if len(h.names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if _, err := cluster.Kubectl().Run(ctx, "delete", "namespace", "-l", h.label, "--timeout="+benchTimeout.String()); err != nil {
		b.Fatal(err)
	}
}

// topMetadata is the start of a document's own metadata, not that of a pod
// template within it, which is indented.
var topMetadata = regexp.MustCompile(`(?m)^metadata:\n`)

// inNamespace returns docs, YAML documents, each with metadata.namespace
// namespace.
func inNamespace(docs, namespace string) string {
	return topMetadata.ReplaceAllLiteralString(docs, "metadata:\n  namespace: "+namespace+"\n")
}

// deleteNamespace deletes namespace name and waits until it is gone.
func deleteNamespace(b *testing.B, name string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if _, err := cluster.Kubectl().Run(ctx, "delete", "namespace", name, "--timeout="+benchTimeout.String()); err != nil {
		b.Fatal(err)
	}
}

// childGVRs are the resources of the children the operator may build for a
// Memcached, in the order the children floor applies them.
var childGVRs = []schema.GroupVersionResource{
	deploymentsGVR,
	{Version: "v1", Resource: "services"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
}

// operatorChildren returns the children that the operator, binary or the
// one `make build` writes, builds for a Memcached of size pods, as
// manifests for the children floor. The test module cannot call the
// operator's builders: they live in package stub, which imports
// operator-sdk v0.0.7 and client-go 1.11, while this module needs
// client-go 0.37, and a Go build holds one version of a module. So the
// operator builds them itself: it runs on one Memcached, named as the
// benchmark's first, in a namespace of its own, until the Memcached
// converges, and the children it then controls are read back. Each keeps
// its name, labels and spec, with the API server's defaults, which the
// API server would apply to the operator's request alike; it loses what
// the API server and the controllers add (uid, status, the Deployment's
// revision annotation) and its controller reference, which would make the
// garbage collector delete it, since the floor has no Memcached.
func operatorChildren(b *testing.B, dyn dynamic.Interface, binary string, size int) []*unstructured.Unstructured {
	b.Helper()
	ctx := context.Background()
	ns := newNamespace(b, "children-probe")
	ns.binary = binary
	op := ns.startOperator("--log-level=info")
	converged := newTracker(dyn, memcachedsGVR, ns.name, "", 1, memcachedReady(size))
	defer converged.stop()
	ns.apply(memcached(0, size))
	if _, err := converged.wait(convergeTimeout); err != nil {
		b.Fatal(err)
	}
	if err := op.Stop(30 * time.Second); err != nil {
		b.Fatal(err)
	}
	m, err := dyn.Resource(memcachedsGVR).Namespace(ns.name).Get(ctx, benchName(0), metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var children []*unstructured.Unstructured
	for _, gvr := range childGVRs {
		list, err := dyn.Resource(gvr).Namespace(ns.name).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range list.Items {
			if ref := metav1.GetControllerOf(&c); ref == nil || ref.UID != m.GetUID() {
				continue
			}
			labels, _, _ := unstructured.NestedFieldNoCopy(c.Object, "metadata", "labels")
			children = append(children, &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": c.GetAPIVersion(),
				"kind":       c.GetKind(),
				"metadata":   map[string]interface{}{"name": c.GetName(), "labels": labels},
				"spec":       c.Object["spec"],
			}})
		}
	}
	if len(children) == 0 || children[0].GetKind() != "Deployment" {
		b.Fatalf("the operator built no Deployment for memcached %s/%s, only %d other children", ns.name, benchName(0), len(children))
	}
	b.Logf("children floor: the operator built %d children for a Memcached of size %d", len(children), size)
	deleteNamespace(b, ns.name)
	return children
}

// childrenOf returns children, which operatorChildren read for the
// benchmark's first Memcached, as manifests for the Memcached named name:
// every string that is the first one's name becomes name. It fails b if a
// string holds the first name within a longer one, which renaming would
// miss. The pod template's hash annotation keeps the first one's value,
// which nothing in a floor reads.
func childrenOf(b *testing.B, children []*unstructured.Unstructured, name string) string {
	b.Helper()
	var sb strings.Builder
	for _, c := range children {
		renamed, err := renameStrings(c.Object, benchName(0), name)
		if err != nil {
			b.Fatalf("%s %s: %v", c.GetKind(), c.GetName(), err)
		}
		data, err := yaml.Marshal(renamed)
		if err != nil {
			b.Fatal(err)
		}
		if sb.Len() > 0 {
			sb.WriteString("---\n")
		}
		sb.Write(data)
	}
	return sb.String()
}

// renameStrings returns a copy of v, a JSON value, with every string equal
// to from replaced by to, or an error if a string holds from within it.
func renameStrings(v interface{}, from, to string) (interface{}, error) {
	switch v := v.(type) {
	case string:
		switch {
		case v == from:
			return to, nil
		case strings.Contains(v, from):
			return nil, fmt.Errorf("%q holds the name %q", v, from)
		}
		return v, nil
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			if strings.Contains(k, from) {
				return nil, fmt.Errorf("key %q holds the name %q", k, from)
			}
			r, err := renameStrings(e, from, to)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			r, err := renameStrings(e, from, to)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// benchNodes returns how many KWOK nodes n resources of size pods need.
func benchNodes(n, size int) int {
	return max(24, (n*size+benchPodsPerNode-1)/benchPodsPerNode)
}

// shippedMemoryLimit returns the memory limit of the operator's container
// in deploy/operator.yaml, after checking that the container's
// MEMORY_LIMIT is that limit, in bytes, through the downward API.
func shippedMemoryLimit(b *testing.B) int64 {
	b.Helper()
	data, err := os.ReadFile(paths.Deploy("operator.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		b.Fatalf("deploy/operator.yaml: %v", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "memcached-operator" {
			continue
		}
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			b.Fatal("deploy/operator.yaml: the operator's container has no memory limit")
		}
		for _, e := range c.Env {
			if e.Name != "MEMORY_LIMIT" {
				continue
			}
			ref := e.ValueFrom
			if ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" ||
				!(ref.ResourceFieldRef.Divisor.IsZero() || ref.ResourceFieldRef.Divisor.Value() == 1) {
				b.Fatalf("deploy/operator.yaml: MEMORY_LIMIT is %+v, want the memory limit in bytes through the downward API", e)
			}
			return limit.Value()
		}
		b.Fatal("deploy/operator.yaml: the operator's container has no MEMORY_LIMIT")
	}
	b.Fatal("deploy/operator.yaml: no container memcached-operator")
	return 0
}

// restartLikeANewLeader starts a new operator process of binary in ns,
// with the first one's settings and environment, once everything has
// converged: it lists every Memcached, child and pod, as every replica does
// when it starts, then reconciles each of the want Memcached resources
// once, as a new leader does (with leader election the two happen apart: a
// standby lists when it starts and reconciles when it takes over). It
// returns how long that took, the process's CPU and memory, and its
// profiles, named after name.
func restartLikeANewLeader(b *testing.B, ns *namespace, binary, name string, want int) newLeaderResult {
	b.Helper()
	out := filepath.Join(paths.Output(), "bench")
	r := newLeaderResult{Binary: binary, CPUProfile: filepath.Join(out, name+"-cpu.pprof"), HeapProfile: filepath.Join(out, name+"-heap.pprof")}
	op, err := framework.StartOperator(framework.OperatorConfig{
		Binary:         binary,
		Env:            ns.env,
		Kubeconfig:     ns.operatorKubeconfig,
		WatchNamespace: ns.watchNamespace(),
		LogFile:        filepath.Join(ns.dir, "operator-"+name+".log"),
		Args: []string{"--log-level=info", "--metrics-addr=127.0.0.1:0",
			"--cpuprofile=" + r.CPUProfile, "--memprofile=" + r.HeapProfile},
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	defer func() {
		if err := op.Stop(30 * time.Second); err != nil {
			b.Errorf("the restarted operator did not stop cleanly: %v\n%s", err, op.Log())
		}
	}()
	addr := metricsAddr(b, ns, op)
	awaitReconciled(b, op, addr, want, benchTimeout, "the restarted operator")
	r.Seconds = time.Since(start).Seconds()
	mem, err := framework.ProcessMemoryOf(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	r.PeakRSSBytes, r.EndRSSAnonBytes = mem.PeakRSS, mem.RSSAnon
	r.PeakLiveHeapBytes = peakLiveHeap(op.Log())
	cpu, err := framework.ProcessCPU(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	r.CPUSeconds = cpu.Seconds()
	return r
}

// gcTraceHeap matches the heap sizes of a GODEBUG=gctrace=1 line: at the
// start of the collection, at its end, and live (marked), in MiB (the
// runtime prints "MB" and shifts by 20).
var gcTraceHeap = regexp.MustCompile(`(?m)^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// peakLiveHeap returns the largest live heap in the gctrace lines of log,
// in bytes, or 0 without any.
func peakLiveHeap(log string) int64 {
	var peak int64
	for _, m := range gcTraceHeap.FindAllStringSubmatch(log, -1) {
		if live, err := strconv.ParseInt(m[3], 10, 64); err == nil {
			peak = max(peak, live<<20)
		}
	}
	return peak
}

// reconcileProgress returns, from the operator's /metrics at addr, how many
// reconciles it has run and how many keys wait in its work queue.
func reconcileProgress(ctx context.Context, addr string) (reconciles, depth float64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("the operator's /metrics: %v", err)
	}
	for _, m := range families["memcached_operator_reconcile_total"].GetMetric() {
		reconciles += m.GetCounter().GetValue()
	}
	for _, m := range families["memcached_operator_workqueue_depth"].GetMetric() {
		depth += m.GetGauge().GetValue()
	}
	return reconciles, depth, nil
}

// report prints one line per figure, next to its target, and writes r to file.
func report(b *testing.B, r benchResult, file string) {
	verdict := func(ok bool) string {
		if ok {
			return "meets"
		}
		return "MISSES"
	}
	verbs := make([]string, 0, len(r.RequestsByVerb))
	for v := range r.RequestsByVerb {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	var byVerb []string
	for _, v := range verbs {
		byVerb = append(byVerb, fmt.Sprintf("%s %.2f", v, r.RequestsByVerb[v]))
	}
	lines := []string{
		fmt.Sprintf("N=%d resources of size %d in %d namespaces, %d fake nodes", r.N, r.Size, r.Namespaces, benchNodes(r.N, r.Size)),
	}
	lines = append(lines, ratioLines(r, verdict)...)
	lines = append(lines, applyLine(r))
	lines = append(lines, phaseLines("control plane CPU     ", "", r.ControlPlaneCPU, cpuLine)...)
	lines = append(lines, phaseLines("control plane writes  ", "per resource, ", r.ControlPlaneWrites, writesLine)...)
	lines = append(lines, phaseLines("machine CPU           ", "", r.MachineCPU, machineCPU.line)...)
	lines = append(lines, phaseLines("lag                   ", "creation to convergence, ", r.Lag, lag.line)...)
	lines = append(lines,
		fmt.Sprintf("operator CPU          %.2f s during the burst; target <= %.0f s: %s", r.CPUSeconds, targetCPUSeconds, verdict(r.CPUSeconds <= targetCPUSeconds)),
		fmt.Sprintf("operator peak RSS     %.1f MiB (at the end of the burst %.1f MiB anonymous, %.1f MiB of files); target <= %d MiB: %s",
			float64(r.PeakRSSBytes)/(1<<20), float64(r.EndRSSAnonBytes)/(1<<20), float64(r.EndRSSFileBytes)/(1<<20), targetPeakRSSBytes>>20, verdict(r.PeakRSSBytes <= targetPeakRSSBytes)),
		fmt.Sprintf("operator memory       peak RSS %.1f MiB during the burst, %.1f MiB after a restart (%.1f s and %.1f CPU-s to list everything and reconcile all, %.1f MiB anonymous at its end), against the shipped limit of %.0f MiB (deploy/operator.yaml): %.0f%% and %.0f%% of it",
			float64(r.PeakRSSBytes)/(1<<20), float64(r.RestartPeakRSSBytes)/(1<<20), r.RestartSeconds, r.RestartCPUSeconds, float64(r.RestartEndRSSAnonBytes)/(1<<20), float64(r.MemoryLimitBytes)/(1<<20),
			100*float64(r.PeakRSSBytes)/float64(r.MemoryLimitBytes), 100*float64(r.RestartPeakRSSBytes)/float64(r.MemoryLimitBytes)),
		fmt.Sprintf("operator live heap    at most %.1f MiB during the burst, %.1f MiB after a restart (the collector's trace): %.1f KiB and %.1f KiB a resource",
			float64(r.PeakLiveHeapBytes)/(1<<20), float64(r.RestartPeakLiveHeapBytes)/(1<<20), float64(r.PeakLiveHeapBytes)/1024/float64(r.N), float64(r.RestartPeakLiveHeapBytes)/1024/float64(r.N)),
		fmt.Sprintf("per resource          operator CPU %.1f ms during the burst, peak RSS %.1f KiB during the burst, a new leader's live heap at most %.1f KiB",
			1000*r.CPUSeconds/float64(r.N), float64(r.PeakRSSBytes)/1024/float64(r.N), float64(r.RestartPeakLiveHeapBytes)/1024/float64(r.N)),
		fmt.Sprintf("requests per resource %.2f (%s); target <= %.0f: %s", r.RequestsPerResource, strings.Join(byVerb, ", "), targetRequestsPerItem, verdict(r.RequestsPerResource <= targetRequestsPerItem)),
		fmt.Sprintf("idle requests         %d in %.0f s, plus %d discovery requests; target %d: %s", r.IdleRequests, r.IdleSeconds, r.IdleDiscoveryRequests, targetIdleRequests, verdict(r.IdleRequests <= targetIdleRequests)),
		fmt.Sprintf("status latency        %.2f s from pods Running to status.nodes; target <= %.0f s: %s", r.LatencySeconds, targetLatencySeconds, verdict(r.LatencySeconds <= targetLatencySeconds)),
		fmt.Sprintf("profiles              go tool pprof %s; go tool pprof %s", r.CPUProfile, r.HeapProfile),
		fmt.Sprintf("  of the new leader   go tool pprof %s; go tool pprof %s", r.RestartCPUProfile, r.RestartHeapProfile),
	)
	if base := r.BaselineRestart; base != nil {
		lines = append(lines, fmt.Sprintf("baseline new leader   %s: %.1f s, %.1f CPU-s, peak RSS %.1f MiB, live heap at most %.1f MiB (%.1f KiB a resource); this build %.2fx its CPU, %.2fx its live heap",
			base.Binary, base.Seconds, base.CPUSeconds, float64(base.PeakRSSBytes)/(1<<20), float64(base.PeakLiveHeapBytes)/(1<<20), float64(base.PeakLiveHeapBytes)/1024/float64(r.N),
			r.RestartCPUSeconds/base.CPUSeconds, float64(r.RestartPeakLiveHeapBytes)/float64(base.PeakLiveHeapBytes)))
	}
	lines = append(lines, windowLines(r.Window, verdict)...)
	for _, l := range lines {
		fmt.Println("bench: " + l)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	fmt.Println("bench: wrote " + file)
	if r.FloorSeconds > 0 {
		b.ReportMetric(r.Ratio, "ratio")
	}
	if r.ChildrenFloorSeconds > 0 {
		b.ReportMetric(r.ChildrenRatio, "children-ratio")
	}
	b.ReportMetric(r.CPUSeconds, "cpu-s")
	b.ReportMetric(r.RequestsPerResource, "req/resource")
}

// ratioLines prints the ratio of the operator's time to each floor's, with
// issue 9's target, or that the floors were left out.
func ratioLines(r benchResult, verdict func(bool) string) []string {
	if r.ChildrenFloorSeconds == 0 {
		return []string{fmt.Sprintf("ratio                 not measured: BENCH_FLOOR=0 left the floors out (operator %.1f s)", r.OperatorSeconds)}
	}
	children := fmt.Sprintf("%.2f to the children floor, %d × %s (operator %.1f s / %.1f s); target <= %.2f: %s",
		r.ChildrenRatio, r.N, strings.Join(r.ChildrenFloorKinds, ", "), r.OperatorSeconds, r.ChildrenFloorSeconds, targetRatio, verdict(r.ChildrenRatio <= targetRatio))
	if r.FloorSeconds == 0 {
		return []string{"ratio                 " + children, "                      to the floor of plain Deployments: not measured (BENCH_FLOOR=children)"}
	}
	return []string{
		fmt.Sprintf("ratio                 %.2f to the floor, %d Deployments (operator %.1f s / %.1f s); target <= %.2f: %s",
			r.Ratio, r.N, r.OperatorSeconds, r.FloorSeconds, targetRatio, verdict(r.Ratio <= targetRatio)),
		"                      " + children,
	}
}

// applyLine prints how long each phase's kubectl apply took, and how long
// convergence took after it.
func applyLine(r benchResult) string {
	if r.ChildrenFloorSeconds == 0 {
		return fmt.Sprintf("kubectl apply         operator %.1f s; converged %.1f s after it", r.OperatorApplySeconds, r.OperatorSeconds-r.OperatorApplySeconds)
	}
	if r.FloorSeconds == 0 {
		return fmt.Sprintf("kubectl apply         children floor %.1f s, operator %.1f s; converged %.1f s and %.1f s after their apply",
			r.ChildrenFloorApplySeconds, r.OperatorApplySeconds, r.ChildrenFloorSeconds-r.ChildrenFloorApplySeconds, r.OperatorSeconds-r.OperatorApplySeconds)
	}
	return fmt.Sprintf("kubectl apply         floor %.1f s, children floor %.1f s, operator %.1f s; converged %.1f s, %.1f s and %.1f s after their apply",
		r.FloorApplySeconds, r.ChildrenFloorApplySeconds, r.OperatorApplySeconds,
		r.FloorSeconds-r.FloorApplySeconds, r.ChildrenFloorSeconds-r.ChildrenFloorApplySeconds, r.OperatorSeconds-r.OperatorApplySeconds)
}

// phaseLines prints one line for each phase that byPhase holds, in the
// order the benchmark runs them, the first after title and lead, the others
// aligned under it.
func phaseLines[T any](title, lead string, byPhase map[string]T, line func(T) string) []string {
	var lines []string
	for _, phase := range []string{phaseFloor, phaseChildrenFloor, phaseOperator} {
		v, ok := byPhase[phase]
		if !ok {
			continue
		}
		prefix := strings.Repeat(" ", len(title))
		if len(lines) == 0 {
			prefix = title + lead
		}
		lines = append(lines, prefix+strings.ReplaceAll(phase, "_", " ")+" "+line(v))
	}
	return lines
}

// statusLatency creates one more Memcached of size pods in ns and returns the
// time from the moment the last of its pods was seen Running to the moment
// its status listed them all, Ready.
func statusLatency(b *testing.B, dyn dynamic.Interface, ns *namespace, size int) time.Duration {
	b.Helper()
	const name = "latency-probe"
	podsRunning := newTracker(dyn, podsGVR, ns.name, "memcached_cr="+name, size, func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Running"
	})
	defer podsRunning.stop()
	listed := newTracker(dyn, memcachedsGVR, ns.name, "", 1, func(u *unstructured.Unstructured) bool {
		return u.GetName() == name && memcachedReady(size)(u)
	})
	defer listed.stop()
	ns.apply(fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %s\nspec:\n  size: %d\n", name, size))
	running, err := podsRunning.wait(convergeTimeout)
	if err != nil {
		b.Fatal(err)
	}
	done, err := listed.wait(convergeTimeout)
	if err != nil {
		b.Fatal(err)
	}
	if done.Before(running) {
		return 0
	}
	return done.Sub(running)
}

// applyAll applies manifest, a thousand objects or more, with one kubectl
// apply, as a user would; it takes longer than a kubectl call normally may.
func applyAll(b *testing.B, k framework.Kubectl, manifest string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if err := k.Apply(ctx, manifest); err != nil {
		b.Fatal(err)
	}
}

// converge runs apply and returns how long it takes, from its start, until n
// objects of gvr in namespace satisfy ready, how long apply itself took,
// and how long the objects took from their creation until ready. It fails b
// after benchTimeout.
func converge(b *testing.B, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string, n int, ready func(*unstructured.Unstructured) bool, apply func()) (total, applied time.Duration, lags lag) {
	b.Helper()
	t := newTracker(dyn, gvr, namespace, "", n, ready)
	defer t.stop()
	start := time.Now()
	apply()
	applied = time.Since(start)
	b.Logf("applied the manifest in %.1f s; waiting for %d %s", applied.Seconds(), n, gvr.Resource)
	last, err := t.wait(benchTimeout)
	if err != nil {
		b.Fatal(err)
	}
	return last.Sub(start), applied, t.lags()
}

// controlPlaneComponents are the processes of the cluster whose CPU the
// benchmark reports.
var controlPlaneComponents = []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// controlPlaneCPU returns the CPU time each control-plane process has used
// so far.
func controlPlaneCPU(b *testing.B) map[string]time.Duration {
	b.Helper()
	cpu := map[string]time.Duration{}
	for _, c := range controlPlaneComponents {
		pid, err := cluster.ComponentPID(c)
		if err != nil {
			b.Fatalf("%s: %v", c, err)
		}
		if cpu[c], err = framework.ProcessCPU(pid); err != nil {
			b.Fatalf("%s: %v", c, err)
		}
	}
	return cpu
}

// cpuSince returns, in seconds, the CPU time each control-plane process
// has used since before, what controlPlaneCPU returned earlier.
func cpuSince(b *testing.B, before map[string]time.Duration) map[string]float64 {
	b.Helper()
	seconds := map[string]float64{}
	for c, now := range controlPlaneCPU(b) {
		seconds[c] = (now - before[c]).Seconds()
	}
	return seconds
}

// apiServerWrites returns the writes the API server has served so far, by
// resource[/subresource], from its apiserver_request_total counter.
func apiServerWrites(b *testing.B) map[string]float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics, err := cluster.Kubectl().Run(ctx, "get", "--raw", "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(metrics))
	if err != nil {
		b.Fatalf("the API server's /metrics: %v", err)
	}
	writes := map[string]float64{}
	for _, sample := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range sample.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		resource := labels["resource"]
		if labels["subresource"] != "" {
			resource += "/" + labels["subresource"]
		}
		writes[resource] += sample.GetCounter().GetValue()
	}
	return writes
}

// writesSince returns the writes the API server served since before, what
// apiServerWrites returned earlier, by resource and divided by n.
func writesSince(b *testing.B, before map[string]float64, n int) map[string]float64 {
	b.Helper()
	perResource := map[string]float64{}
	for resource, count := range apiServerWrites(b) {
		if d := count - before[resource]; d > 0 {
			perResource[resource] = d / float64(n)
		}
	}
	return perResource
}

// writesLine prints a phase's writes per resource: the total, then each
// resource that took at least 0.5, most first.
func writesLine(perResource map[string]float64) string {
	var total float64
	resources := make([]string, 0, len(perResource))
	for r, w := range perResource {
		total += w
		if w >= 0.5 {
			resources = append(resources, r)
		}
	}
	sort.Slice(resources, func(i, j int) bool { return perResource[resources[i]] > perResource[resources[j]] })
	parts := make([]string, 0, len(resources))
	for _, r := range resources {
		parts = append(parts, fmt.Sprintf("%s %.1f", r, perResource[r]))
	}
	return fmt.Sprintf("%.1f (%s)", total, strings.Join(parts, ", "))
}

// cpuLine prints a phase's control-plane CPU: the total, then each
// component's share in the order of controlPlaneComponents.
func cpuLine(seconds map[string]float64) string {
	var total float64
	parts := make([]string, 0, len(controlPlaneComponents))
	for _, c := range controlPlaneComponents {
		total += seconds[c]
		parts = append(parts, fmt.Sprintf("%s %.0f", c, seconds[c]))
	}
	return fmt.Sprintf("%.0f s (%s)", total, strings.Join(parts, ", "))
}

// tracker watches one resource in a namespace, or in every namespace, and
// records when each object first satisfied a predicate. A watch costs the
// API server far less than polling a list of a thousand objects.
type tracker struct {
	want  int
	ready func(*unstructured.Unstructured) bool
	close chan struct{}

	mu    sync.Mutex
	first map[string]time.Time
	// since holds, for each object in first, how long after its
	// creationTimestamp it became ready.
	since []time.Duration
	last  time.Time
	all   chan struct{}
}

// newTracker starts a tracker that is done once want objects of gvr in
// namespace that match labelSelector (empty for all) have satisfied ready.
func newTracker(dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, labelSelector string, want int, ready func(*unstructured.Unstructured) bool) *tracker {
	t := &tracker{want: want, ready: ready, close: make(chan struct{}), first: map[string]time.Time{}, all: make(chan struct{})}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labelSelector
	})
	informer := factory.ForResource(gvr).Informer()
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj interface{}) { t.observe(obj) },
	})
	factory.Start(t.close)
	return t
}

func (t *tracker) observe(obj interface{}) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !t.ready(u) {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := u.GetNamespace() + "/" + u.GetName()
	if _, seen := t.first[key]; seen {
		return
	}
	t.first[key] = now
	t.since = append(t.since, now.Sub(u.GetCreationTimestamp().Time))
	t.last = now
	if len(t.first) == t.want {
		close(t.all)
	}
}

// wait returns when the last wanted object became ready, or an error after
// timeout that says how many did.
func (t *tracker) wait(timeout time.Duration) (time.Time, error) {
	select {
	case <-t.all:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.last, nil
	case <-time.After(timeout):
		t.mu.Lock()
		defer t.mu.Unlock()
		return time.Time{}, fmt.Errorf("after %v only %d of %d objects were ready", timeout, len(t.first), t.want)
	}
}

func (t *tracker) stop() { close(t.close) }

// lags summarises how long the objects that became ready took from their
// creation.
func (t *tracker) lags() lag {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lagOf(t.since)
}

// lag summarises how long resources took from their creation until they
// converged, in seconds. A creationTimestamp holds whole seconds, so each
// figure may be up to a second longer than the true one.
type lag struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// lagOf summarises durations, in any order.
func lagOf(durations []time.Duration) lag {
	if len(durations) == 0 {
		return lag{}
	}
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	at := func(q float64) float64 {
		return sorted[int(q*float64(len(sorted)-1))].Seconds()
	}
	return lag{Median: at(0.5), P99: at(0.99), Max: sorted[len(sorted)-1].Seconds()}
}

func (l lag) line() string {
	return fmt.Sprintf("median %.1f s, 99th percentile %.1f s, longest %.1f s", l.Median, l.P99, l.Max)
}

// machineCPU is where a phase's CPU time went outside the control plane
// and the operator, in seconds: the whole machine's busy and idle time
// (/proc/stat, every core), this benchmark's own process (its trackers'
// watches, and the counting proxy in front of the operator) and the
// kubectl processes that ended meanwhile, the phase's apply among them.
type machineCPU struct {
	Busy    float64 `json:"busy"`
	Idle    float64 `json:"idle"`
	Bench   float64 `json:"bench"`
	Kubectl float64 `json:"kubectl"`
}

// machineNow returns the machine's CPU figures so far.
func machineNow(b *testing.B) machineCPU {
	b.Helper()
	busy, idle, err := framework.MachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	self, err := framework.ProcessCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	return machineCPU{Busy: busy.Seconds(), Idle: idle.Seconds(), Bench: self.Seconds(), Kubectl: framework.KubectlCPU().Seconds()}
}

// since returns what m, taken later, adds to before.
func (m machineCPU) since(before machineCPU) machineCPU {
	return machineCPU{Busy: m.Busy - before.Busy, Idle: m.Idle - before.Idle, Bench: m.Bench - before.Bench, Kubectl: m.Kubectl - before.Kubectl}
}

func (m machineCPU) line() string {
	return fmt.Sprintf("busy %.0f s, idle %.0f s (%.0f%%); this benchmark's process %.0f s, kubectl %.0f s",
		m.Busy, m.Idle, 100*m.Idle/(m.Busy+m.Idle), m.Bench, m.Kubectl)
}

// memcachedReady is converged for a Memcached of size pods: status.nodes lists
// size pods, all Ready, for its latest generation.
func memcachedReady(size int) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		nodes, _, _ := unstructured.NestedStringSlice(u.Object, "status", "nodes")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return len(nodes) == size && ready == int64(size) && observed == u.GetGeneration()
	}
}

// deploymentReady is converged for a Deployment of size replicas: size of them
// updated and Ready, for its latest generation.
func deploymentReady(size int) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return ready == int64(size) && updated == int64(size) && observed == u.GetGeneration()
	}
}

// manifests joins n documents made by doc.
func manifests(n int, doc func(i int) string) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString("---\n")
		sb.WriteString(doc(i))
	}
	return sb.String()
}

// benchName is the name of the i-th Memcached of the benchmark, and of the
// floors' i-th Deployment.
func benchName(i int) string {
	return fmt.Sprintf("cache-%d", i)
}

// memcached is the i-th Memcached of the benchmark.
func memcached(i, size int) string {
	return fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %s\nspec:\n  size: %d\n", benchName(i), size)
}

// floorDeployment is the i-th plain Deployment of the floor: one memcached
// container, as the operator's pods have.
func floorDeployment(i, size int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: floor, floor_cr: %[1]s}
  template:
    metadata:
      labels: {app: floor, floor_cr: %[1]s}
    spec:
      containers:
        - name: memcached
          image: memcached:1.6-alpine
          command: [memcached, -m, "64", -p, "11211"]
          ports: [{name: memcached, containerPort: 11211}]
`, benchName(i), size)
}

// The keys of countRequests besides "VERB resource".
const verbDiscovery = "discovery"

// countRequests counts requests by verb and resource, such as "POST
// deployments", "PUT memcacheds/status", "LIST pods" or "WATCH pods", with
// the status code after those that failed, such as "PUT memcacheds/status
// (409)"; requests for the API's discovery documents count as "discovery".
func countRequests(reqs []framework.ProxiedRequest) map[string]int {
	counts := map[string]int{}
	for _, r := range reqs {
		counts[classify(r)]++
	}
	return counts
}

// classify names the verb and resource of a request to the API server.
func classify(r framework.ProxiedRequest) string {
	path := r.URI
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/GROUP/VERSION/...
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return verbDiscovery
	}
	resource := rest[0]
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	verb := r.Method
	switch {
	case r.Watch():
		verb = "WATCH"
	case r.Method == "GET" && len(rest) == 1:
		verb = "LIST"
	}
	if r.Code >= 300 {
		// Refused requests count too, apart: a conflict costs a round trip.
		return fmt.Sprintf("%s %s (%d)", verb, resource, r.Code)
	}
	return verb + " " + resource
}

// envInt returns the positive integer in the environment variable key, or def.
func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}
