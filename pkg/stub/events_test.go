package stub

import (
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/events"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
)

// eventSink keeps the Events written to it, as the API server would.
type eventSink struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, *e)
	return e, nil
}

func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }

func (s *eventSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return s.Create(e)
}

// count returns how many Events of type and reason were written.
func (s *eventSink) count(eventtype, reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e.Type == eventtype && e.Reason == reason {
			n++
		}
	}
	return n
}

// TestWarningAfterManyScalesReachesTheAPI: 30 changes of spec.size, as an
// autoscaler makes them, record 30 Normal DeploymentScaled Events about the
// Memcached, more than client-go's spam filter lets through per object; the
// Warning of the failure that follows still reaches the API, through the
// recorder main.go builds.
func TestWarningAfterManyScalesReachesTheAPI(t *testing.T) {
	const scales = 30
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sink := &eventSink{}
	recorder, stop := events.NewRecorder(sink, scheme, corev1.EventSource{Component: "memcached-operator"}, func(string, ...interface{}) {})
	defer stop()
	m := memcachedtest.NewMemcached("example", 1)
	f := newFixture(t, inSync(m, 1)...)
	f.handler.recorder = recorder

	for i := 0; i < scales; i++ {
		m.Spec.Size = int32(2 + i%2)
		if err := f.handle(m, false); err != nil {
			t.Fatalf("scale %d: %v", i, err)
		}
	}
	f.client.failOn["scale deployment"] = forbidden("patch")
	m.Spec.Size = 5
	if err := f.handle(m, false); err == nil {
		t.Fatal("Handle: got nil, want the scale failure")
	}

	err := wait.PollImmediate(10*time.Millisecond, 10*time.Second, func() (bool, error) {
		return sink.count(corev1.EventTypeWarning, memcached.ReasonDeploymentScaleFailed) == 1, nil
	})
	if err != nil {
		t.Errorf("the API got %d Warning %s Events after %d DeploymentScaled (%d of them written), want 1",
			sink.count(corev1.EventTypeWarning, memcached.ReasonDeploymentScaleFailed), memcached.ReasonDeploymentScaleFailed,
			scales, sink.count(corev1.EventTypeNormal, ReasonDeploymentScaled))
	}
}
