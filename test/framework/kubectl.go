package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
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
		usage.ran(command(args), cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	if err != nil {
		return stdout.String(), &CommandError{Args: append([]string{"kubectl"}, full...), Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

// usage counts the kubectl processes this test binary ran, by command, the
// CPU time they used, and the reads GetJSON made in-process instead.
var usage kubectlUsage

type kubectlUsage struct {
	mu        sync.Mutex
	byCommand map[string]int64
	cpu       time.Duration
	inProcess int64
}

func (u *kubectlUsage) ran(command string, cpu time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byCommand == nil {
		u.byCommand = map[string]int64{}
	}
	u.byCommand[command]++
	u.cpu += cpu
}

func (u *kubectlUsage) read() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inProcess++
}

// command names a kubectl call for KubectlUsage: its verb, and for get its
// resource ("get pods").
func command(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		words = append(words, a)
		if len(words) == 2 || words[0] != "get" {
			break
		}
	}
	return strings.Join(words, " ")
}

// KubectlUsage says how many kubectl processes the test binary has run, with
// the most frequent commands, the CPU time (user and system) they used, and how
// many reads GetJSON made in-process: on a 2-core machine the polls of many
// tests at once cost real time, and a suite prints this at its end.
func KubectlUsage() string {
	usage.mu.Lock()
	defer usage.mu.Unlock()
	type count struct {
		command string
		n       int64
	}
	var counts []count
	var calls int64
	for c, n := range usage.byCommand {
		counts = append(counts, count{c, n})
		calls += n
	}
	sort.Slice(counts, func(i, j int) bool {
		if counts[i].n != counts[j].n {
			return counts[i].n > counts[j].n
		}
		return counts[i].command < counts[j].command
	})
	var top []string
	for i, c := range counts {
		if i == 8 {
			break
		}
		top = append(top, fmt.Sprintf("%s %d", c.command, c.n))
	}
	return fmt.Sprintf("%d kubectl calls used %s of CPU (%s); %d reads in-process",
		calls, usage.cpu.Round(time.Second), strings.Join(top, ", "), usage.inProcess)
}

// KubectlCPU returns the CPU time, user and system, of the kubectl
// processes the test binary has run to their end so far.
func KubectlCPU() time.Duration {
	usage.mu.Lock()
	defer usage.mu.Unlock()
	return usage.cpu
}

// Apply applies a manifest given as text.
func (k Kubectl) Apply(ctx context.Context, manifest string) error {
	_, err := k.RunWithInput(ctx, manifest, "apply", "-f", "-")
	return err
}

// GetJSON decodes into v what `kubectl get ARGS -o json` prints. The suites
// poll with it in many tests at once, so the forms they use (a resource of
// readResources, with a name or with -l, --field-selector and -A) are read
// in-process, as Observe reads; any other form runs kubectl.
func (k Kubectl) GetJSON(ctx context.Context, v any, args ...string) error {
	if r, ok := parseGet(args); ok {
		return k.getJSON(ctx, v, r)
	}
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
