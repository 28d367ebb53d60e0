package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestFleetRoll changes the operator's default image under 20 Memcacheds
// that do not set spec.image, and checks that never more than
// --max-concurrent-rolls of them roll at once, through a restart of the
// operator in the middle, that a resource whose own spec changes does not
// wait for its turn, and that all end on the new template.
//
// The middle of the fleet roll is held, not hoped for: a ResourceQuota of
// exactly the pods that run admits no surge pod, so the rolls that got a
// slot cannot finish and the others wait for as long as the test needs,
// however fast the machine. The spec change and the operator's kill happen
// in that state; then the quota goes and the fleet rolls on.
func TestFleetRoll(t *testing.T) {
	t.Parallel()
	const (
		resources = 20
		size      = 2
		limit     = 3
		oldImage  = "example.com/memcached:fleet-old"
		newImage  = "example.com/memcached:fleet-new"
		// userArg is what the spec of one waiting resource gains.
		userArg = "--threads=2"
	)
	ns := newNamespace(t, slug(t.Name()))
	flags := func(image string) []string {
		return []string{"--log-level=debug", "--memcached-image=" + image, fmt.Sprintf("--max-concurrent-rolls=%d", limit)}
	}
	op := ns.startOperator(flags(oldImage)[1:]...)
	var manifest strings.Builder
	names := make([]string, resources)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%02d", i)
		fmt.Fprintf(&manifest, "---\napiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %s\nspec:\n  size: %d\n", names[i], size)
	}
	ns.apply(manifest.String())
	for _, name := range names {
		ns.waitConverged(name, size)
	}
	kube := kubeClient(t)
	sampler := startRollSampler(kube, ns.name, oldImage, newImage)
	defer sampler.stop()
	holdSurges(t, ns, resources*size)

	start := time.Now()
	if err := op.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the operator: %v", err)
	}
	if err := op.SetArgs(flags(newImage)...); err != nil {
		t.Fatal(err)
	}
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}

	// limit resources got a slot and hold it, since their surge pods are
	// refused; the others wait.
	var pending []string
	ns.eventually(fmt.Sprintf("%d resources to wait for a roll slot", resources-limit), func(ctx context.Context) error {
		var err error
		if pending, err = ns.rollPending(ctx); err != nil {
			return err
		}
		if len(pending) != resources-limit {
			return fmt.Errorf("%d resources with Progressing reason RollPending: %v", len(pending), pending)
		}
		return nil
	})

	// A resource that waits for its turn gets its own spec change at once.
	changed := pending[len(pending)-1]
	sampler.exclude(changed)
	ns.run("patch", "memcached", changed, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"extraArgs":[%q]}}`, userArg))
	ns.eventually("the changed resource's own roll to start while others still wait", func(ctx context.Context) error {
		d, err := kube.AppsV1().Deployments(ns.name).Get(ctx, changed, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != newImage || !strings.Contains(strings.Join(c.Command, " "), userArg) {
			return fmt.Errorf("deployment %s runs %s %v", changed, c.Image, c.Command)
		}
		pending, err := ns.rollPending(ctx)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return framework.Permanent(fmt.Errorf("no resource waits any more: the change of %s waited for the whole fleet", changed))
		}
		t.Logf("%s rolls for its own spec change while %d resources wait: %v", changed, len(pending), pending)
		return nil
	})

	// An operator killed in the middle of the fleet roll counts the rolls
	// in flight from the cluster when it comes back; the rest of the roll
	// then runs under the new process.
	op.Kill()
	t.Logf("killed the operator with %d of %d resources rolled and %d rolls in flight", sampler.snapshot().done, resources, limit)
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	ns.run("delete", "quota", surgeQuota)

	err := framework.Eventually(context.Background(), 5*time.Minute, "every resource to roll to "+newImage, func(ctx context.Context) error {
		if err := convergedAndComplete(ctx, ns, names, size); err != nil {
			return err
		}
		s := sampler.snapshot()
		if s.err != nil {
			return framework.Permanent(s.err)
		}
		if s.done != resources {
			return fmt.Errorf("%d of %d deployments run only Ready pods of %s", s.done, resources, newImage)
		}
		return nil
	})
	took := time.Since(start)
	s := sampler.stop()
	t.Logf("fleet roll of %d resources of size %d with --max-concurrent-rolls=%d: %s; at most %d rolling at once in %d samples",
		resources, size, limit, took.Round(100*time.Millisecond), s.max, s.samples)
	if err != nil {
		t.Fatal(err)
	}
	if s.max > limit {
		t.Errorf("%d resources rolled at once (%v), want at most %d", s.max, s.maxAt, limit)
	}
	if s.max == 0 {
		t.Errorf("no sample saw a roll in flight in %d samples: the sampler is blind", s.samples)
	}
}

// convergedAndComplete returns nil when every Memcached of names in ns has
// converged on size pods and says Progressing=False Complete: a roll that
// has ended, as a user waiting on it sees it.
func convergedAndComplete(ctx context.Context, ns *namespace, names []string, size int) error {
	for _, name := range names {
		o, err := framework.Observe(ctx, ns.kubectl, name)
		if err != nil {
			return err
		}
		if err := framework.Converged(o, size); err != nil {
			return err
		}
		if c := o.Memcached.Condition("Progressing"); c == nil || c.Status != "False" || c.Reason != "Complete" {
			return fmt.Errorf("memcached %s: Progressing %+v, want False Complete", name, c)
		}
	}
	return nil
}

// surgeQuota is the ResourceQuota of holdSurges.
const surgeQuota = "no-surge"

// holdSurges creates a ResourceQuota that admits pods pods in ns, as many as
// run there, and waits until its controller has counted them: from then on
// no surge pod is admitted, so no roll can finish until the test deletes the
// quota (surgeQuota).
func holdSurges(t *testing.T, ns *namespace, pods int) {
	t.Helper()
	ns.run("create", "quota", surgeQuota, fmt.Sprintf("--hard=pods=%d", pods))
	ns.eventually("quota "+surgeQuota+" to count the pods", func(ctx context.Context) error {
		out, err := ns.kubectl.Run(ctx, "get", "quota", surgeQuota, "-o", "jsonpath={.status.used.pods}")
		if err != nil || strings.TrimSpace(out) != strconv.Itoa(pods) {
			return fmt.Errorf("status.used.pods = %q (%v), want %d", out, err, pods)
		}
		return nil
	})
}

// rollPending returns the Memcacheds whose Progressing reason is
// RollPending, sorted by name.
func (ns *namespace) rollPending(ctx context.Context) ([]string, error) {
	var list struct{ Items []framework.Memcached }
	if err := ns.kubectl.GetJSON(ctx, &list, "memcacheds"); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range list.Items {
		if c := m.Condition("Progressing"); c != nil && c.Status == "True" && c.Reason == "RollPending" {
			out = append(out, m.Metadata.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// kubeClient returns a clientset that acts as the cluster admin.
func kubeClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rollSampler counts, over and over, the Deployments in a namespace that
// are in the middle of a roll from oldImage to newImage: their template runs
// newImage and a live pod still runs oldImage. Each sample lists the
// Deployments first and the pods after, so a Deployment counts only if it
// was rolling when its Deployment was listed: pods of an older image never
// come back in a roll (maxUnavailable 0), so a sample never counts more
// than were rolling at one moment, whatever the lag between watches.
type rollSampler struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	excluded map[string]bool
	result   rollSample
}

// rollSample is what a rollSampler has seen so far.
type rollSample struct {
	samples int
	// max is the most Deployments seen rolling in one sample, and maxAt
	// their names.
	max   int
	maxAt []string
	// done is how many Deployments the last sample saw with only Ready
	// live pods of newImage, as many as their replicas.
	done int
	err  error
}

func startRollSampler(kube kubernetes.Interface, namespace, oldImage, newImage string) *rollSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &rollSampler{cancel: cancel, done: make(chan struct{}), excluded: map[string]bool{}}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			rolling, done, err := sampleRolls(ctx, kube, namespace, oldImage, newImage)
			s.mu.Lock()
			switch {
			case err != nil && ctx.Err() == nil:
				s.result.err = err
			case err == nil:
				var counted []string
				for _, name := range rolling {
					if !s.excluded[name] {
						counted = append(counted, name)
					}
				}
				s.result.samples++
				s.result.done = done
				if len(counted) > s.result.max {
					s.result.max, s.result.maxAt = len(counted), counted
				}
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return s
}

// exclude leaves Deployment name out of the count from now on: its roll is
// its resource's own.
func (s *rollSampler) exclude(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.excluded[name] = true
}

func (s *rollSampler) snapshot() rollSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// stop ends the sampling and returns what it saw.
func (s *rollSampler) stop() rollSample {
	s.cancel()
	<-s.done
	return s.snapshot()
}

// sampleRolls returns the Deployments rolling from oldImage to newImage and
// how many have finished.
func sampleRolls(ctx context.Context, kube kubernetes.Interface, namespace, oldImage, newImage string) (rolling []string, done int, err error) {
	deployments, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=memcached"})
	if err != nil {
		return nil, 0, err
	}
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=memcached"})
	if err != nil {
		return nil, 0, err
	}
	type count struct{ old, readyNew int }
	counts := map[string]*count{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c := counts[p.Labels["memcached_cr"]]
		if c == nil {
			c = &count{}
			counts[p.Labels["memcached_cr"]] = c
		}
		switch p.Spec.Containers[0].Image {
		case oldImage:
			c.old++
		case newImage:
			if podReady(p) {
				c.readyNew++
			}
		}
	}
	for _, d := range deployments.Items {
		if d.Spec.Template.Spec.Containers[0].Image != newImage {
			continue
		}
		c := counts[d.Name]
		if c == nil {
			c = &count{}
		}
		switch {
		case c.old > 0:
			rolling = append(rolling, d.Name)
		case d.Spec.Replicas != nil && int32(c.readyNew) >= *d.Spec.Replicas:
			done++
		}
	}
	sort.Strings(rolling)
	return rolling, done, nil
}

// podReady reports whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
