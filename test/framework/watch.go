package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// WatchEvent is one event of `kubectl get --watch --output-watch-events -o json`.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Decode decodes the event's object into v; an ERROR event is an error.
func (ev WatchEvent) Decode(v any) error {
	if ev.Type == "ERROR" {
		return fmt.Errorf("watch error: %s", ev.Object)
	}
	return json.Unmarshal(ev.Object, v)
}

// Watch runs `kubectl get ARGS --watch --output-watch-events -o json` as k, and
// calls handle with each event, in order, starting with an ADDED event for each
// object that exists. The watch starts from the list it prints first, so it sees
// every later change, however short-lived: a test that must know a state
// happened records it from a watch opened before the change, and never polls
// for it. The returned channel receives, once, nil when ctx ended the watch, or
// why it ended before.
func (k Kubectl) Watch(ctx context.Context, handle func(WatchEvent), args ...string) (<-chan error, error) {
	full := []string{"--kubeconfig", k.Kubeconfig}
	if k.Namespace != "" {
		full = append(full, "--namespace", k.Namespace)
	}
	full = append(append(append(full, "get"), args...), "--watch", "--output-watch-events", "-o", "json")
	cmd := exec.CommandContext(ctx, k.Binary, full...)
	if k.CacheDir != "" {
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+k.CacheDir)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	// The watch must not outlive a test binary killed by its timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubectl %s: %v", strings.Join(full, " "), err)
	}
	// Killing kubectl ends the stream; closing the pipe as well keeps a child
	// that holds it open (none should) from blocking the reader or Wait.
	context.AfterFunc(ctx, func() { _ = out.Close() })
	ended := make(chan error, 1)
	go func() {
		dec := json.NewDecoder(out)
		var err error
		for {
			var ev WatchEvent
			if err = dec.Decode(&ev); err != nil {
				break
			}
			handle(ev)
		}
		if !errors.Is(err, io.EOF) {
			_ = cmd.Process.Kill() // it may block on a pipe no one reads any more
		}
		werr := cmd.Wait()
		if ctx.Err() != nil {
			ended <- nil
			return
		}
		ended <- fmt.Errorf("kubectl get %s --watch ended early (%v, %v): %s", strings.Join(args, " "), err, werr, strings.TrimSpace(stderr.String()))
	}()
	return ended, nil
}

// StatusSample is one version of a Memcached as a watch delivered it.
type StatusSample struct {
	// Generation and ObservedGeneration are metadata.generation and
	// status.observedGeneration.
	Generation, ObservedGeneration int64
	// Progressing is the Progressing condition as "Status/Reason", or
	// "absent".
	Progressing string
}

func (s StatusSample) String() string {
	return fmt.Sprintf("%s@%d/%d", s.Progressing, s.ObservedGeneration, s.Generation)
}

// StatusRecorder keeps every version of one Memcached that a watch delivers,
// from when it starts until Stop, so that a test can assert on the sequence
// of status writes instead of hoping a poll catches a short-lived one.
type StatusRecorder struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []StatusSample
	// err is why the watch failed or ended before Stop, if it did.
	err error
}

// RecordStatus starts a StatusRecorder on Memcached name and returns once the
// watch has delivered the Memcached as it is, so that every later write is
// recorded: open it before the change whose effects it is to see.
func RecordStatus(k Kubectl, name string) (*StatusRecorder, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &StatusRecorder{name: name, cancel: cancel, done: make(chan struct{})}
	first := make(chan struct{})
	var once sync.Once
	ended, err := k.Watch(ctx, func(ev WatchEvent) {
		var m Memcached
		err := ev.Decode(&m)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.err = err
			return
		}
		s := StatusSample{Generation: m.Metadata.Generation, ObservedGeneration: m.Status.ObservedGeneration, Progressing: "absent"}
		if c := m.Condition("Progressing"); c != nil {
			s.Progressing = c.Status + "/" + c.Reason
		}
		r.samples = append(r.samples, s)
		once.Do(func() { close(first) })
	}, "memcached", name)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(r.done)
		if err := <-ended; err != nil {
			r.mu.Lock()
			r.err = errors.Join(r.err, err)
			r.mu.Unlock()
		}
	}()
	select {
	case <-first:
		return r, nil
	case <-r.done:
		return nil, fmt.Errorf("the watch of memcached %s ended before it delivered the memcached: %v", name, r.failed())
	case <-time.After(CommandTimeout):
		r.Stop()
		return nil, fmt.Errorf("the watch of memcached %s delivered nothing in %v", name, CommandTimeout)
	}
}

// failed returns why the watch failed, or nil.
func (r *StatusRecorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Samples returns the versions recorded so far, in order.
func (r *StatusRecorder) Samples() []StatusSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// Progressing returns the Progressing states recorded so far, in order, with
// consecutive repeats dropped.
func (r *StatusRecorder) Progressing() []string {
	var states []string
	for _, s := range r.Samples() {
		if n := len(states); n == 0 || states[n-1] != s.Progressing {
			states = append(states, s.Progressing)
		}
	}
	return states
}

// WaitFor waits until the samples recorded so far pass check. A state that a
// GET has already shown may still be on its way through the watch; this
// waits for it there.
func (r *StatusRecorder) WaitFor(timeout time.Duration, what string, check func([]StatusSample) error) error {
	return Eventually(context.Background(), timeout, what, func(context.Context) error {
		if err := r.failed(); err != nil {
			return Permanent(fmt.Errorf("the watch of memcached %s: %v", r.name, err))
		}
		return check(r.Samples())
	})
}

// Stop ends the watch and returns once it has ended. It is safe to call more
// than once.
func (r *StatusRecorder) Stop() {
	r.cancel()
	<-r.done
}
