package events

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
)

// sink keeps the Events created, as the API server would.
type sink struct {
	mu      sync.Mutex
	created []corev1.Event
}

func (s *sink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, *e)
	return e, nil
}

func (s *sink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }

func (s *sink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return s.Create(e) }

func (s *sink) count(eventtype string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.created {
		if e.Type == eventtype {
			n++
		}
	}
	return n
}

// TestWarningsHaveTheirOwnBudget: 30 distinct Normal Events about one
// object use up client-go's per-object burst of 25; every Warning recorded
// after them is written.
func TestWarningsHaveTheirOwnBudget(t *testing.T) {
	const normals, warnings = 30, 3
	s := &sink{}
	r, stop := NewRecorder(s, scheme.Scheme, corev1.EventSource{Component: "test"}, func(string, ...interface{}) {})
	defer stop()
	var pod runtime.Object = &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "test", UID: "uid-p"}}

	for i := 0; i < normals; i++ {
		r.Eventf(pod, corev1.EventTypeNormal, "Scaled", "scaled to %d", i)
	}
	for i := 0; i < warnings; i++ {
		r.Eventf(pod, corev1.EventTypeWarning, "Failed", "failure %d", i)
	}

	err := wait.PollImmediate(10*time.Millisecond, 10*time.Second, func() (bool, error) {
		return s.count(corev1.EventTypeWarning) == warnings && s.count(corev1.EventTypeNormal) == 25, nil
	})
	if err != nil {
		t.Errorf("written: %d Normal, %d Warning; want client-go's burst of 25 Normal and all %d Warnings",
			s.count(corev1.EventTypeNormal), s.count(corev1.EventTypeWarning), warnings)
	}
}
