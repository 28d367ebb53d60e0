package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Server answers three paths and nothing else: /metrics (Prometheus text),
// /healthz (liveness) and /readyz (readiness). Every other path is 404: there
// is no pprof, no expvar and no index. The server uses a mux of its own, so
// what a library registers on http.DefaultServeMux (expvar's /debug/vars,
// which client_golang's collectors package imports) is never served.
//
// /healthz answers 200 for as long as the process serves HTTP. It asks the
// API server nothing on purpose: a liveness probe that failed during an API
// outage would have the kubelet restart every replica at once, and would not
// help, since a leader that loses its Lease already stops its workers and
// stands by until it leads again.
//
// /readyz answers 200 when every check added with AddReadyCheck passes, and
// 503 with one line per failing check otherwise.
type Server struct {
	metrics *Metrics
	mux     *http.ServeMux

	mu     sync.Mutex
	checks []readyCheck
}

// readyCheck is a named readiness condition.
type readyCheck struct {
	name  string
	check func() error
}

// NewServer returns a Server for m with no readiness checks.
func NewServer(m *Metrics) *Server {
	s := &Server{metrics: m, mux: http.NewServeMux()}
	metricsHandler := promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	// The patterns name GET (which also matches HEAD): other methods get 405.
	s.mux.Handle("GET /metrics", s.instrument("metrics", metricsHandler))
	s.mux.Handle("GET /healthz", s.instrument("healthz", http.HandlerFunc(healthz)))
	s.mux.Handle("GET /readyz", s.instrument("readyz", http.HandlerFunc(s.readyz)))
	return s
}

// instrument counts the requests to handler in memcached_operator_http_requests_total.
func (s *Server) instrument(handler string, h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(s.metrics.httpRequests.MustCurryWith(prometheus.Labels{"handler": handler}), h)
}

// AddReadyCheck makes /readyz fail while check returns an error. The error
// is shown to whoever asks, so it must say what is wrong in general terms
// and hold no secret, address or object content. Add every check before
// Start: a kubelet probes as soon as the port answers, and /readyz with a
// check still missing would call the process ready too early.
func (s *Server) AddReadyCheck(name string, check func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, readyCheck{name: name, check: check})
}

// Handler returns the server's handler, for tests and for embedding.
func (s *Server) Handler() http.Handler {
	return s.mux
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	checks := append([]readyCheck(nil), s.checks...)
	s.mu.Unlock()
	var failed []string
	for _, c := range checks {
		if err := c.check(); err != nil {
			failed = append(failed, c.name+": "+err.Error())
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(failed, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

// The bounds of the server's waits and of a request. Any pod of the cluster
// can reach the operator's port, and its clients (Prometheus, the kubelet's
// probes) send bodiless GETs of a few hundred bytes and read the reply at
// once: a client that does not costs the operator a goroutine and its
// buffers for a bounded time only.
const (
	// readHeaderTimeout bounds a request's header, which arrives at once.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds a whole request, which has no body.
	readTimeout = 10 * time.Second
	// writeTimeout bounds a request and its reply: /metrics, tens of KiB
	// whatever the number of Memcacheds (no metric has a label per
	// resource), well within it even from a loaded node.
	writeTimeout = 30 * time.Second
	// idleTimeout bounds the wait for the next request on a kept
	// connection: above Prometheus's default scrape interval, a minute,
	// so that a scraper does not send on a connection the server is
	// closing, and above the 90 s after which Go's http.Transport closes
	// its own idle connections.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's header, which fits in a few
	// hundred bytes.
	maxHeaderBytes = 16 << 10
)

// Start listens on addr (host:port; port 0 picks a free one) and serves
// until ctx is done. It returns the address it listens on, or the error of
// listening, so that a port already in use stops the operator at start
// instead of leaving it without probes.
func (s *Server) Start(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s for /metrics, /healthz and /readyz: %v", addr, err)
	}
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// The probes now fail, and the kubelet restarts the container.
			logrus.Errorf("the /metrics, /healthz and /readyz server stopped: %v", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // the process is exiting; nothing is left to serve
	}()
	return ln.Addr(), nil
}
