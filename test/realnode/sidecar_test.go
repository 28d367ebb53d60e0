package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// The sidecar's supervisor (pkg/sidecar's DefaultMaxBackoff and DefaultStable):
// a worker that exited is restarted within workerMaxBackoff, and counts as
// recovered, its SidecarFailing problem gone, once it has run for workerStable.
const (
	workerMaxBackoff = 30 * time.Second
	workerStable     = time.Minute
	// workerKills is how many times the test kills the sidecar's worker, each
	// restart as soon as it appears: a crash loop, as the supervisor's backoff
	// grows with each exit in a row.
	workerKills = 4
)

// TestSidecarFailureKeepsMemcachedServing kills the sidecar's worker process
// (the work of cmd/memcached-sidecar, under its --supervise process) of a
// Memcached with monitoring, and of one with TLS, auth and monitoring, from the
// host, each new one as soon as it appears, at least workerKills times and until
// the Memcached says Degraded=True SidecarFailing naming the pod and the kill,
// while the sidecar's own report says the worker failing with its restarts.
// Throughout, from before the first kill until the end, a watch of the pod and
// of its Service's EndpointSlices checks every change the API server makes: a
// single one where the pod is not Ready, a container restarted, or the pod's
// endpoint is missing or not ready fails the test. Left alone, the worker
// recovers: within its backoff, workerStable and reportBudget, the sidecar
// serves memcached's stats again (through TLS and the login where they are on)
// and Degraded clears, and no container restarted.
func TestSidecarFailureKeepsMemcachedServing(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	certPEM, keyPEM, _ := ca.issue(t, 100)
	applySecret(t, admin, "crash-secured-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	applySecret(t, admin, "crash-secured-users", "Opaque", map[string][]byte{"passwords": []byte("app:password\n")})
	for _, tt := range []struct{ name, spec string }{
		{"crash-monitored", "size: 1\nmonitoring: {enabled: true}"},
		{"crash-secured", "size: 1\ntls: {secretName: crash-secured-tls}\nauth: {secretName: crash-secured-users}\nmonitoring: {enabled: true}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			crashLoopTheSidecar(t, tt.name, tt.spec)
		})
	}
}

func crashLoopTheSidecar(t *testing.T, name, spec string) {
	ctx := context.Background()
	applyMemcachedSpec(t, admin, name, spec)
	o := waitServing(t, name, 1)
	before := restartCounts(o)
	pod := o.Pods[0]
	podName := pod.Metadata.Name
	framework.DumpOnFailure(t, func() string {
		out, err := admin.Run(context.Background(), "logs", podName, "-c", "sidecar", "--tail=40")
		return "===== kubectl logs " + podName + " -c sidecar (tail)\n" + out + errText(err)
	})
	supervisor, err := containerProcess(ctx, pod, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if limit, err := memoryLimit(supervisor); err != nil || limit != 64<<20 {
		t.Errorf("the sidecar container's memory limit: %d, %v; want 64Mi", limit, err)
	}

	w, err := watchServing(name, podName, before)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		w.stop()
		t.Logf("pod %s: %s", podName, w.summary())
		for _, v := range w.violations {
			t.Errorf("pod %s stopped serving: %s", podName, v)
		}
	}()

	killed := map[int]bool{}
	start := time.Now()
	var degraded *framework.Condition
	var report sidecarReport
	err = framework.Eventually(ctx, reportBudget+workerKills*workerMaxBackoff, fmt.Sprintf("%d kills of the sidecar's worker and Degraded=True SidecarFailing naming pod %s", workerKills, podName), func(ctx context.Context) error {
		// Kill every new worker as soon as it runs, so that none runs for
		// workerStable while this waits, and the failure stays.
		pid, err := workerOf(supervisor)
		if err != nil {
			return err
		}
		if pid != 0 && !killed[pid] {
			if len(killed) == 0 {
				if adj, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "oom_score_adj")); err != nil || strings.TrimSpace(string(adj)) != "1000" {
					t.Errorf("the worker's oom_score_adj: %q, %v; want 1000, above its supervisor's", adj, err)
				}
				if env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ")); err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "GOMEMLIMIT=24MiB") {
					t.Errorf("the worker's environment has no GOMEMLIMIT=24MiB (%v)", err)
				}
				t.Logf("pod %s: resident memory of the supervisor %s, of its worker %s", podName, residentMemory(supervisor), residentMemory(pid))
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return err
			}
			killed[pid] = true
			t.Logf("+%v: killed worker %d of pod %s (%d)", time.Since(start).Round(time.Second), pid, podName, len(killed))
		}
		if len(killed) < workerKills {
			return fmt.Errorf("%d kills", len(killed))
		}
		if report, err = getSidecarReport(ctx, pod); err != nil {
			return err
		}
		if len(report.Problems) == 0 || report.Problems[0].Reason != "SidecarFailing" || !strings.Contains(report.Problems[0].Message, "signal: killed") ||
			report.Worker == nil || report.Worker.Restarts < workerKills-1 || report.Worker.LastExit != "signal: killed" {
			return fmt.Errorf("the sidecar's report: %+v, worker %+v", report.Problems, report.Worker)
		}
		degraded, err = sidecarDegraded(ctx, name, "SidecarFailing", "pod "+podName+": sidecar: ", "signal: killed")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("+%v, %d kills: Degraded=True %s: %s; the sidecar reports %d restarts", time.Since(start).Round(time.Second), len(killed), degraded.Reason, degraded.Message, report.Worker.Restarts)
	if current, err := containerProcess(ctx, pod, "sidecar"); err != nil || current != supervisor {
		t.Errorf("the sidecar container's process: %d, %v; want its supervisor %d still", current, err, supervisor)
	}

	// Left alone, the worker is back within its backoff, and recovered once it
	// has run for workerStable.
	start = time.Now()
	requireHealedWithoutRestart(ctx, t, admin, name, before, start, workerMaxBackoff+workerStable+reportBudget, "the sidecar to serve memcached's stats again", func(ctx context.Context) error {
		page, err := scrapeSidecar(ctx, pod)
		if err != nil {
			return err
		}
		if value(page, "memcached_up") != 1 {
			return fmt.Errorf("the sidecar's memcached_up is %v", value(page, "memcached_up"))
		}
		r, err := getSidecarReport(ctx, pod)
		if err != nil {
			return err
		}
		if len(r.Problems) != 0 || r.Worker == nil || !r.Worker.Running {
			return fmt.Errorf("the sidecar's report: %+v, worker %+v", r.Problems, r.Worker)
		}
		return nil
	})
	if current, err := containerProcess(ctx, pod, "sidecar"); err != nil || current != supervisor {
		t.Errorf("the sidecar container's process: %d, %v; want its supervisor %d still", current, err, supervisor)
	}
}

// residentMemory returns the VmRSS line of process pid, or why there is none.
func residentMemory(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rss, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(rss)
		}
	}
	return "unknown"
}

// sidecarReport is the sidecar's report (pkg/sidecar's Report).
type sidecarReport struct {
	Problems []struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"problems"`
	Worker *struct {
		Running  bool   `json:"running"`
		Restarts int    `json:"restarts"`
		LastExit string `json:"lastExit"`
	} `json:"worker"`
}

// getSidecarReport GETs the report of pod p's sidecar from the host, as the
// operator does.
func getSidecarReport(ctx context.Context, p framework.Pod) (sidecarReport, error) {
	var r sidecarReport
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(sidecarMetricsPort)) + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return r, json.Unmarshal(b, &r)
}

// workerOf returns the host pid of the sidecar's worker, the child of its
// supervisor (the container's process) that runs with --worker, or 0 while
// there is none; a worker that exited and awaits its reaping is none.
func workerOf(supervisor int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		// PID (COMM) STATE PPID ...
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(supervisor) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), "--worker") {
			return pid, nil
		}
	}
	return 0, nil
}

// servingWatch watches one pod of a Memcached and its Service's EndpointSlices,
// and records every event after which the pod does not serve: not Ready, being
// deleted, a container's restart count other than before's, or its endpoint
// missing or not ready. A watch sees every change the API server makes, so a
// NotReady however short is recorded, never sampled away.
type servingWatch struct {
	pod     string
	before  map[string]int
	cancel  context.CancelFunc
	watches []<-chan error
	start   time.Time

	mu         sync.Mutex
	slices     map[string]endpointSlice
	events     map[string]int
	violations []string
}

// watchServing starts a servingWatch of pod of Memcached name, whose container
// restart counts are before (by pod/container, as restartCounts gives them).
func watchServing(name, pod string, before map[string]int) (*servingWatch, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &servingWatch{pod: pod, before: before, cancel: cancel, start: time.Now(), slices: map[string]endpointSlice{}, events: map[string]int{}}
	for _, watch := range []struct {
		what   string
		handle func(framework.WatchEvent) error
		args   []string
	}{
		{"pod", w.onPod, []string{"pod", pod}},
		{"endpointslices", w.onSlice, []string{"endpointslices", "-l", "kubernetes.io/service-name=" + name}},
	} {
		what, handle := watch.what, watch.handle
		ended, err := admin.Watch(ctx, func(ev framework.WatchEvent) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events[what]++
			if err := handle(ev); err != nil {
				w.violations = append(w.violations, fmt.Sprintf("+%v after a %s %s event: %v", time.Since(w.start).Round(10*time.Millisecond), what, ev.Type, err))
			}
		}, watch.args...)
		if err != nil {
			w.stop()
			return nil, err
		}
		w.watches = append(w.watches, ended)
	}
	return w, nil
}

// onPod checks a pod event.
func (w *servingWatch) onPod(ev framework.WatchEvent) error {
	var p framework.Pod
	if err := ev.Decode(&p); err != nil {
		return err
	}
	switch {
	case ev.Type == "DELETED" || p.Metadata.DeletionTimestamp != nil:
		return fmt.Errorf("the pod is going")
	case !p.Ready():
		return fmt.Errorf("the pod is not Ready: %+v", p.Status.Conditions)
	}
	for _, c := range p.Status.ContainerStatuses {
		if n := w.before[p.Metadata.Name+"/"+c.Name]; c.RestartCount != n {
			return fmt.Errorf("container %s restarted: %d restarts, %d before", c.Name, c.RestartCount, n)
		}
	}
	return nil
}

// onSlice applies an EndpointSlice event and checks the pod's endpoint.
func (w *servingWatch) onSlice(ev framework.WatchEvent) error {
	var sl endpointSlice
	if err := ev.Decode(&sl); err != nil {
		return err
	}
	if ev.Type == "DELETED" {
		delete(w.slices, sl.Metadata.Name)
	} else {
		w.slices[sl.Metadata.Name] = sl
	}
	all, ready, err := endpointsOf(slices.Collect(maps.Values(w.slices)))
	if err != nil {
		return err
	}
	for _, ep := range all {
		if ep.Pod == w.pod {
			if !ready[ep.id()] {
				return fmt.Errorf("the pod's endpoint %s is not ready", ep.addr())
			}
			return nil
		}
	}
	return fmt.Errorf("the pod has no endpoint among %v", all)
}

// stop ends the watches, and records how one ended if it ended before.
func (w *servingWatch) stop() {
	w.cancel()
	for _, ended := range w.watches {
		if err := <-ended; err != nil {
			w.violations = append(w.violations, "the watch ended early: "+err.Error())
		}
	}
	w.watches = nil
}

// summary says how much the watch saw.
func (w *servingWatch) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d pod and %d EndpointSlice events in %v, every one Ready, in the endpoints as ready and without a restart unless reported",
		w.events["pod"], w.events["endpointslices"], time.Since(w.start).Round(time.Second))
}
