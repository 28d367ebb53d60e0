package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// get requests path from h and returns the status code and body.
func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body)
}

// scrape returns the /metrics page of s.
func scrape(t *testing.T, s *Server) string {
	t.Helper()
	code, body := get(t, s.Handler(), http.MethodGet, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200:\n%s", code, body)
	}
	return body
}

// requireSeries fails unless page has every line of want, as
// `name{labels} value` in Prometheus text.
func requireSeries(t *testing.T, page string, want ...string) {
	t.Helper()
	lines := strings.Split(page, "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("/metrics has no line %q", w)
		}
	}
}

func TestMetricsCountReconciles(t *testing.T) {
	m := New()
	s := NewServer(m)

	m.ObserveReconcile(20*time.Millisecond, ResultSuccess)
	m.ObserveReconcile(3*time.Second, ResultError)
	m.ObserveReconcile(time.Millisecond, ResultConflict)
	m.ObserveReconcile(time.Millisecond, ResultSuccess)

	requireSeries(t, scrape(t, s),
		`memcached_operator_reconcile_total{result="success"} 2`,
		`memcached_operator_reconcile_total{result="error"} 1`,
		`memcached_operator_reconcile_total{result="conflict"} 1`,
		`memcached_operator_reconcile_duration_seconds_count 4`,
		`memcached_operator_reconcile_duration_seconds_bucket{le="0.032"} 3`,
		`memcached_operator_reconcile_duration_seconds_bucket{le="+Inf"} 4`,
	)
}

func TestMetricsCountPacingWaits(t *testing.T) {
	m := New()
	s := NewServer(m)

	m.ObservePacingWait(0)
	m.ObservePacingWait(3 * time.Microsecond)
	m.ObservePacingWait(2 * time.Second)

	requireSeries(t, scrape(t, s),
		`memcached_operator_roll_pacing_wait_seconds_count 3`,
		`memcached_operator_roll_pacing_wait_seconds_bucket{le="1e-06"} 1`,
		`memcached_operator_roll_pacing_wait_seconds_bucket{le="4e-06"} 2`,
		`memcached_operator_roll_pacing_wait_seconds_bucket{le="1.048576"} 2`,
		`memcached_operator_roll_pacing_wait_seconds_bucket{le="4.194304"} 3`,
	)
}

func TestMetricsStartAtZero(t *testing.T) {
	s := NewServer(New())
	requireSeries(t, scrape(t, s),
		`memcached_operator_reconcile_total{result="success"} 0`,
		`memcached_operator_reconcile_total{result="error"} 0`,
		`memcached_operator_leader 0`,
	)
}

func TestMetricsLeader(t *testing.T) {
	m := New()
	s := NewServer(m)
	m.SetLeader(true)
	requireSeries(t, scrape(t, s), `memcached_operator_leader 1`)
	m.SetLeader(false)
	requireSeries(t, scrape(t, s), `memcached_operator_leader 0`)
}

// TestMetricsCountAPIRequests sends requests through a real client-go 1.11
// clientset to a fake API server and finds them by verb and code.
func TestMetricsCountAPIRequests(t *testing.T) {
	m := New()
	m.RegisterClientGo()
	s := NewServer(m)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"present","namespace":"ns"}}`)
	}))
	defer api.Close()
	kube := kubernetes.NewForConfigOrDie(&rest.Config{Host: api.URL})

	if _, err := kube.CoreV1().ConfigMaps("ns").Get("present", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("ns").Get("missing", metav1.GetOptions{}); err == nil {
		t.Fatal("got no error for a missing ConfigMap")
	}

	page := scrape(t, s)
	requireSeries(t, page,
		`memcached_operator_api_requests_total{code="200",verb="GET"} 1`,
		`memcached_operator_api_requests_total{code="404",verb="GET"} 1`,
		`memcached_operator_api_request_duration_seconds_count{verb="GET"} 2`,
	)
	if strings.Contains(page, strings.TrimPrefix(api.URL, "http://")) || strings.Contains(page, "present") {
		t.Errorf("/metrics names the API server or an object:\n%s", page)
	}
}

// TestMetricsCountWorkQueues runs a key through a named client-go 1.11
// rate-limited queue, as the SDK's and the handler's are, with one retry.
func TestMetricsCountWorkQueues(t *testing.T) {
	m := New()
	m.RegisterClientGo()
	s := NewServer(m)
	q := workqueue.NewNamedRateLimitingQueue(workqueue.NewItemExponentialFailureRateLimiter(time.Millisecond, time.Millisecond), "test-queue")
	defer q.ShutDown()

	q.Add("ns/a")
	q.Add("ns/b")
	requireSeries(t, scrape(t, s),
		`memcached_operator_workqueue_depth{queue="test-queue"} 2`,
		`memcached_operator_workqueue_adds_total{queue="test-queue"} 2`,
	)
	item, _ := q.Get()
	q.AddRateLimited(item) // a failed reconcile
	q.Done(item)
	item, _ = q.Get()
	q.Done(item)
	requireSeries(t, scrape(t, s),
		`memcached_operator_workqueue_retries_total{queue="test-queue"} 1`,
		`memcached_operator_workqueue_work_duration_seconds_count{queue="test-queue"} 2`,
		`memcached_operator_workqueue_queue_duration_seconds_count{queue="test-queue"} 2`,
	)
}

func TestHealthAndReadiness(t *testing.T) {
	m := New()
	s := NewServer(m)
	var leaseErr error
	s.AddReadyCheck("ok-check", func() error { return nil })
	s.AddReadyCheck("lease", func() error { return leaseErr })

	tests := []struct {
		name     string
		leaseErr error
		path     string
		wantCode int
		wantBody string
	}{
		{name: "healthz", path: "/healthz", wantCode: 200, wantBody: "ok\n"},
		{name: "healthz ignores readiness", leaseErr: errors.New("no answer"), path: "/healthz", wantCode: 200, wantBody: "ok\n"},
		{name: "ready", path: "/readyz", wantCode: 200, wantBody: "ok\n"},
		{name: "not ready names the failing check", leaseErr: errors.New("no answer from the API server for 20s"), path: "/readyz", wantCode: 503, wantBody: "lease: no answer from the API server for 20s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaseErr = tt.leaseErr
			code, body := get(t, s.Handler(), http.MethodGet, tt.path)
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("GET %s = %d %q, want %d %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	requireSeries(t, scrape(t, s),
		`memcached_operator_http_requests_total{code="200",handler="healthz"} 2`,
		`memcached_operator_http_requests_total{code="200",handler="readyz"} 1`,
		`memcached_operator_http_requests_total{code="503",handler="readyz"} 1`,
	)
}

// TestServesNothingElse: no pprof, no expvar, no index, and only reads.
func TestServesNothingElse(t *testing.T) {
	s := NewServer(New())
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/", 404},
		{http.MethodGet, "/debug/pprof/", 404},
		{http.MethodGet, "/debug/pprof/cmdline", 404},
		{http.MethodGet, "/debug/vars", 404},
		{http.MethodGet, "/env", 404},
		{http.MethodGet, "/metrics/extra", 404},
		{http.MethodPost, "/metrics", 405},
		{http.MethodDelete, "/readyz", 405},
		{http.MethodHead, "/healthz", 200},
	}
	for _, tt := range tests {
		if code, _ := get(t, s.Handler(), tt.method, tt.path); code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, code, tt.want)
		}
	}
}

// TestMetricsPageHoldsOnlyMetrics: every line is a HELP or TYPE comment or a
// sample of the operator's, the Go runtime's or the process's series.
func TestMetricsPageHoldsOnlyMetrics(t *testing.T) {
	m := New()
	m.ObserveReconcile(time.Millisecond, ResultSuccess)
	for _, l := range strings.Split(strings.TrimSpace(scrape(t, NewServer(m))), "\n") {
		switch {
		case strings.HasPrefix(l, "# HELP "), strings.HasPrefix(l, "# TYPE "):
		case strings.HasPrefix(l, "memcached_operator_"), strings.HasPrefix(l, "go_"), strings.HasPrefix(l, "process_"):
		default:
			t.Errorf("unexpected line on /metrics: %q", l)
		}
	}
}

func TestServerStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(New())
	addr, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", resp.StatusCode)
	}
	if _, err := NewServer(New()).Start(ctx, addr.String()); err == nil || !strings.Contains(err.Error(), "failed to listen") {
		t.Errorf("second server on %s: got %v, want a listen error", addr, err)
	}
}
