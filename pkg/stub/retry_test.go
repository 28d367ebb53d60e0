package stub

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestBackoffIsCappedAndNeverEnds: the n-th retry of one Memcached waits
// 5ms doubling, up to maxBackoff, for as many failures as come; a success
// starts it over.
func TestBackoffIsCappedAndNeverEnds(t *testing.T) {
	r := newRateLimiter()
	want := 5 * time.Millisecond
	var total time.Duration
	// 60 retries stay within the overall limit's burst of 100, which
	// bounds the retries of all Memcacheds together, not this one's.
	for n := 0; n < 60; n++ {
		got := r.When("test/example")
		if got != want {
			t.Fatalf("retry %d: got %v, want %v", n+1, got, want)
		}
		total += got
		if want *= 2; want > maxBackoff {
			want = maxBackoff
		}
	}
	// Hours of failing: 60 retries, the last 44 of them 5 minutes apart.
	if total < 3*time.Hour {
		t.Errorf("60 retries took %v, want the capped backoff to keep going for hours", total)
	}
	r.Forget("test/example")
	if got := r.When("test/example"); got != 5*time.Millisecond {
		t.Errorf("after a success: got %v, want 5ms", got)
	}
}

// TestRetriesNeverStop: a Memcached whose reconcile keeps failing stays in
// the queue, however many times it failed: it is never dropped, as the SDK's
// queue drops keys after 15 retries.
func TestRetriesNeverStop(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, m)
	refused := apierrors.NewForbidden(kube.DeploymentKind.Resource.GroupResource(), "example", errors.New("exceeded quota"))
	for n := 1; n <= 40; n++ {
		f.handler.handleResult(f.handler.queue, "test/example", refused)
		if got := f.handler.queue.NumRequeues("test/example"); got != n {
			t.Fatalf("after %d failures: %d requeues, want %d: the key was dropped", n, got, n)
		}
	}
	f.handler.handleResult(f.handler.queue, "test/example", nil)
	if got := f.handler.queue.NumRequeues("test/example"); got != 0 {
		t.Errorf("after a success: %d requeues, want the backoff forgotten", got)
	}
}

// panickyClient panics on the first create of a Deployment.
type panickyClient struct {
	*fakeClient
}

func (c *panickyClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	var m map[string]int
	m["boom"]++ // a nil map write: the kind of bug a reconcile must survive
	return nil, nil
}

// TestAPanicCostsOneReconcile: a reconcile that panics returns an error that
// wraps ErrPanicked, records a Warning Event, and is retried with backoff;
// the handler, and so the process, goes on.
func TestAPanicCostsOneReconcile(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, m)
	f.handler.client = &panickyClient{fakeClient: f.client}
	var observed []error
	f.handler.ObserveReconciles(func(_ time.Duration, err error) { observed = append(observed, err) })

	err := f.handle(m, false)

	if !errors.Is(err, ErrPanicked) || !strings.Contains(err.Error(), "assignment to entry in nil map") {
		t.Fatalf("reconcile: got %v, want an error wrapping ErrPanicked that says what panicked", err)
	}
	if len(observed) != 1 || !errors.Is(observed[0], ErrPanicked) {
		t.Errorf("observed %v, want the panic counted as the reconcile's outcome", observed)
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonReconcilePanicked+" ") {
		t.Errorf("events: got %q, want one Warning %s", got, ReasonReconcilePanicked)
	}
	if got := f.handler.queue.NumRequeues("test/example"); got != 1 {
		t.Errorf("requeues: got %d, want 1: a panic is retried with backoff", got)
	}
}
