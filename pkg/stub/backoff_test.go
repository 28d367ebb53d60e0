package stub

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
)

// flakyWebhookClient refuses every Deployment create with an error whose
// text differs on every call, as the API server does when a validating
// webhook cannot be reached, so that every attempt writes a new Degraded
// message. It keeps the Memcached that the last status write stored, for
// the test to deliver as the SDK delivers that write's update event.
type flakyWebhookClient struct {
	*fakeClient
	calls   int
	written *v1alpha1.Memcached
}

func (c *flakyWebhookClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	if k != kube.DeploymentKind {
		return c.fakeClient.ApplyNew(k, manifest)
	}
	c.calls++
	return nil, apierrors.NewInternalError(fmt.Errorf(`failed calling webhook "deployments.policy.example.com": `+
		`Post "https://policy.example.svc:443/validate?timeout=10s": dial tcp 198.18.0.7:443: connect: connection refused (attempt %d)`, c.calls))
}

func (c *flakyWebhookClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error) {
	stored, err := c.fakeClient.UpdateMemcachedStatus(m)
	if err == nil {
		c.written = stored.DeepCopy()
	}
	return stored, err
}

// backoffAttempts is how many attempts the Handler's documented backoff
// allows one failing Memcached within window: the first, then a retry after
// 5ms, 10ms, 20ms ... each counted from the end of the previous attempt.
func backoffAttempts(window time.Duration) int {
	attempts := 1
	var elapsed time.Duration
	for delay := 5 * time.Millisecond; elapsed+delay <= window; delay *= 2 {
		elapsed += delay
		attempts++
	}
	return attempts
}

func TestBackoffHoldsAgainstOwnStatusWrites(t *testing.T) {
	const window = time.Second
	m := memcachedtest.NewMemcached("example", 1)
	m.ResourceVersion = "1"
	f := newFixture(t, m)
	client := &flakyWebhookClient{fakeClient: f.client}
	f.handler.client = client
	// Every attempt records a Warning, its message being new: room for a
	// loop's worth, so that a full recorder cannot be what stops it.
	f.handler.recorder = record.NewFakeRecorder(100000)
	ctx, cancel := context.WithCancel(context.Background())
	var attempts atomic.Int32
	// The observer runs on the worker after each reconcile, once the status
	// write has returned: the SDK delivers the write's update event then.
	f.handler.ObserveReconciles(func(time.Duration, error) {
		attempts.Add(1)
		if client.written != nil {
			_ = f.handler.Handle(ctx, sdk.Event{Object: client.written})
			client.written = nil
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.handler.Run(ctx, 1)
	}()

	start := time.Now()
	_ = f.handler.Handle(ctx, sdk.Event{Object: m.DeepCopy()})
	time.Sleep(window) // the window of the count, not a wait for a result
	got, took := int(attempts.Load()), time.Since(start)
	cancel()
	<-done

	want := backoffAttempts(took)
	t.Logf("%d reconciles in %v (%.1f/s); the documented backoff allows %d", got, took, float64(got)/took.Seconds(), want)
	if got > want {
		t.Errorf("%d reconciles in %v, want at most %d: the update events of the operator's own status writes jumped the backoff", got, took, want)
	}
	if got < 3 {
		t.Errorf("%d reconciles in %v, want the retries of the backoff", got, took)
	}
}

func TestMemcachedStoreTellsOwnWritesApart(t *testing.T) {
	version := func(rv string) *v1alpha1.Memcached {
		m := memcachedtest.NewMemcached("example", 1)
		m.ResourceVersion = rv
		return m
	}
	type delivery struct {
		rv   string
		news bool
	}
	tests := []struct {
		name string
		// wrote is whether the operator's status write of version 1,
		// which made version 2, returns before the deliveries.
		wrote      bool
		deliveries []delivery
	}{
		{name: "the write's own update event", wrote: true, deliveries: []delivery{{"2", false}}},
		{name: "a resync after it", wrote: true, deliveries: []delivery{{"2", false}, {"2", true}}},
		{name: "a change after the write", wrote: true, deliveries: []delivery{{"3", true}, {"2", true}}},
		{name: "the event before the write returns", deliveries: []delivery{{"2", true}, {"2", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemcachedStore()
			if !s.store("test/example", version("1")) {
				t.Fatal("the first version is not news")
			}
			if tt.wrote {
				s.update("test/example", "1", version("2"))
			}
			for i, d := range tt.deliveries {
				if !tt.wrote && i == 1 {
					// The write returns after its event came.
					s.update("test/example", "1", version("2"))
				}
				if got := s.store("test/example", version(d.rv)); got != d.news {
					t.Errorf("delivery %d of version %s: news %v, want %v", i, d.rv, got, d.news)
				}
			}
		})
	}
}
