package sidecarpoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fixture is a Poller over pods whose sidecars answer with reports.
type fixture struct {
	p    *Poller
	pods []*corev1.Pod
	mu   sync.Mutex
	// reports are the sidecars' answers by URL; an error answers none.
	reports map[string]interface{}
	asked   []string
	changed []string
}

func newFixture() *fixture {
	f := &fixture{reports: map[string]interface{}{}}
	log, _ := test.NewNullLogger()
	f.p = New(func() []*corev1.Pod { return f.pods }, func(namespace, name string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.changed = append(f.changed, namespace+"/"+name)
	}, DefaultInterval, log)
	f.p.get = func(_ context.Context, url string) (sidecar.Report, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.asked = append(f.asked, url)
		switch r := f.reports[url].(type) {
		case sidecar.Report:
			return r, nil
		case error:
			return sidecar.Report{}, r
		}
		return sidecar.Report{}, errors.New("connection refused")
	}
	return f
}

// poll runs one round and returns the URLs asked and the Memcacheds
// queued, each sorted.
func (f *fixture) poll() (asked, changed []string) {
	f.mu.Lock()
	f.asked, f.changed = nil, nil
	f.mu.Unlock()
	f.p.Poll(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	return sorted(f.asked), sorted(f.changed)
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// podWithSidecar returns a Running pod of m named name at ip whose sidecar
// runs.
func podWithSidecar(name, ip string) *corev1.Pod {
	m := memcachedtest.NewMemcached("example", 2)
	p := memcachedtest.NewPod(m, name, corev1.PodRunning, true)
	p.UID = types.UID("uid-" + name)
	p.Status.PodIP = ip
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Ready: true}, {Name: memcached.SidecarName, Ready: true}}
	return p
}

var refreshFailed = sidecar.Report{Problems: []sidecar.Problem{{Reason: sidecar.ReasonCertificateRefreshFailed, Message: "memcached refused to reload its certificate: refresh_certs: ERROR"}}}

func TestPollAsksRunningSidecarsAndQueuesChanges(t *testing.T) {
	f := newFixture()
	a, b := podWithSidecar("example-a", "198.18.0.7"), podWithSidecar("example-b", "198.18.0.8")
	plain := memcachedtest.NewPod(memcachedtest.NewMemcached("plain", 1), "plain-a", corev1.PodRunning, true)
	plain.Status.PodIP = "198.18.0.9"
	waiting := podWithSidecar("example-c", "198.18.0.10")
	waiting.Status.ContainerStatuses[1].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	noIP := podWithSidecar("example-d", "")
	f.pods = []*corev1.Pod{a, b, plain, waiting, noIP}
	urlA, urlB := "http://198.18.0.7:9150/status", "http://198.18.0.8:9150/status"
	f.reports[urlA] = sidecar.Report{Problems: []sidecar.Problem{}}
	f.reports[urlB] = refreshFailed

	asked, changed := f.poll()
	if want := []string{urlA, urlB}; !reflect.DeepEqual(asked, want) {
		t.Errorf("asked %v, want only the running sidecars %v", asked, want)
	}
	if want := []string{"test/example"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("queued %v, want %v for example-b's new problem", changed, want)
	}
	want := []memcached.SidecarProblem{{Pod: "example-b", Reason: sidecar.ReasonCertificateRefreshFailed, Message: refreshFailed.Problems[0].Message}}
	if got := f.p.Problems(f.pods); !reflect.DeepEqual(got, want) {
		t.Errorf("problems %+v, want %+v", got, want)
	}

	// The same reports again queue nothing.
	if _, changed := f.poll(); len(changed) != 0 {
		t.Errorf("the same reports queued %v, want nothing", changed)
	}
	// A sidecar that does not answer keeps its last report.
	f.reports[urlB] = errors.New("i/o timeout")
	if _, changed := f.poll(); len(changed) != 0 || len(f.p.Problems(f.pods)) != 1 {
		t.Errorf("no answer: queued %v, problems %+v; want nothing queued and the last report", changed, f.p.Problems(f.pods))
	}
	// The problem clears.
	f.reports[urlB] = sidecar.Report{}
	if _, changed := f.poll(); !reflect.DeepEqual(changed, []string{"test/example"}) || len(f.p.Problems(f.pods)) != 0 {
		t.Errorf("cleared: queued %v, problems %+v; want test/example queued and none", changed, f.p.Problems(f.pods))
	}
	// A pod that is gone is forgotten.
	f.reports[urlB] = refreshFailed
	f.poll()
	f.pods = []*corev1.Pod{a}
	f.poll()
	if n := len(f.p.reports); n != 0 {
		t.Errorf("%d reports kept after their pod went, want none", n)
	}
}

func TestAnAnswerThatIsNoReportIsThePodsProblem(t *testing.T) {
	// An endless report, as a pod that a tenant made to pass for a
	// memcached pod may serve: the real client reads a bounded part.
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"problems":[{"reason":"CertificateRefreshFailed","message":"`)
		chunk := []byte(strings.Repeat("a", 4096))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	tests := []struct {
		name   string
		answer interface{}
		want   string
	}{
		{name: "endless", answer: endless.URL, want: "report larger than 64 KiB"},
		{name: "too many problems", answer: fmt.Errorf("GET x: %w: 9 problems, more than 8", sidecar.ErrReportInvalid), want: "9 problems"},
		{name: "too slow", answer: fmt.Errorf("GET x: %w: context deadline exceeded", sidecar.ErrReportIncomplete), want: "incomplete report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			pod := podWithSidecar("example-a", "198.18.0.7")
			f.pods = []*corev1.Pod{pod}
			url := "http://198.18.0.7:9150/status"
			if u, ok := tt.answer.(string); ok {
				fetch := f.p.get
				f.p.get = func(ctx context.Context, _ string) (sidecar.Report, error) {
					fetch(ctx, url) // recorded as asked
					return sidecar.FetchReport(ctx, http.DefaultClient, u)
				}
			} else {
				f.reports[url] = tt.answer
			}

			_, changed := f.poll()

			if want := []string{"test/example"}; !reflect.DeepEqual(changed, want) {
				t.Errorf("queued %v, want %v", changed, want)
			}
			got := f.p.Problems(f.pods)
			if len(got) != 1 || got[0].Pod != "example-a" || got[0].Reason != ReasonReportInvalid || !strings.Contains(got[0].Message, tt.want) || len(got[0].Message) > 256 {
				t.Errorf("problems %+v, want one of example-a, %s, saying %q in a short message", got, ReasonReportInvalid, tt.want)
			}
		})
	}
}
