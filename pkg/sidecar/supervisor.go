package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults of a Supervisor's backoff and recovery, which the pods' sidecar
// runs with.
const (
	// DefaultMinBackoff is the wait before the restart of a worker that
	// exited once: one second, so that a worker killed by accident is back
	// at once.
	DefaultMinBackoff = time.Second
	// DefaultMaxBackoff caps the wait of a worker that keeps exiting: it
	// is small, so a fault that passes (memcached restarting, a Secret
	// fixed) costs little, and a restart costs the pod no more than a
	// process start and a log line.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultStable is how long a restarted worker must run before it
	// counts as recovered. It is longer than the operator's default
	// --sidecar-poll-interval (20 s), so that every failure, even one
	// restart, shows in at least one report the operator reads.
	DefaultStable = time.Minute
)

// HealthAddr is where a supervisor (memcached-sidecar --supervise) serves
// its /healthz by default, besides ReportPort: on the pod's loopback, for
// the sidecar container's exec liveness probe (memcached-sidecar --probe).
// Any pod of the cluster reaches ReportPort, and a client that held all of
// its connections would fail a probe there and have the kubelet restart the
// container, which makes the pod NotReady; only the pod's own processes
// reach the loopback.
const HealthAddr = "127.0.0.1:9152"

// ExitMessageFD is the worker's file descriptor for its exit message: the
// Supervisor passes it the write end of a pipe there, and what the worker
// writes to it before it exits, such as the error it exits on, is reported
// with how it exited.
const ExitMessageFD = 3

// maxExitMessage bounds the exit message kept from the worker.
const maxExitMessage = 1024

// Supervisor runs the sidecar's work, the certificate refresh, the -Y
// file's reload and the stats, in a worker process, and stays up whatever
// the worker does, so that the sidecar container keeps running.
//
// That is what keeps memcached in its Service. The kubelet counts every
// container of a pod, native sidecars too, in the pod's Ready condition,
// and a container without a readiness probe is Ready only while it runs
// (kubelet 1.37, status.GenerateContainersReadyCondition and the prober
// manager's UpdatePodStatus): a sidecar container that exits, crash-loops
// or is OOM-killed would make the pod NotReady and take a memcached that
// serves out of the Service. Its worker may do all of that instead: the
// Supervisor restarts it, however it exited, after a backoff from
// MinBackoff doubling to MaxBackoff, reaps it, and reports it failing in
// the sidecar's Report (ReasonSidecarFailing) until a restart has run for
// Stable, when the problem clears and the backoff starts over. The worker
// raises its own oom_score_adj (RaiseOOMScore), so that an OOM in the
// container's memory cgroup kills it rather than the Supervisor, unless the
// Supervisor has grown the larger of the two.
type Supervisor struct {
	// Command returns the worker's command, a new one for each start,
	// with neither ExtraFiles nor a started process: the Supervisor adds
	// the exit message's pipe as ExitMessageFD.
	Command func() *exec.Cmd
	// MinBackoff and MaxBackoff bound the wait before a restart (see
	// Backoff).
	MinBackoff, MaxBackoff time.Duration
	// Stable is how long a worker must run without exiting to count as
	// recovered.
	Stable time.Duration
	// StopGrace is how long the worker has to exit after SIGTERM when
	// Run's context ends, before it is killed.
	StopGrace time.Duration
	// Log receives a line for every exit and restart.
	Log logrus.FieldLogger

	mu sync.Mutex
	// running and started say whether the worker runs and since when.
	running bool
	started time.Time
	// inARow counts the exits since a worker last ran for Stable.
	inARow int
	// restarts counts every restart since Run began.
	restarts int
	// lastExit says how the worker last exited, "" before its first exit.
	lastExit string
}

// Backoff returns the wait before the restart that follows the exits-th
// exit in a row: lo, doubled for each exit after the first, at most hi.
func Backoff(lo, hi time.Duration, exits int) time.Duration {
	d := lo
	for i := 1; i < exits && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Run starts the worker and restarts it whenever it exits, until ctx ends;
// then it sends the worker SIGTERM, waits StopGrace for it, kills it if it
// is still there, and returns once it is reaped.
func (s *Supervisor) Run(ctx context.Context) {
	for {
		exit, ran := s.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := s.exited(exit, ran)
		s.Log.Warnf("the sidecar's worker exited: %s; restarting it in %v", exit, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
}

// runOnce runs one worker until it exits or ctx ends, and returns how it
// exited, with its message, and how long it ran.
func (s *Supervisor) runOnce(ctx context.Context) (exit string, ran time.Duration) {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Sprintf("no pipe for its exit message: %v", err), 0
	}
	cmd := s.Command()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	// The worker holds its own copy; the read end sees EOF when it exits.
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Sprintf("failed to start: %v", err), 0
	}
	start := time.Now()
	s.mu.Lock()
	s.running, s.started = true, start
	s.mu.Unlock()
	message := make(chan string, 1)
	go func() {
		defer r.Close()
		b, _ := io.ReadAll(r) // a read error leaves what came before it
		message <- strings.TrimSpace(string(b[:min(len(b), maxExitMessage)]))
	}()
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // how it exited is in cmd.ProcessState
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited just now
		t := time.NewTimer(s.StopGrace)
		select {
		case <-waited:
			t.Stop()
		case <-t.C:
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	ran = time.Since(start)
	exit = cmd.ProcessState.String()
	if m := <-message; m != "" {
		exit += ": " + m
	}
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
	return exit, ran
}

// exited records an exit of a worker that ran for ran, and returns the
// wait before its restart.
func (s *Supervisor) exited(exit string, ran time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ran >= s.Stable {
		s.inARow = 0
	}
	s.inARow++
	s.lastExit = exit
	return Backoff(s.MinBackoff, s.MaxBackoff, s.inARow)
}

// Problem says why the worker is failing: it exited and has not run for
// Stable since; "" while it has not exited, or has run for Stable since.
// It names how the worker last exited, and no count or time, so that a
// worker that keeps failing the same way keeps the same problem.
func (s *Supervisor) Problem() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inARow == 0 || s.running && time.Since(s.started) >= s.Stable {
		return ""
	}
	return fmt.Sprintf("its worker exited (%s); it is restarted with backoff until it runs for %v", s.lastExit, s.Stable)
}

// State returns what the Report tells of the worker.
func (s *Supervisor) State() WorkerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return WorkerState{Running: s.running, Restarts: s.restarts, LastExit: s.lastExit}
}

// ReportHandler serves the sidecar's Report: the problem of a failing
// worker (ReasonSidecarFailing) first, then those of the Report the worker
// serves at workerURL, none while it does not answer, and the worker's
// state.
func (s *Supervisor) ReportHandler(workerURL string) http.Handler {
	client := &http.Client{Timeout: workerReportTimeout}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		state := s.State()
		r := Report{Problems: []Problem{}, Worker: &state}
		if p := s.Problem(); p != "" {
			r.Problems = append(r.Problems, Problem{Reason: ReasonSidecarFailing, Message: p})
		}
		if worker, err := FetchReport(req.Context(), client, workerURL); err == nil {
			r.Problems = append(r.Problems, worker.Problems...)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r) // a client that went away gets nothing
	})
}

// workerReportTimeout bounds the ask for the worker's report, well within
// the operator's own timeout for the whole report.
const workerReportTimeout = time.Second

// OOMScoreAdjMax is the highest oom_score_adj, which makes a process the
// first that the kernel's OOM killer picks.
const OOMScoreAdjMax = 1000

// RaiseOOMScore sets the oom_score_adj file of a process, such as
// /proc/self/oom_score_adj, to OOMScoreAdjMax. Any process may raise its
// own; lowering one takes CAP_SYS_RESOURCE, which the sidecar lacks, so the
// Supervisor stays at the kubelet's value, 1000 less the container's
// memory request per mille of the node's memory (999 or so). The OOM killer
// of the container's memory cgroup picks the process with the most memory
// plus oom_score_adj thousandths of the limit: the worker when the two are
// about the same size, or when it is the one that grew.
func RaiseOOMScore(path string) error {
	if err := os.WriteFile(path, []byte(strconv.Itoa(OOMScoreAdjMax)), 0); err != nil {
		return fmt.Errorf("failed to raise the oom_score_adj: %v", err)
	}
	return nil
}
