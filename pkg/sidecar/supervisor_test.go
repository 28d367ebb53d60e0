package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// testWorkerEnv makes the test binary a worker for the Supervisor's tests
// (see testWorker) instead of running the tests; testReadyEnv names the
// folder where a worker that waits for signals says it does.
const (
	testWorkerEnv = "SIDECAR_TEST_WORKER"
	testReadyEnv  = "SIDECAR_TEST_READY"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(testWorkerEnv); mode != "" {
		testWorker(mode)
	}
	os.Exit(m.Run())
}

// testWorker runs as a worker of the Supervisor's tests and exits:
//   - exit: leaves the exit message "boom" and exits 3;
//   - run: runs until SIGTERM, then exits 0;
//   - hang: runs until it is killed, ignoring SIGTERM;
//   - oom: raises its oom_score_adj and prints it.
//
// run and hang create the file of their pid in the folder testReadyEnv
// names once they handle SIGTERM: a SIGTERM before would end them with the
// signal.
func testWorker(mode string) {
	ready := func() {
		_ = os.WriteFile(filepath.Join(os.Getenv(testReadyEnv), strconv.Itoa(os.Getpid())), nil, 0o600) // the test waits for it
	}
	switch mode {
	case "exit":
		writeTestExitMessage("boom")
		os.Exit(3)
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		ready()
		<-ctx.Done()
		os.Exit(0)
	case "hang":
		signal.Ignore(syscall.SIGTERM)
		ready()
		time.Sleep(time.Hour)
		os.Exit(1)
	case "oom":
		if err := RaiseOOMScore("/proc/self/oom_score_adj"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(string(b))
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", testWorkerEnv, mode)
	os.Exit(2)
}

func writeTestExitMessage(m string) {
	f := os.NewFile(ExitMessageFD, "exit-message")
	defer f.Close()
	fmt.Fprintln(f, m)
}

// workers starts test workers of mode for a Supervisor and keeps their
// commands, which the tests read only after the Supervisor's state shows
// that it started or reaped them: its lock orders those reads after its
// writes.
type workers struct {
	mode string
	// ready is the folder of testReadyEnv.
	ready string
	mu    sync.Mutex
	cmds  []*exec.Cmd
}

func newWorkers(t *testing.T, mode string) *workers {
	return &workers{mode: mode, ready: t.TempDir()}
}

func (w *workers) command() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testWorkerEnv+"="+w.mode, testReadyEnv+"="+w.ready)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cmds = append(w.cmds, cmd)
	return cmd
}

func (w *workers) get(i int) *exec.Cmd {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmds[i]
}

// handlesSIGTERM reports whether worker i said it handles SIGTERM.
func (w *workers) handlesSIGTERM(i int) bool {
	_, err := os.Stat(filepath.Join(w.ready, strconv.Itoa(w.get(i).Process.Pid)))
	return err == nil
}

// startSupervisor runs s until the test ends, and returns a function that
// stops it and waits for Run to return.
func startSupervisor(t *testing.T, s *Supervisor) (stop func()) {
	t.Helper()
	if s.Log == nil {
		s.Log, _ = test.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds, failing the test after a minute: the
// workers take a process start each, however slow the machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		exits int
		want  time.Duration
	}{
		{exits: 1, want: time.Second},
		{exits: 2, want: 2 * time.Second},
		{exits: 3, want: 4 * time.Second},
		{exits: 5, want: 16 * time.Second},
		{exits: 6, want: 30 * time.Second},
		{exits: 7, want: 30 * time.Second},
		{exits: 1000, want: 30 * time.Second},
	}
	for _, tt := range tests {
		if got := Backoff(DefaultMinBackoff, DefaultMaxBackoff, tt.exits); got != tt.want {
			t.Errorf("Backoff after %d exits: got %v, want %v", tt.exits, got, tt.want)
		}
	}
}

// TestSupervisorRestartsWithBackoffAndReaps: a worker that exits at once is
// restarted after a wait that doubles with every exit in a row up to the
// cap, every exit is logged with its status and the worker's message, and
// every worker that exited is reaped, none left a zombie.
func TestSupervisorRestartsWithBackoffAndReaps(t *testing.T) {
	w := newWorkers(t, "exit")
	log, hook := test.NewNullLogger()
	s := &Supervisor{Command: w.command, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Stable: time.Hour, StopGrace: time.Second, Log: log}
	stop := startSupervisor(t, s)
	waitFor(t, "fifth restart", func() bool { return s.State().Restarts >= 5 })
	stop()

	var waits []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			waits = append(waits, e.Message)
		}
	}
	want := []string{}
	for _, d := range []string{"1ms", "2ms", "4ms", "4ms", "4ms"} {
		want = append(want, "the sidecar's worker exited: exit status 3: boom; restarting it in "+d)
	}
	if len(waits) < len(want) || !reflect.DeepEqual(waits[:len(want)], want) {
		t.Errorf("log:\n got %q\nwant %q first", waits, want)
	}
	for i := range 5 {
		cmd := w.get(i)
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
			t.Errorf("worker %d: state %v, want reaped with exit status 3", i, cmd.ProcessState)
			continue
		}
		if state, ppid, err := procStat(cmd.Process.Pid); err == nil && state == "Z" && ppid == os.Getpid() {
			t.Errorf("worker %d (pid %d) is a zombie of the supervisor", i, cmd.Process.Pid)
		}
	}
	if got, want := s.Problem(), "its worker exited (exit status 3: boom); it is restarted with backoff until it runs for 1h0m0s"; got != want {
		t.Errorf("problem: got %q, want %q", got, want)
	}
}

// procStat returns the state and parent of process pid, from /proc/PID/stat.
func procStat(pid int) (state string, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	// PID (COMM) STATE PPID ...; COMM may hold spaces and parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return "", 0, fmt.Errorf("malformed /proc/%d/stat: %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err
}

// TestSupervisorReportsAFailingWorker: the sidecar's report says
// SidecarFailing, naming how the worker exited, before the problems of the
// worker's own report, both while the worker waits for its restart and
// once it runs again, until it has run for Stable; the worker's state says
// whether it runs, its restarts and its last exit.
func TestSupervisorReportsAFailingWorker(t *testing.T) {
	workerProblem := Problem{Reason: ReasonCertificateRefreshFailed, Message: "memcached refused to reload its certificate: refresh_certs: ERROR"}
	workerReport := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(Report{Problems: []Problem{workerProblem}})
	}))
	defer workerReport.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	tests := []struct {
		name string
		mode string
		// kill kills the first worker once it runs.
		kill bool
		// minBackoff is long where the worker must stay down.
		minBackoff time.Duration
		workerURL  string
		want       Report
	}{
		{
			name: "down until its restart", mode: "exit", minBackoff: time.Hour, workerURL: gone.URL,
			want: Report{
				Problems: []Problem{{Reason: ReasonSidecarFailing, Message: "its worker exited (exit status 3: boom); it is restarted with backoff until it runs for 1h0m0s"}},
				Worker:   &WorkerState{Running: false, Restarts: 0, LastExit: "exit status 3: boom"},
			},
		},
		{
			name: "killed, then running again", mode: "run", kill: true, minBackoff: time.Millisecond, workerURL: workerReport.URL,
			want: Report{
				Problems: []Problem{
					{Reason: ReasonSidecarFailing, Message: "its worker exited (signal: killed); it is restarted with backoff until it runs for 1h0m0s"},
					workerProblem,
				},
				Worker: &WorkerState{Running: true, Restarts: 1, LastExit: "signal: killed"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkers(t, tt.mode)
			s := &Supervisor{Command: w.command, MinBackoff: tt.minBackoff, MaxBackoff: time.Hour, Stable: time.Hour, StopGrace: time.Second}
			startSupervisor(t, s)
			if tt.kill {
				waitFor(t, "running worker", func() bool { return s.State().Running })
				if got := s.Problem(); got != "" {
					t.Errorf("problem before any exit: got %q, want none", got)
				}
				if err := w.get(0).Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "worker state "+fmt.Sprint(*tt.want.Worker), func() bool { return s.State() == *tt.want.Worker })

			rec := httptest.NewRecorder()
			s.ReportHandler(tt.workerURL+ReportPath).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReportPath, nil))
			var got Report
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %q: %v", ReportPath, rec.Code, rec.Body.String(), err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("report:\n got %+v %+v\nwant %+v %+v", got.Problems, got.Worker, tt.want.Problems, tt.want.Worker)
			}
		})
	}
}

// TestSupervisorProblemClearsOnceTheWorkerRuns: the problem of a killed
// worker clears once its restart has run for Stable, and no worker before
// it had exited.
func TestSupervisorProblemClearsOnceTheWorkerRuns(t *testing.T) {
	w := newWorkers(t, "run")
	s := &Supervisor{Command: w.command, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Stable: 50 * time.Millisecond, StopGrace: time.Second}
	startSupervisor(t, s)
	waitFor(t, "running worker", func() bool { return s.State().Running })
	if err := w.get(0).Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart", func() bool { return s.State().Restarts == 1 })
	waitFor(t, "problem to clear", func() bool { return s.Problem() == "" })
	if got, want := s.State(), (WorkerState{Running: true, Restarts: 1, LastExit: "signal: killed"}); got != want {
		t.Errorf("state: got %+v, want %+v", got, want)
	}
}

// TestSupervisorStopsItsWorker: when Run's context ends, the worker gets
// SIGTERM, and one that ignores it is killed after StopGrace; Run returns
// once the worker is reaped, and starts none again.
func TestSupervisorStopsItsWorker(t *testing.T) {
	tests := []struct {
		mode string
		// stopGrace is long where the worker must have the time to exit,
		// however slow the machine.
		stopGrace time.Duration
		want      string
	}{
		{mode: "run", stopGrace: time.Minute, want: "exit status 0"},
		{mode: "hang", stopGrace: 100 * time.Millisecond, want: "signal: killed"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			w := newWorkers(t, tt.mode)
			s := &Supervisor{Command: w.command, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Stable: time.Hour, StopGrace: tt.stopGrace}
			stop := startSupervisor(t, s)
			waitFor(t, "running worker", func() bool { return s.State().Running })
			waitFor(t, "the worker to handle SIGTERM", func() bool { return w.handlesSIGTERM(0) })
			stop()
			cmd := w.get(0)
			if cmd.ProcessState == nil || cmd.ProcessState.String() != tt.want {
				t.Errorf("worker: got %v, want reaped, %s", cmd.ProcessState, tt.want)
			}
			if got := s.State(); got.Running || got.Restarts != 0 {
				t.Errorf("state after Run returned: got %+v, want no worker running and no restart", got)
			}
		})
	}
}

// TestRaiseOOMScore: a process raises its own oom_score_adj to the most,
// without any capability.
func TestRaiseOOMScore(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testWorkerEnv+"=oom")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(OOMScoreAdjMax) {
		t.Errorf("oom_score_adj: got %s, want %d", got, OOMScoreAdjMax)
	}
}
