// Package metrics holds the operator's Prometheus metrics and the HTTP server
// that exposes them with the health endpoints /healthz and /readyz.
//
// The metrics live in a registry of their own, not in client_golang's global
// one: the server exposes exactly the series listed on Metrics (plus the Go
// runtime's and the process's), so no library can add a series, or anything
// else, to what a scraper sees. That also leaves out the operator-sdk's own
// operator_event_types_total and operator_reconcile_results_total, which count
// only the SDK's share of the reconciles that Metrics counts in full.
//
// Server serves GET /metrics, /healthz and /readyz and nothing else: no
// pprof, no expvar, no index (TestServesNothingElse). /healthz asks the API
// server nothing, so an API outage never makes the kubelet restart every
// replica at once; /readyz fails while a check that main adds fails: the
// leader election's answer about the Lease and, while leading or without
// election, the caches' first sync (TestHealthAndReadiness; on the real
// node, TestOperatorProbesAndMetrics and TestReadinessFollowsTheLease).
package metrics

import (
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// namespace prefixes every series of the operator's own.
const namespace = "memcached_operator"

// The results of a reconcile, the values of the result label of
// memcached_operator_reconcile_total.
const (
	// ResultSuccess is a reconcile that brought the Memcached to its spec or
	// found it there.
	ResultSuccess = "success"
	// ResultError is a reconcile that failed; it is retried with backoff.
	ResultError = "error"
	// ResultConflict is a reconcile whose write lost a race with a newer
	// version of the object. Nothing failed: the reconcile is run again on the
	// newer version. It is counted apart so that errors stay a failure signal.
	ResultConflict = "conflict"
	// ResultPanic is a reconcile that panicked; the panic is recovered and
	// the reconcile retried with backoff, like an error.
	ResultPanic = "panic"
)

// Metrics are the operator's metrics:
//
//   - memcached_operator_reconcile_total{result}: reconciles by result
//     (success, error, conflict);
//   - memcached_operator_reconcile_duration_seconds: how long reconciles take;
//   - memcached_operator_workqueue_depth{queue}, _adds_total{queue},
//     _retries_total{queue}, _queue_duration_seconds{queue} and
//     _work_duration_seconds{queue}: the client-go work queues, the SDK's
//     ("memcacheds"), which only hands events on, and the handler's
//     ("memcached-reconcile"), whose workers reconcile;
//   - memcached_operator_api_requests_total{verb,code} and
//     memcached_operator_api_request_duration_seconds{verb}: every request of
//     every client-go client of the process to the API server, by HTTP verb
//     and status code ("<error>" when no response came back);
//   - memcached_operator_roll_pacing_wait_seconds: how long each reconcile
//     waited for the lock of the fleet rolls' pacing (--max-concurrent-rolls),
//     which every worker takes when a Memcached needs or frees a roll slot;
//   - memcached_operator_leader: 1 while this process reconciles (it holds
//     the Lease, or runs without leader election), 0 while it stands by;
//   - memcached_operator_http_requests_total{handler,code}: requests to
//     /metrics, /healthz and /readyz, which shows the kubelet's probes;
//   - go_* and process_*: the Go runtime's and the process's.
//
// The labels hold no object names or URLs, so the number of series is fixed.
type Metrics struct {
	registry *prometheus.Registry

	reconciles        *prometheus.CounterVec
	reconcileDuration prometheus.Histogram
	leader            prometheus.Gauge
	pacingWait        prometheus.Histogram

	apiRequests *prometheus.CounterVec
	apiDuration *prometheus.HistogramVec

	queueDepth    *prometheus.GaugeVec
	queueAdds     *prometheus.CounterVec
	queueRetries  *prometheus.CounterVec
	queueLatency  *prometheus.HistogramVec
	queueDuration *prometheus.HistogramVec

	httpRequests *prometheus.CounterVec
}

// durationBuckets span 1ms to about 33s, which covers a reconcile, an API
// request and a stay in a work queue alike.
var durationBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

// waitBuckets span 1µs to about 4s: a wait for a lock is mostly none, and
// one of a second would hold up every worker.
var waitBuckets = prometheus.ExponentialBuckets(1e-6, 4, 12)

// New returns the operator's metrics in a registry of their own.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "reconcile_total",
			Help: "Reconciles of Memcached resources by result: success, error, conflict (a write lost a race with a newer version and the reconcile is run again), or panic (recovered, retried with backoff).",
		}, []string{"result"}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "reconcile_duration_seconds",
			Help:    "How long reconciles of Memcached resources take.",
			Buckets: durationBuckets,
		}),
		pacingWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "roll_pacing_wait_seconds",
			Help:    "How long reconciles waited for the lock of the fleet rolls' pacing (--max-concurrent-rolls).",
			Buckets: waitBuckets,
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "leader",
			Help: "1 while this process reconciles (it holds the leader Lease, or runs without leader election), 0 while it stands by.",
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "api_requests_total",
			Help: "Requests to the Kubernetes API server by HTTP verb and status code (<error> when no response came back).",
		}, []string{"verb", "code"}),
		apiDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "api_request_duration_seconds",
			Help:    "How long requests to the Kubernetes API server take, by HTTP verb.",
			Buckets: durationBuckets,
		}, []string{"verb"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "workqueue", Name: "depth",
			Help: "Keys waiting in a work queue.",
		}, []string{"queue"}),
		queueAdds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "workqueue", Name: "adds_total",
			Help: "Keys added to a work queue.",
		}, []string{"queue"}),
		queueRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "workqueue", Name: "retries_total",
			Help: "Keys put back into a work queue with backoff after a failed reconcile.",
		}, []string{"queue"}),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long a key waits in a work queue before a worker takes it.",
			Buckets: durationBuckets,
		}, []string{"queue"}),
		queueDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long a worker takes to process a key of a work queue.",
			Buckets: durationBuckets,
		}, []string{"queue"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "Requests to this server's /metrics, /healthz and /readyz by handler and status code.",
		}, []string{"handler", "code"}),
	}
	m.registry.MustRegister(
		m.reconciles, m.reconcileDuration, m.leader, m.pacingWait,
		m.apiRequests, m.apiDuration,
		m.queueDepth, m.queueAdds, m.queueRetries, m.queueLatency, m.queueDuration,
		m.httpRequests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Series with a fixed set of label values exist from the start, at 0,
	// so that a rate or an alert over them has data before the first event.
	for _, r := range []string{ResultSuccess, ResultError, ResultConflict} {
		m.reconciles.WithLabelValues(r)
	}
	return m
}

// ObserveReconcile counts one reconcile with result (ResultSuccess,
// ResultError or ResultConflict) that took took.
func (m *Metrics) ObserveReconcile(took time.Duration, result string) {
	m.reconciles.WithLabelValues(result).Inc()
	m.reconcileDuration.Observe(took.Seconds())
}

// ObservePacingWait counts one wait for the lock of the fleet rolls' pacing
// that took took.
func (m *Metrics) ObservePacingWait(took time.Duration) {
	m.pacingWait.Observe(took.Seconds())
}

// SetLeader sets memcached_operator_leader: true while this process
// reconciles, false while it stands by.
func (m *Metrics) SetLeader(leading bool) {
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// current is the Metrics that client-go's process-wide hooks report to.
var (
	current      atomic.Pointer[Metrics]
	registerOnce sync.Once
)

// RegisterClientGo makes client-go report to m: the requests of every REST
// client (tools/metrics) and the work queues created from now on
// (workqueue.SetProvider). Call it before creating any client or queue.
//
// client-go takes each hook only once per process, so the hooks are
// forwarders installed on the first call, and each call points them at its
// own m: the last Metrics to call RegisterClientGo receives the requests, and
// the queues created after that call.
func (m *Metrics) RegisterClientGo() {
	current.Store(m)
	registerOnce.Do(func() {
		clientmetrics.Register(requestLatency{}, requestResult{})
		workqueue.SetProvider(queueProvider{})
	})
}

// requestLatency forwards client-go's request latencies to the current Metrics.
type requestLatency struct{}

// Observe drops the URL: it names objects, which would make a series per object.
func (requestLatency) Observe(verb string, _ url.URL, latency time.Duration) {
	if m := current.Load(); m != nil {
		m.apiDuration.WithLabelValues(verb).Observe(latency.Seconds())
	}
}

// requestResult forwards client-go's response codes to the current Metrics.
type requestResult struct{}

// Increment drops the host: there is one API server, and its address is no
// business of a scraper.
func (requestResult) Increment(code, verb, _ string) {
	if m := current.Load(); m != nil {
		m.apiRequests.WithLabelValues(verb, code).Inc()
	}
}

// queueProvider gives client-go 1.11's work queues their metrics, labelled
// with the queue's name, from the current Metrics.
type queueProvider struct{}

func (queueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return current.Load().queueDepth.WithLabelValues(name)
}

func (queueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return current.Load().queueAdds.WithLabelValues(name)
}

func (queueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return current.Load().queueRetries.WithLabelValues(name)
}

// NewLatencyMetric converts: client-go 1.11 observes microseconds.
func (queueProvider) NewLatencyMetric(name string) workqueue.SummaryMetric {
	return microseconds{current.Load().queueLatency.WithLabelValues(name)}
}

// NewWorkDurationMetric converts: client-go 1.11 observes microseconds.
func (queueProvider) NewWorkDurationMetric(name string) workqueue.SummaryMetric {
	return microseconds{current.Load().queueDuration.WithLabelValues(name)}
}

// microseconds takes client-go 1.11's work queue durations, in microseconds,
// into a histogram in seconds, the Prometheus base unit.
type microseconds struct{ o prometheus.Observer }

func (m microseconds) Observe(us float64) { m.o.Observe(us / 1e6) }
