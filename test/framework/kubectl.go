package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// CommandTimeout bounds each kubectl call whose context has no deadline.
var CommandTimeout = 60 * time.Second

// Kubectl runs a kubectl binary against one kubeconfig, optionally in one namespace.
// It is a value: WithNamespace returns a copy.
type Kubectl struct {
	// Binary is the kubectl to run.
	Binary string
	// Kubeconfig is passed as --kubeconfig, so $KUBECONFIG and ~/.kube/config are
	// never used.
	Kubeconfig string
	// Namespace, when set, is passed as --namespace.
	Namespace string
	// CacheDir, when set, is kubectl's discovery cache (KUBECACHEDIR) instead of
	// ~/.kube/cache.
	CacheDir string
}

// WithNamespace returns a copy of k that runs in namespace ns.
func (k Kubectl) WithNamespace(ns string) Kubectl {
	k.Namespace = ns
	return k
}

// Run runs kubectl with args and returns its standard output. On failure the error
// holds the command line and standard error.
func (k Kubectl) Run(ctx context.Context, args ...string) (string, error) {
	return k.RunWithInput(ctx, "", args...)
}

// RunWithInput runs kubectl with stdin as its standard input.
func (k Kubectl) RunWithInput(ctx context.Context, stdin string, args ...string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CommandTimeout)
		defer cancel()
	}
	full := append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	if k.Namespace != "" {
		full = append([]string{"--namespace", k.Namespace}, full...)
	}
	cmd := exec.CommandContext(ctx, k.Binary, full...)
	if k.CacheDir != "" {
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+k.CacheDir)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		kubectlCalls.Add(1)
		kubectlCPU.Add(int64(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()))
	}
	if err != nil {
		return stdout.String(), &CommandError{Args: append([]string{"kubectl"}, full...), Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

// kubectlCalls and kubectlCPU count the kubectl processes this test binary
// ran and the CPU time they used, for KubectlUsage.
var kubectlCalls, kubectlCPU atomic.Int64

// KubectlUsage returns how many kubectl processes the test binary has run and
// the CPU time (user and system) they used: on a 2-core machine the polls of
// many tests at once cost real time, and a suite prints this at its end.
func KubectlUsage() (calls int64, cpu time.Duration) {
	return kubectlCalls.Load(), time.Duration(kubectlCPU.Load())
}

// Apply applies a manifest given as text.
func (k Kubectl) Apply(ctx context.Context, manifest string) error {
	_, err := k.RunWithInput(ctx, manifest, "apply", "-f", "-")
	return err
}

// GetJSON runs `kubectl get ARGS -o json` and decodes the result into v.
func (k Kubectl) GetJSON(ctx context.Context, v any, args ...string) error {
	out, err := k.Run(ctx, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("decode kubectl get %s: %v", strings.Join(args, " "), err)
	}
	return nil
}

// CommandError is a failed command with its standard error.
type CommandError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// IsNotFound reports whether err is a kubectl error, or a read's, for a missing
// object.
func IsNotFound(err error) bool {
	if apierrors.IsNotFound(err) {
		return true
	}
	ce, ok := err.(*CommandError)
	return ok && strings.Contains(ce.Stderr, "(NotFound)")
}
