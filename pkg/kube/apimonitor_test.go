package kube

import (
	"context"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/sirupsen/logrus"
	logrustest "github.com/sirupsen/logrus/hooks/test"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

// scriptedDiscovery answers MemcachedAPIServed from a script, then nil.
type scriptedDiscovery struct {
	mu     sync.Mutex
	script []error
	calls  int
}

func (s *scriptedDiscovery) served() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.script) == 0 {
		return nil
	}
	err := s.script[0]
	s.script = s.script[1:]
	return err
}

func TestAPIMonitorLogsWhenTheMemcachedAPIGoesAndComesBack(t *testing.T) {
	logger := logrus.StandardLogger()
	hook := logrustest.NewLocal(logger)
	out := logger.Out
	logger.SetOutput(io.Discard)
	defer func() {
		logger.ReplaceHooks(make(logrus.LevelHooks))
		logger.SetOutput(out)
	}()
	notFound := apierrors.NewNotFound(schema.GroupResource{}, "")
	unavailable := apierrors.NewServiceUnavailable("etcd is away")
	discovery := &scriptedDiscovery{script: []error{nil, notFound, notFound, unavailable, notFound, nil, nil}}
	// The grace period outlasts the script by far, so that a slow machine
	// cannot end the check before the API goes.
	m := &APIMonitor{served: discovery.served, interval: time.Millisecond, grace: 500 * time.Millisecond}

	// A CRD deletion deletes every Memcached: one check covers them all.
	for range 3 {
		m.MemcachedDeleted(context.Background())
	}
	err := wait.PollImmediate(time.Millisecond, 5*time.Second, func() (bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return !m.running, nil
	})
	if err != nil {
		t.Fatalf("the monitor still checks 5s after the API came back")
	}

	var got []logrus.Level
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level)
	}
	want := []logrus.Level{logrus.ErrorLevel, logrus.InfoLevel}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log levels: got %v, want %v (once when the API goes, once when it is back)", got, want)
	}
	if discovery.calls < 7 {
		t.Errorf("discovery asked %d times, want the whole script of 7 answers", discovery.calls)
	}
}

// fakeResources answers discovery for one group version with its next
// answer, and counts the questions.
type fakeResources struct {
	discovery.ServerResourcesInterface
	answers []discoveryAnswer
	calls   int
}

type discoveryAnswer struct {
	list *metav1.APIResourceList
	err  error
}

func (f *fakeResources) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	a := f.answers[f.calls]
	f.calls++
	return a.list, a.err
}

func TestServedCheckAsksDiscoveryOncePerInterval(t *testing.T) {
	gv := memcached.ServiceMonitorGVR.GroupVersion().String()
	withMonitors := &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podmonitors"}, {Name: "servicemonitors"}}}
	withoutMonitors := &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podmonitors"}}}
	steps := []struct {
		name      string
		at        time.Duration
		expire    bool
		want      bool
		wantCalls int
	}{
		{name: "the group is not served", at: 0, want: false, wantCalls: 1},
		{name: "the answer holds for the interval", at: 59 * time.Second, want: false, wantCalls: 1},
		{name: "the CRD appeared", at: time.Minute, want: true, wantCalls: 2},
		{name: "a discovery error keeps the last answer", at: 2 * time.Minute, want: true, wantCalls: 3},
		{name: "and is not asked again at once", at: 2*time.Minute + time.Second, want: true, wantCalls: 3},
		{name: "the group serves other resources only", at: 3 * time.Minute, want: false, wantCalls: 4},
		{name: "expired, it asks at once", at: 3*time.Minute + time.Second, expire: true, want: true, wantCalls: 5},
	}
	d := &fakeResources{answers: []discoveryAnswer{
		{err: apierrors.NewNotFound(schema.GroupResource{}, "")},
		{list: withMonitors},
		{err: apierrors.NewServiceUnavailable("etcd is away")},
		{list: withoutMonitors},
		{list: withMonitors},
	}}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var now time.Time
	c := newServedCheck(d, memcached.ServiceMonitorGVR, time.Minute)
	c.now = func() time.Time { return now }
	for _, s := range steps {
		now = start.Add(s.at)
		if s.expire {
			c.expire()
		}
		if got := c.served(); got != s.want || d.calls != s.wantCalls {
			t.Errorf("%s: got served %t after %d discovery calls, want %t after %d", s.name, got, d.calls, s.want, s.wantCalls)
		}
	}
}
