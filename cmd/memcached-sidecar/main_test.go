package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/sirupsen/logrus"
)

// asSidecarEnv makes the test binary the sidecar (see TestMain): the
// worker of TestSupervisedWorker is the test binary, which the supervisor
// starts as its own executable.
const asSidecarEnv = "MEMCACHED_SIDECAR_TEST_AS_SIDECAR"

func TestMain(m *testing.M) {
	if os.Getenv(asSidecarEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRunRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "nothing to do", args: nil, want: "nothing to do"},
		{name: "TLS to another host", args: []string{"--tls-dir=/tls", "--memcached=198.18.0.5:11211"}, want: "must be a loopback IP address"},
		{name: "TLS to a host name", args: []string{"--tls-dir=/tls", "--memcached=localhost:11211"}, want: "must be a loopback IP address"},
		{name: "no port", args: []string{"--metrics-addr=:9150", "--memcached=127.0.0.1"}, want: "missing port"},
		{name: "zero interval", args: []string{"--tls-dir=/tls", "--refresh-interval=0s"}, want: "must be positive"},
		{name: "negative retry", args: []string{"--tls-dir=/tls", "--refresh-retry=-1s"}, want: "must not be negative"},
		{name: "unknown flag", args: []string{"--verify"}, want: "not defined"},
		{name: "metrics and status apart", args: []string{"--tls-dir=/tls", "--metrics-addr=:9150", "--status-addr=:9151"}, want: "not both"},
		{name: "supervisor without a server", args: []string{"--tls-dir=/tls", "--supervise"}, want: "set --metrics-addr or --status-addr"},
		{name: "supervisor and worker at once", args: []string{"--tls-dir=/tls", "--status-addr=:9150", "--supervise", "--worker"}, want: "set one of them"},
		{name: "worker on another host", args: []string{"--tls-dir=/tls", "--status-addr=:9150", "--supervise", "--worker-addr=198.18.0.5:9151"}, want: "must be a loopback IP address"},
		{name: "worker without a port", args: []string{"--tls-dir=/tls", "--status-addr=:9150", "--supervise", "--worker-addr=127.0.0.1"}, want: "missing port"},
		{name: "health on the pod's IP", args: []string{"--tls-dir=/tls", "--status-addr=:9150", "--supervise", "--health-addr=:9152"}, want: "--health-addr=:9152 must be a loopback IP address"},
		{name: "probe with other flags", args: []string{"--probe=127.0.0.1:9152", "--tls-dir=/tls"}, want: "set it alone"},
		{name: "probe without a port", args: []string{"--probe=127.0.0.1"}, want: "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSupervisedWorker runs the sidecar as the pods do, with --supervise:
// its worker, this executable with --worker and the other flags, runs with
// the highest oom_score_adj and serves the metrics that the supervisor
// passes on; killed, it is restarted, while the supervisor keeps answering
// /healthz, and --probe of its loopback health server succeeds, and its
// report says SidecarFailing with the worker's state; on SIGTERM the
// supervisor stops the worker and returns, and --probe fails.
func TestSupervisedWorker(t *testing.T) {
	t.Setenv(asSidecarEnv, "1")
	logrus.SetOutput(io.Discard)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })
	addr, workerAddr, healthAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	// memcached is nowhere: the stats say memcached_up 0.
	args := []string{"--supervise", "--metrics-addr=" + addr, "--worker-addr=" + workerAddr, "--health-addr=" + healthAddr, "--memcached=" + freeAddr(t)}
	ran := make(chan error, 1)
	go func() { ran <- run(args) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM) // caught by run, which is running
			<-ran
		}
	})

	base := "http://" + addr
	var worker int
	waitFor(t, "the worker to serve its metrics through the supervisor", func() error {
		if _, err := get(base + "/metrics"); err != nil {
			return err
		}
		pids, err := workers()
		if err != nil || len(pids) != 1 {
			return fmt.Errorf("workers %v: %v", pids, err)
		}
		worker = pids[0]
		return nil
	})
	page, _ := get(base + "/metrics")
	if !strings.Contains(page, "memcached_up 0") {
		t.Errorf("/metrics through the supervisor: got\n%s\nwant memcached_up 0", page)
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(worker), "oom_score_adj")); err != nil || strings.TrimSpace(string(b)) != "1000" {
		t.Errorf("the worker's oom_score_adj: %q, %v; want 1000", b, err)
	}
	if r := report(t, base); len(r.Problems) != 0 || r.Worker == nil || !r.Worker.Running || r.Worker.Restarts != 0 {
		t.Errorf("report before any exit: %+v %+v, want no problem, the worker running", r.Problems, r.Worker)
	}

	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed worker's restart", func() error {
		r := report(t, base)
		if r.Worker == nil || !r.Worker.Running || r.Worker.Restarts != 1 {
			return fmt.Errorf("worker %+v", r.Worker)
		}
		return nil
	})
	r := report(t, base)
	want := "its worker exited (signal: killed); it is restarted with backoff until it runs for 1m0s"
	if len(r.Problems) != 1 || r.Problems[0].Reason != sidecar.ReasonSidecarFailing || r.Problems[0].Message != want || r.Worker.LastExit != "signal: killed" {
		t.Errorf("report after the restart: %+v %+v, want %s %q", r.Problems, r.Worker, sidecar.ReasonSidecarFailing, want)
	}
	if body, err := get(base + "/healthz"); err != nil || body != "ok\n" {
		t.Errorf("/healthz: %q, %v; want ok", body, err)
	}
	if err := run([]string{"--probe=" + healthAddr}); err != nil {
		t.Errorf("--probe=%s: %v, want success", healthAddr, err)
	}
	pids, err := workers()
	if err != nil || len(pids) != 1 || pids[0] == worker {
		t.Errorf("workers after the restart: %v, %v; want one new one", pids, err)
	}

	stopped = true
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Errorf("run after SIGTERM: %v", err)
	}
	if err := run([]string{"--probe=" + healthAddr}); err == nil {
		t.Errorf("--probe=%s after the supervisor returned: success, want a failure", healthAddr)
	}
	if pids, err := workers(); err != nil || len(pids) != 0 {
		t.Errorf("workers after run returned: %v, %v; want none", pids, err)
	}
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// workers returns the pids of this process's children that run as the
// sidecar's worker, zombies left out.
func workers() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "\x00--worker\x00") {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func get(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), err
}

func report(t *testing.T, base string) sidecar.Report {
	t.Helper()
	var r sidecar.Report
	body, err := get(base + sidecar.ReportPath)
	if err == nil {
		err = json.Unmarshal([]byte(body), &r)
	}
	if err != nil {
		t.Fatalf("GET %s: %v", sidecar.ReportPath, err)
	}
	return r
}

// waitFor polls cond until it returns nil, failing the test after a
// minute: a restart takes the supervisor's first backoff (1 s) and a
// process start, however slow the machine.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
