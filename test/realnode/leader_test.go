package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// failoverBudget is how soon after the leader crashes the standby must hold the
// Lease and have applied a change made while nobody led.
const failoverBudget = 20 * time.Second

// TestLeaderFailover deploys the operator as `make deploy` does, two replicas
// electing a leader on a Lease, to a namespace of its own, and crashes the leader
// twice: SIGKILL of its process on the real node, then a forced delete of its pod,
// so that the pod that replaces it is a new standby. Right after each kill it
// scales the Memcached. Each time a standby must hold the Lease and have scaled
// the Deployment within failoverBudget of the kill; the change must end applied;
// there must be one Deployment, created once; the Lease must count one
// transition; and the standby must not have restarted.
//
// The new leader is usually the standby, but may be the pod that the ReplicaSet
// starts in place of the killed one: each candidate waits a lease duration from
// when it first saw the last renewal, and a replacement that starts within a
// second of the kill can see it before the standby's next look.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := deployOperatorNamespace(t, "leader-failover", memcachedImage)
	createMemcached(t, k, "failover", 1)
	waitConverged(t, k, "failover", 1)
	var deploymentUID string
	requireOneDeployment(t, k, "failover", &deploymentUID)

	for round, size := range []int{2, 1} {
		leader, standby := leaderAndStandby(t, k)
		before, err := getLease(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := containerProcess(ctx, leader, operatorName)
		if err != nil {
			t.Fatal(err)
		}
		// When the Deployment was scaled is taken from a watch, which
		// delivers the change within milliseconds, not from the poll below,
		// whose kubectl calls take a second or more on a loaded machine.
		scaled, stopWatch, err := watchReplicas(k, "failover", size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stopWatch)

		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill leader process %d: %v", pid, err)
		}
		killed := time.Now()
		if _, err := k.Run(ctx, "delete", "pod", leader.Metadata.Name, "--grace-period=0", "--force"); err != nil {
			t.Fatal(err)
		}
		// A change made while nobody leads.
		if _, err := k.Run(ctx, "scale", "memcached/failover", "--replicas="+strconv.Itoa(size)); err != nil {
			t.Fatal(err)
		}

		var tookOver time.Duration
		var successor string
		err = framework.EventuallyEvery(ctx, 3*failoverBudget, 100*time.Millisecond, "a standby to lead and scale deployment failover to "+strconv.Itoa(size), func(ctx context.Context) error {
			if tookOver == 0 {
				l, err := getLease(ctx, k)
				if err != nil {
					return err
				}
				if l.Spec.HolderIdentity == leader.Metadata.Name {
					return fmt.Errorf("lease still held by the killed leader %s", leader.Metadata.Name)
				}
				// An empty holder is a released Lease, not a successor: the
				// kubelet may restart the killed container before it sees the
				// pod's deletion, and that container, which resumes its own
				// Lease, releases it when the kubelet then stops it.
				if l.Spec.HolderIdentity == "" {
					return errors.New("lease released, nobody leads yet")
				}
				tookOver = time.Since(killed)
				successor = l.Spec.HolderIdentity
			}
			var d framework.Deployment
			if err := k.GetJSON(ctx, &d, "deployment", "failover"); err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != size {
				return fmt.Errorf("deployment failover spec.replicas = %v", framework.Deref(d.Spec.Replicas))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		at, err := scaled(readyTimeout)
		stopWatch()
		if err != nil {
			t.Fatal(err)
		}
		applied := at.Sub(killed)
		role := "the standby"
		if successor != standby.Metadata.Name {
			role = "the pod that replaced it"
		}
		t.Logf("round %d: killed leader %s (pid %d); %s, %s, held the lease after %v and had scaled deployment failover to %d after %v",
			round+1, leader.Metadata.Name, pid, role, successor, tookOver.Round(100*time.Millisecond), size, applied.Round(100*time.Millisecond))
		if err := requireLiveOperatorPod(ctx, k, successor); err != nil {
			t.Errorf("round %d: %v", round+1, err)
		}
		if applied > failoverBudget {
			t.Errorf("round %d: failover took %v, want at most %v", round+1, applied.Round(100*time.Millisecond), failoverBudget)
		}

		after, err := getLease(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if after.Spec.LeaseTransitions != before.Spec.LeaseTransitions+1 {
			t.Errorf("round %d: leaseTransitions %d, want %d", round+1, after.Spec.LeaseTransitions, before.Spec.LeaseTransitions+1)
		}
		waitConverged(t, k, "failover", size)
		requireOneDeployment(t, k, "failover", &deploymentUID)
		if now, err := operatorPods(ctx, k); err == nil {
			for _, p := range now {
				if p.Metadata.UID == standby.Metadata.UID && restarts(p) != restarts(standby) {
					t.Errorf("round %d: the standby %s restarted to take over (%d restarts, had %d)", round+1, p.Metadata.Name, restarts(p), restarts(standby))
				}
			}
		}
	}
}

// watchReplicas starts a watch of Deployment name and returns a function
// that waits up to a timeout for the moment the watch delivered it with
// spec.replicas size, and one that stops the watch. The Deployment must not
// have size yet.
func watchReplicas(k framework.Kubectl, name string, size int) (func(time.Duration) (time.Time, error), func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	at := make(chan time.Time, 1)
	ended, err := k.Watch(ctx, func(ev framework.WatchEvent) {
		var d framework.Deployment
		if ev.Decode(&d) == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == size {
			select {
			case at <- time.Now():
			default: // only the first counts
			}
		}
	}, "deployment", name)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	wait := func(timeout time.Duration) (time.Time, error) {
		select {
		case t := <-at:
			return t, nil
		case err := <-ended:
			return time.Time{}, fmt.Errorf("the watch of deployment %s ended before it showed %d replicas: %v", name, size, err)
		case <-time.After(timeout):
			return time.Time{}, fmt.Errorf("the watch of deployment %s showed no %d replicas in %v", name, size, timeout)
		}
	}
	return wait, cancel, nil
}

// requireLiveOperatorPod fails unless name is a live operator pod of k's namespace.
func requireLiveOperatorPod(ctx context.Context, k framework.Kubectl, name string) error {
	pods, err := operatorPods(ctx, k)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pods, func(p framework.Pod) bool { return p.Metadata.Name == name }) {
		return fmt.Errorf("the lease is held by %q, which is not a live operator pod", name)
	}
	return nil
}

// lease is the part of a coordination.k8s.io/v1 Lease that the tests read.
type lease struct {
	Spec struct {
		HolderIdentity       string `json:"holderIdentity"`
		LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
		RenewTime            string `json:"renewTime"`
		LeaseTransitions     int    `json:"leaseTransitions"`
	} `json:"spec"`
}

func getLease(ctx context.Context, k framework.Kubectl) (lease, error) {
	var l lease
	err := k.GetJSON(ctx, &l, "lease", operatorName)
	return l, err
}

// leaderAndStandby waits until k's namespace has two live operator pods, both
// Running and Ready, one of them holding the Lease, and returns them.
func leaderAndStandby(t *testing.T, k framework.Kubectl) (leader, standby framework.Pod) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, "a Ready leader and a Ready standby", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d live operator pods, want 2", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != "Running" || !p.Ready() {
				return fmt.Errorf("operator pod %s is %s, ready %t", p.Metadata.Name, p.Status.Phase, p.Ready())
			}
		}
		holder, err := leaseHolder(ctx, k)
		if err != nil {
			return err
		}
		switch holder {
		case pods[0].Metadata.Name:
			leader, standby = pods[0], pods[1]
		case pods[1].Metadata.Name:
			leader, standby = pods[1], pods[0]
		default:
			return fmt.Errorf("lease held by %q, neither of %s and %s", holder, pods[0].Metadata.Name, pods[1].Metadata.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return leader, standby
}

// waitConverged is waitServing for a Memcached in any namespace: its Deployment,
// size Running and Ready pods on the real node, and a status that lists them.
func waitConverged(t *testing.T, k framework.Kubectl, name string, size int) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, fmt.Sprintf("memcached %s to serve with %d Ready pods", name, size), func(ctx context.Context) error {
		o, err := framework.Observe(ctx, k, name)
		if err != nil {
			return err
		}
		return framework.Converged(o, size)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// requireOneDeployment fails unless the namespace holds exactly one Deployment
// besides the operator's, Memcached name's, and it is the one of the first call,
// whose UID it keeps in *uid: no replica deleted it or created a second one.
func requireOneDeployment(t *testing.T, k framework.Kubectl, name string, uid *string) {
	t.Helper()
	ctx := context.Background()
	var deployments struct{ Items []framework.Deployment }
	if err := k.GetJSON(ctx, &deployments, "deployments"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range deployments.Items {
		if d.Metadata.Name == operatorName {
			continue
		}
		names = append(names, d.Metadata.Name)
		if d.Metadata.Name != name {
			continue
		}
		if *uid == "" {
			*uid = d.Metadata.UID
		} else if d.Metadata.UID != *uid {
			t.Errorf("deployment %s has uid %s, want %s: it was deleted and created again", name, d.Metadata.UID, *uid)
		}
	}
	if !slices.Equal(names, []string{name}) {
		t.Errorf("deployments %v, want only %s", names, name)
	}
}

// restarts returns the restart count of a pod's operator container.
func restarts(p framework.Pod) int {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == operatorName {
			return c.RestartCount
		}
	}
	return 0
}

// handOverBudget is the longest a rollout may leave the Memcacheds without a
// leader: from when the old leader stops taking work to when the next leads.
const handOverBudget = 3 * time.Second

// leaseDuration is deploy/operator.yaml's --leader-elect-lease-duration (the
// default): how long a standby waits after it sees the Lease change.
const leaseDuration = 12 * time.Second

// TestLeaderHandOverOnRollout restarts the operator's two replicas with
// `kubectl rollout restart` and reads, from the runtime's timestamps on every
// replica's log, when each one led: never two at once, and each hand-over
// leaves less than handOverBudget between the old leader stopping its workers
// and the next one leading, because the old leader releases the Lease once
// its workers are done. The new leader then scales a Memcached.
func TestLeaderHandOverOnRollout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := deployOperatorNamespace(t, "leader-handover", memcachedImage)
	createMemcached(t, k, "handover", 1)
	waitConverged(t, k, "handover", 1)
	leader, standby := leaderAndStandby(t, k)
	logs := followOperatorLogs(t, k)
	logs.waitFor(t, leader.Metadata.Name, msgLeading)
	logs.waitFor(t, standby.Metadata.Name, msgWaiting)

	if _, err := k.Run(ctx, "rollout", "restart", "deployment/"+operatorName); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, "rollout", "status", "deployment/"+operatorName, "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	newLeader, _ := leaderAndStandby(t, k)
	logs.waitFor(t, newLeader.Metadata.Name, msgLeading)
	logs.waitSettled(t)
	spans := logs.stop()

	t.Logf("leading spans:\n%s", formatSpans(spans))
	requireOneLeaderAtATime(t, spans)
	handOvers := 0
	for i := 1; i < len(spans); i++ {
		prev, next := spans[i-1], spans[i]
		if prev.stopping.IsZero() {
			t.Errorf("%s stopped leading without handing over: %s", prev.pod, prev)
			continue
		}
		handOvers++
		gap := next.start.Sub(prev.stopping)
		t.Logf("hand-over %d: %s stopped its workers, released the lease %v later, and %s led %v after the stop", handOvers, prev.pod, prev.end.Sub(prev.stopping).Round(time.Millisecond), next.pod, gap.Round(time.Millisecond))
		if gap >= handOverBudget {
			t.Errorf("hand-over from %s to %s left %v without a leader, want under %v", prev.pod, next.pod, gap.Round(time.Millisecond), handOverBudget)
		}
	}
	if handOvers == 0 || spans[len(spans)-1].pod != newLeader.Metadata.Name {
		t.Errorf("want at least one hand-over ending with %s leading", newLeader.Metadata.Name)
	}
	if _, err := k.Run(ctx, "scale", "memcached/handover", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, k, "handover", 2)
}

// TestOutsideLeaseChange deletes the operator's Lease, then writes the
// standby's name into it as its holder, as someone forcing a failover by hand
// would. Each time, the leader must stop leading and stand by, without its
// container restarting, within a few seconds, well before its renew
// deadline; no replica may lead again before a lease duration has passed
// since the change, so that two never lead at once, as every replica's log
// shows; and a replica must lead again afterwards.
func TestOutsideLeaseChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := deployOperatorNamespace(t, "leader-outside-change", memcachedImage)
	logs := followOperatorLogs(t, k)
	for _, change := range []struct {
		name string
		args func(standby string) []string
	}{
		{"kubectl delete lease", func(string) []string { return []string{"delete", "lease", operatorName} }},
		{"holder set to the standby", func(standby string) []string {
			return []string{"patch", "lease", operatorName, "--type=merge", "-p", `{"spec":{"holderIdentity":"` + standby + `"}}`}
		}},
	} {
		leader, standby := leaderAndStandby(t, k)
		logs.waitFor(t, leader.Metadata.Name, msgLeading)
		before := len(logs.spans())
		// The change takes effect somewhere during the kubectl call: a lower
		// bound is measured from its start, an upper one from its end, so
		// that kubectl's own time, a second or two on a loaded machine,
		// counts for neither.
		changed := time.Now()
		if _, err := k.Run(ctx, change.args(standby.Metadata.Name)...); err != nil {
			t.Fatal(err)
		}
		applied := time.Now()
		err := framework.Eventually(ctx, 3*leaseDuration, "a replica to lead again after "+change.name, func(ctx context.Context) error {
			spans := logs.spans()
			if len(spans) < before+1 || !spans[len(spans)-1].open || !spans[len(spans)-1].start.After(changed) {
				return fmt.Errorf("no replica leads since the change; leading spans:\n%s", formatSpans(spans))
			}
			return requireLiveOperatorPod(ctx, k, spans[len(spans)-1].pod)
		})
		if err != nil {
			t.Fatal(err)
		}
		logs.waitSettled(t)
		spans := logs.spans()
		requireOneLeaderAtATime(t, spans)
		old, next := spans[before-1], spans[len(spans)-1]
		if old.pod != leader.Metadata.Name || old.open {
			t.Fatalf("%s: want the leading span of %s closed, got %s", change.name, leader.Metadata.Name, old)
		}
		stopped, waited := old.end.Sub(applied), next.start.Sub(changed)
		t.Logf("%s: the kubectl call took %v; leader %s stopped %v after it returned; %s led %v after it started", change.name, applied.Sub(changed).Round(time.Millisecond),
			leader.Metadata.Name, stopped.Round(time.Millisecond), next.pod, waited.Round(time.Millisecond))
		// The leader renews every second and stops at the first renewal
		// that sees the change, not at its 8s renew deadline.
		if stopped > 4*time.Second {
			t.Errorf("%s: the leader stopped %v after the change, want within 4s", change.name, stopped.Round(time.Millisecond))
		}
		if waited < leaseDuration {
			t.Errorf("%s: %s led %v after the change, before the lease duration %v", change.name, next.pod, waited.Round(time.Millisecond), leaseDuration)
		}
		if err := requireNoRestart(ctx, k, leader); err != nil {
			t.Errorf("%s: %v", change.name, err)
		}
	}
	logs.stop()
}

// requireNoRestart fails unless the operator container of pod p, as it was
// listed before, has not restarted since: a replica that lost the Lease
// stands by in the same process.
func requireNoRestart(ctx context.Context, k framework.Kubectl, p framework.Pod) error {
	pods, err := operatorPods(ctx, k)
	if err != nil {
		return err
	}
	for _, now := range pods {
		if now.Metadata.UID == p.Metadata.UID {
			if restarts(now) != restarts(p) {
				return fmt.Errorf("the operator container of %s restarted (%d restarts, had %d)", p.Metadata.Name, restarts(now), restarts(p))
			}
			return nil
		}
	}
	return fmt.Errorf("operator pod %s is gone", p.Metadata.Name)
}

// Log messages that mark when an operator process leads.
const (
	msgStarting = `msg="starting memcached-operator`
	msgWaiting  = `msg="waiting for lease`
	msgLeading  = `msg="leading: `
	msgStopping = `msg="stopping: `
	msgReleased = `msg="released lease`
	msgLost     = `msg="lost the leader lease`
	msgFatal    = `level=fatal`
)

// logLine is one line of a container's log with the runtime's timestamp.
type logLine struct {
	at   time.Time
	text string
}

// operatorLogs follows the operator container's log of every operator pod of
// a namespace, including pods that appear later and containers the kubelet
// restarts, until stop.
type operatorLogs struct {
	k      framework.Kubectl
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	lines  map[string][]logLine
	seen   map[string]bool
}

func followOperatorLogs(t *testing.T, k framework.Kubectl) *operatorLogs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &operatorLogs{k: k, cancel: cancel, lines: map[string][]logLine{}, seen: map[string]bool{}}
	t.Cleanup(func() { l.stop() })
	followed := map[string]bool{}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			var pods struct{ Items []framework.Pod }
			if err := k.GetJSON(ctx, &pods, "pods", "-l", "app.kubernetes.io/name="+operatorName); err == nil {
				for _, p := range pods.Items {
					if !followed[p.Metadata.Name] {
						followed[p.Metadata.Name] = true
						l.wg.Add(1)
						go l.follow(ctx, p.Metadata.Name)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return l
}

// follow streams pod's operator log, again each time the stream ends (the
// container exited and may be restarted), until ctx is done or the pod is
// gone. Lines already seen are skipped.
func (l *operatorLogs) follow(ctx context.Context, pod string) {
	defer l.wg.Done()
	for ctx.Err() == nil {
		cmd := exec.CommandContext(ctx, l.k.Binary, "--kubeconfig", l.k.Kubeconfig, "--namespace", l.k.Namespace,
			"logs", "--follow", "--timestamps", pod, "-c", operatorName)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return
		}
		if err := cmd.Start(); err != nil {
			return
		}
		scanner := bufio.NewScanner(out)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		for scanner.Scan() {
			l.add(pod, scanner.Text())
		}
		_ = cmd.Wait()
		if strings.Contains(stderr.String(), "NotFound") || strings.Contains(stderr.String(), "not found") {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (l *operatorLogs) add(pod, raw string) {
	stamp, text, ok := strings.Cut(raw, " ")
	if !ok {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if key := pod + " " + raw; !l.seen[key] {
		l.seen[key] = true
		l.lines[pod] = append(l.lines[pod], logLine{at, text})
	}
}

// stop ends the following and returns the leading spans seen.
func (l *operatorLogs) stop() []leadSpan {
	l.cancel()
	l.wg.Wait()
	return l.spans()
}

// waitSettled waits until every leading span but the last is closed. The
// logs of the pods are separate streams: the line in which an old leader
// released the Lease can arrive after the next leader's first, however long
// ago it was written. A span still open at the deadline stays open, for the
// caller's checks to report.
func (l *operatorLogs) waitSettled(t *testing.T) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, "every leading span but the last to close", func(context.Context) error {
		spans := l.spans()
		for _, s := range spans[:max(0, len(spans)-1)] {
			if s.open {
				return fmt.Errorf("still open: %s; leading spans:\n%s", s, formatSpans(spans))
			}
		}
		return nil
	})
	if err != nil {
		t.Log(err)
	}
}

// waitFor returns once pod's log has a line containing msg.
func (l *operatorLogs) waitFor(t *testing.T, pod, msg string) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, fmt.Sprintf("%q in the log of %s", msg, pod), func(context.Context) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, line := range l.lines[pod] {
			if strings.Contains(line.text, msg) {
				return nil
			}
		}
		return fmt.Errorf("%d lines so far", len(l.lines[pod]))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// leadSpan is when one operator process led: from its "leading" line to
// its release or loss of the Lease, its fatal exit, or its last line before
// the container restarted; open if none of these came yet. A process that
// lost the Lease stands by and may lead again: a span of its own.
type leadSpan struct {
	pod   string
	start time.Time
	// stopping is when it began to hand over (SIGTERM), if it did.
	stopping time.Time
	end      time.Time
	open     bool
}

func (s leadSpan) String() string {
	stopping, end := "-", "still leading"
	if !s.stopping.IsZero() {
		stopping = s.stopping.Format("15:04:05.000")
	}
	if !s.open {
		end = s.end.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s: led %s, stopping %s, ended %s", s.pod, s.start.Format("15:04:05.000"), stopping, end)
}

// spans returns the leading spans in the logs so far, by start.
func (l *operatorLogs) spans() []leadSpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	var spans []leadSpan
	for pod, lines := range l.lines {
		lines = slices.Clone(lines)
		slices.SortStableFunc(lines, func(a, b logLine) int { return a.at.Compare(b.at) })
		var cur *leadSpan
		closeAt := func(at time.Time) {
			cur.end, cur.open = at, false
			spans = append(spans, *cur)
			cur = nil
		}
		for i, line := range lines {
			switch {
			case strings.Contains(line.text, msgStarting) && cur != nil && i > 0:
				closeAt(lines[i-1].at) // restarted without a last word
			case strings.Contains(line.text, msgLeading):
				cur = &leadSpan{pod: pod, start: line.at, open: true}
			case cur == nil:
			case strings.Contains(line.text, msgStopping):
				cur.stopping = line.at
			case strings.Contains(line.text, msgReleased), strings.Contains(line.text, msgLost), strings.Contains(line.text, msgFatal):
				closeAt(line.at)
			}
		}
		if cur != nil {
			spans = append(spans, *cur)
		}
	}
	slices.SortFunc(spans, func(a, b leadSpan) int { return a.start.Compare(b.start) })
	return spans
}

// requireOneLeaderAtATime fails unless each span ends before the next begins.
func requireOneLeaderAtATime(t *testing.T, spans []leadSpan) {
	t.Helper()
	for i := 1; i < len(spans); i++ {
		if prev := spans[i-1]; prev.open || !prev.end.Before(spans[i].start) {
			t.Errorf("two replicas led at once: %s, then %s", prev, spans[i])
		}
	}
}

func formatSpans(spans []leadSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	return b.String()
}
