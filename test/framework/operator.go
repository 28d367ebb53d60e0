package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// OperatorConfig says how to run the operator binary as a local process, the way
// `make run` (the SDK's `up local`) does.
type OperatorConfig struct {
	// Binary is the operator executable.
	Binary string
	// Kubeconfig is passed as KUBERNETES_CONFIG. Use a ServiceAccount kubeconfig
	// (Cluster.ServiceAccountKubeconfig) so that deploy/rbac.yaml is what is tested.
	Kubeconfig string
	// WatchNamespace is passed as WATCH_NAMESPACE.
	WatchNamespace string
	// LogFile receives the operator's standard output and error, appended across
	// restarts.
	LogFile string
	// Args are extra command-line flags.
	Args []string
	// Env are extra KEY=VALUE environment entries.
	Env []string
	// Stamped prefixes every line of the log with the time it was read
	// from the process, in RFC 3339 with nanoseconds and a space, as
	// `kubectl logs --timestamps` shows a container's: the operator's own
	// timestamps have whole seconds, too coarse to order the logs of two
	// processes.
	Stamped bool
}

// Operator is a running (or stopped) operator process.
type Operator struct {
	cfg  OperatorConfig
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// StartOperator starts the operator described by cfg.
func StartOperator(cfg OperatorConfig) (*Operator, error) {
	if err := RequireFiles("make build", cfg.Binary); err != nil {
		return nil, err
	}
	o := &Operator{cfg: cfg}
	return o, o.Start()
}

// Start starts the process again after Stop or Kill. It fails if it is running.
func (o *Operator) Start() error {
	if o.Running() {
		return errors.New("operator is already running")
	}
	if err := os.MkdirAll(filepath.Dir(o.cfg.LogFile), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(o.cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "----- %s starting %s %v (WATCH_NAMESPACE=%s)\n", time.Now().Format(time.RFC3339), o.cfg.Binary, o.cfg.Args, o.cfg.WatchNamespace)
	var out io.Writer = logf
	if o.cfg.Stamped {
		// Not a file: exec copies the output through a pipe, and Wait
		// returns once the copy is done.
		out = &stampedLines{w: logf}
	}

	cmd := exec.Command(o.cfg.Binary, o.cfg.Args...)
	cmd.Env = append(os.Environ(),
		"KUBERNETES_CONFIG="+o.cfg.Kubeconfig,
		"WATCH_NAMESPACE="+o.cfg.WatchNamespace,
	)
	cmd.Env = append(cmd.Env, o.cfg.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	// The operator must not outlive the test binary, even one killed by a timeout
	// or a signal, or it would keep retrying against a deleted cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start operator: %v", err)
	}
	o.cmd, o.done, o.err = cmd, make(chan struct{}), nil
	go func(done chan struct{}) {
		o.err = cmd.Wait()
		logf.Close()
		close(done)
	}(o.done)
	return nil
}

// stampedLines writes each complete line written to it to w, prefixed with
// the time and a space (see OperatorConfig.Stamped). exec calls Write from
// one goroutine.
type stampedLines struct {
	w       io.Writer
	partial []byte
}

func (s *stampedLines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			break
		}
		line := append(s.partial, p[:i+1]...)
		s.partial = nil
		if _, err := fmt.Fprintf(s.w, "%s %s", time.Now().Format(time.RFC3339Nano), line); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// SetArgs replaces the extra command-line flags for the next Start, as a
// new version of the operator's Deployment would. It fails while the
// process runs.
func (o *Operator) SetArgs(args ...string) error {
	if o.Running() {
		return errors.New("operator is running: stop it before changing its flags")
	}
	o.cfg.Args = args
	return nil
}

// Running reports whether the process is running.
func (o *Operator) Running() bool {
	if o.done == nil {
		return false
	}
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// Pid returns the process id of the last start.
func (o *Operator) Pid() int {
	if o.cmd == nil || o.cmd.Process == nil {
		return 0
	}
	return o.cmd.Process.Pid
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills the process.
// It returns the exit error of a process that did not exit cleanly (nil for exit 0).
func (o *Operator) Stop(timeout time.Duration) error {
	if !o.Running() {
		return o.exitErr()
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM) // it may exit between Running and here
	select {
	case <-o.done:
		return o.exitErr()
	case <-time.After(timeout):
		_ = o.cmd.Process.Kill()
		<-o.done
		return fmt.Errorf("operator did not exit within %s of SIGTERM; killed", timeout)
	}
}

// Kill sends SIGKILL, as a crash or an OOM kill would, and waits for the exit.
func (o *Operator) Kill() {
	if !o.Running() {
		return
	}
	_ = o.cmd.Process.Kill()
	<-o.done
}

func (o *Operator) exitErr() error {
	if o.done == nil {
		return nil
	}
	<-o.done
	return o.err
}

// Log returns the operator's log so far.
func (o *Operator) Log() string {
	data, err := os.ReadFile(o.cfg.LogFile)
	if err != nil {
		return fmt.Sprintf("(cannot read operator log %s: %v)", o.cfg.LogFile, err)
	}
	return string(data)
}

// LogFile returns the path of the operator's log.
func (o *Operator) LogFile() string { return o.cfg.LogFile }
