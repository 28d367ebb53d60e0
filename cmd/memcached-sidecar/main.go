// Command memcached-sidecar runs beside memcached in the pods of a Memcached
// with TLS, auth or monitoring: it makes memcached reload its certificate
// (pkg/sidecar.Refresher) and its -Y file (pkg/sidecar.AuthReloader) when
// the kubelet updates the mounted Secrets, serves memcached's stats as
// Prometheus metrics (pkg/sidecar.StatsCollector), and answers
// ElastiCache's auto discovery with the mounted membership
// (pkg/sidecar.Discovery).
//
// In the pods it runs with --supervise: the process the container starts
// only supervises (pkg/sidecar.Supervisor) a worker, this command again
// with --worker, which does the work, and restarts it whenever it exits, so
// that a failing worker never stops the container nor makes the pod, and
// memcached with it, leave the Service. The supervisor serves /healthz on
// the pod's loopback too (--health-addr), for the container's exec liveness
// probe, this command with --probe, which asks it and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// stopGrace is how long the worker has to exit after the container's
// SIGTERM: within the pod's grace period, after its preStop pause.
const stopGrace = 5 * time.Second

func main() {
	err := run(os.Args[1:])
	var failed probeFailed
	switch {
	case err == nil:
	case errors.As(err, &failed):
		// One plain line, which the kubelet puts in the Unhealthy Event.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	default:
		logrus.Fatal(err)
	}
}

func run(args []string) (err error) {
	fs := flag.NewFlagSet("memcached-sidecar", flag.ContinueOnError)
	var d sidecar.Dialer
	var metricsAddr, statusAddr, authFile, workerAddr, healthAddr, probeAddr, discoveryAddr, discoveryFile string
	var interval, retry time.Duration
	var supervise, worker bool
	fs.StringVar(&d.Addr, "memcached", "127.0.0.1:11211", "memcached's host:port.")
	fs.StringVar(&d.TLSDir, "tls-dir", "", "Folder of the mounted kubernetes.io/tls Secret memcached serves; empty: memcached speaks plaintext and nothing is refreshed.")
	fs.BoolVar(&d.ClientCert, "client-cert", false, "Present the Secret's certificate to memcached, which requires client certificates.")
	fs.StringVar(&authFile, "auth-file", "", "memcached's -Y file: the sidecar sends memcached SIGHUP when it changes, which needs the pod's shared process namespace, and logs in with a user:password line memcached has loaded.")
	fs.StringVar(&metricsAddr, "metrics-addr", "", "Address of the HTTP server for /metrics, /status and /healthz, such as :9150; empty serves none.")
	fs.StringVar(&statusAddr, "status-addr", "", "Address of the HTTP server for /status and /healthz alone, without --metrics-addr, such as :9150; empty serves none.")
	fs.DurationVar(&interval, "refresh-interval", time.Second, "How often the mounted certificate files and -Y file are compared with those memcached serves.")
	fs.DurationVar(&retry, "refresh-retry", 5*time.Second, "How long a failed refresh of the same certificate files, or load of the same -Y file, waits before it is tried again.")
	fs.StringVar(&discoveryAddr, "discovery-addr", "", "Address where the worker answers ElastiCache's \"config get cluster\", \"get AmazonElastiCache:cluster\" and \"version\", such as :11212, with TLS and the login of --tls-dir, --client-cert and --auth-file; empty serves none.")
	fs.StringVar(&discoveryFile, "discovery-file", "", "With --discovery-addr: the membership to serve, the discovery ConfigMap's key as the kubelet mounts it, read at every request.")
	fs.BoolVar(&supervise, "supervise", false, "Do the work in a child process, the worker (this command with --worker), and restart it with backoff whenever it exits: this process stays up, so the container keeps running and the pod stays Ready. It serves /status, which reports a failing worker as SidecarFailing, /healthz, about itself alone, and the worker's /metrics on --metrics-addr or --status-addr.")
	fs.StringVar(&workerAddr, "worker-addr", "127.0.0.1:9151", "With --supervise: the loopback address where the worker serves its own /status and /metrics.")
	fs.StringVar(&healthAddr, "health-addr", sidecar.HealthAddr, "With --supervise: the loopback address where the supervisor serves /healthz, about itself alone, as on --metrics-addr or --status-addr, for --probe: no client outside the pod can reach it, so none can hold its connections.")
	fs.StringVar(&probeAddr, "probe", "", "Ask the /healthz of the supervisor's --health-addr, such as "+sidecar.HealthAddr+", and exit: 0 when it answers 200 OK within "+probeTimeout.String()+", 1 with the reason on stderr otherwise. The sidecar container's liveness probe runs it; set it alone.")
	fs.BoolVar(&worker, "worker", false, "Run as the worker of --supervise, which sets it: raise this process's oom_score_adj, so that an OOM in the container kills the worker rather than its supervisor, and write the error it exits on to file descriptor 3.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if probeAddr != "" {
		if fs.NFlag() != 1 {
			return errors.New("--probe asks a supervisor's /healthz and exits: set it alone")
		}
		if _, _, err := net.SplitHostPort(probeAddr); err != nil {
			return fmt.Errorf("--probe=%s: %v", probeAddr, err)
		}
		if err := probe(probeAddr, probeTimeout); err != nil {
			return probeFailed{err}
		}
		return nil
	}
	if worker {
		defer func() {
			if err != nil {
				writeExitMessage(err)
			}
		}()
	}
	if d.TLSDir == "" && authFile == "" && metricsAddr == "" && discoveryAddr == "" {
		return errors.New("nothing to do: set --tls-dir, --auth-file, --metrics-addr, --discovery-addr or several")
	}
	if (discoveryAddr == "") != (discoveryFile == "") {
		return errors.New("--discovery-addr serves --discovery-file: set both or neither")
	}
	if metricsAddr != "" && statusAddr != "" {
		return errors.New("--metrics-addr serves /status too: set it or --status-addr, not both")
	}
	if host, _, err := net.SplitHostPort(d.Addr); err != nil {
		return fmt.Errorf("--memcached=%s: %v", d.Addr, err)
	} else if ip := net.ParseIP(host); d.TLSDir != "" && (ip == nil || !ip.IsLoopback()) {
		// The sidecar does not verify memcached's certificate, which is
		// safe on the pod's own loopback only (see sidecar.Dialer.Dial).
		return fmt.Errorf("--memcached=%s must be a loopback IP address with --tls-dir", d.Addr)
	}
	if interval <= 0 {
		return fmt.Errorf("--refresh-interval=%v must be positive", interval)
	}
	if retry < 0 {
		return fmt.Errorf("--refresh-retry=%v must not be negative", retry)
	}
	if supervise {
		if worker {
			return errors.New("--supervise runs a --worker: set one of them")
		}
		if metricsAddr+statusAddr == "" {
			return errors.New("--supervise serves the report of its worker: set --metrics-addr or --status-addr")
		}
		for _, a := range []struct{ flag, addr string }{{"worker-addr", workerAddr}, {"health-addr", healthAddr}} {
			if host, _, err := net.SplitHostPort(a.addr); err != nil {
				return fmt.Errorf("--%s=%s: %v", a.flag, a.addr, err)
			} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("--%s=%s must be a loopback IP address", a.flag, a.addr)
			}
		}
	}
	log := logrus.StandardLogger()
	if worker {
		if err := sidecar.RaiseOOMScore("/proc/self/oom_score_adj"); err != nil {
			// The worker still works; an OOM may then kill its supervisor,
			// and the container restarts.
			log.Warn(err)
		}
	}
	log.Infof("memcached-sidecar %s for memcached at %s (TLS: %t, auth: %t, discovery: %t)", sidecar.Version, d.Addr, d.TLSDir != "", authFile != "", discoveryAddr != "")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if supervise {
		return superviseWorker(ctx, workerArgs(fs, metricsAddr != "", workerAddr), metricsAddr+statusAddr, metricsAddr != "", workerAddr, healthAddr, log)
	}

	reg := prometheus.NewRegistry()
	var reloader *sidecar.AuthReloader
	var refresher *sidecar.Refresher
	if authFile != "" {
		reloader = sidecar.NewAuthReloader(authFile, d, sidecar.ProcProcess{Proc: "/proc", Name: "memcached"}, log, reg, retry)
		d.Credentials = reloader
		go reloader.Run(ctx, interval)
	}
	if d.TLSDir != "" {
		refresher = sidecar.NewRefresher(d, log, reg)
		refresher.RetryAfter = retry
		go refresher.Run(ctx, interval)
	}
	discovery := make(chan error, 1)
	if discoveryAddr != "" {
		ds := &sidecar.Discovery{
			File: discoveryFile, TLSDir: d.TLSDir, ClientCert: d.ClientCert, AuthFile: authFile,
			Version: memcachedVersion(d), Log: log, Refused: sidecar.NewRefusedCounter(reg),
		}
		go func() { discovery <- ds.ListenAndServe(ctx, discoveryAddr) }()
	}
	addr := metricsAddr + statusAddr
	if addr == "" {
		select {
		case err := <-discovery:
			return discoveryFailed(err)
		case <-ctx.Done():
			return nil
		}
	}
	mux := http.NewServeMux()
	if metricsAddr != "" {
		reg.MustRegister(sidecar.NewStatsCollector(d, log))
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	mux.Handle(sidecar.ReportPath, sidecar.ReportHandler(refresher, reloader))
	served := make(chan error, 1)
	go func() { served <- serve(ctx, addr, mux) }()
	select {
	case err := <-discovery:
		// The worker exits, and its supervisor restarts it with backoff.
		return discoveryFailed(err)
	case err := <-served:
		return err
	}
}

// discoveryFailed is the error the worker exits on when the discovery
// endpoint stopped serving, or nil when it stopped because ctx ended.
func discoveryFailed(err error) error {
	if err != nil {
		return fmt.Errorf("the discovery endpoint stopped: %v", err)
	}
	return nil
}

// memcachedVersion asks memcached for its version through d, as the
// discovery endpoint's "version" reply.
func memcachedVersion(d sidecar.Dialer) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		c, err := d.Dial(ctx)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.Version()
	}
}

// superviseWorker runs the worker, this executable with args, under a
// sidecar.Supervisor until ctx ends, and serves at addr the Supervisor's
// report of it, its own /healthz and, with metrics, the worker's /metrics
// from workerAddr; at healthAddr, its /healthz alone.
func superviseWorker(ctx context.Context, args []string, addr string, metrics bool, workerAddr, healthAddr string, log logrus.FieldLogger) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find the sidecar's executable: %v", err)
	}
	s := &sidecar.Supervisor{
		Command: func() *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			// No worker outlives its supervisor, which would hold the
			// worker's port when the container starts again.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return cmd
		},
		MinBackoff: sidecar.DefaultMinBackoff,
		MaxBackoff: sidecar.DefaultMaxBackoff,
		Stable:     sidecar.DefaultStable,
		StopGrace:  stopGrace,
		Log:        log,
	}
	log.Infof("supervising the worker %s %s", exe, strings.Join(args, " "))
	ctx, cancel := context.WithCancel(ctx)
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-supervised
	}()
	worker := &url.URL{Scheme: "http", Host: workerAddr}
	mux := http.NewServeMux()
	if metrics {
		proxy := httputil.NewSingleHostReverseProxy(worker)
		// The worker's exits are logged once each, not at every scrape.
		proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "the sidecar's worker does not answer: "+err.Error(), http.StatusBadGateway)
		}
		mux.Handle("/metrics", proxy)
	}
	mux.Handle(sidecar.ReportPath, s.ReportHandler(worker.String()+sidecar.ReportPath))
	return serveWithHealth(ctx, addr, mux, healthAddr)
}

// serveWithHealth serves mux and /healthz at addr, and /healthz alone at
// healthAddr, each with the bounds below, until ctx ends or either server
// fails, which ends the other. Any pod of the cluster may hold every
// connection that addr takes; healthAddr is on the pod's loopback, for the
// exec liveness probe (--probe), which no client outside the pod can fail.
func serveWithHealth(ctx context.Context, addr string, mux *http.ServeMux, healthAddr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 2)
	go func() { served <- serve(ctx, addr, mux) }()
	go func() { served <- serve(ctx, healthAddr, http.NewServeMux()) }()
	err := <-served
	cancel()
	if other := <-served; err == nil {
		err = other
	}
	return err
}

// workerArgs returns the arguments of the worker of a --supervise command
// line parsed into fs: the flags set there, but the supervisor's own and
// the addresses, then --worker and, where the supervisor serves metrics or
// only the status, the same at workerAddr.
func workerArgs(fs *flag.FlagSet, metrics bool, workerAddr string) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "supervise", "worker-addr", "health-addr", "metrics-addr", "status-addr":
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	if metrics {
		return append(args, "--worker", "--metrics-addr="+workerAddr)
	}
	return append(args, "--worker", "--status-addr="+workerAddr)
}

// writeExitMessage gives the supervisor the error the worker exits on, on
// sidecar.ExitMessageFD, when that is the supervisor's pipe: a worker
// started by hand may have anything there, or nothing.
func writeExitMessage(err error) {
	f := os.NewFile(sidecar.ExitMessageFD, "exit-message")
	defer f.Close()
	if fi, statErr := f.Stat(); statErr != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	_, _ = fmt.Fprintln(f, err) // the process exits next, with the error in its log too
}

// The bounds of the sidecar's HTTP servers, for /metrics, /status and
// /healthz. Any pod of the cluster can reach the one on the pod's IP, and
// every connection costs memory out of the container's 64Mi; its clients
// (Prometheus, the operator's poll every 20 s) send bodiless GETs of a few
// hundred bytes and read replies of tens of KiB at once. The supervisor's
// loopback server for the liveness probe (--health-addr) has the same
// bounds, although only the pod's own processes reach it.
const (
	// httpReadHeaderTimeout bounds a request's header, which arrives at
	// once, from the connection's start or its first byte after an idle
	// wait.
	httpReadHeaderTimeout = 5 * time.Second
	// httpReadTimeout bounds a whole request, which has no body.
	httpReadTimeout = 10 * time.Second
	// httpWriteTimeout bounds a request and its reply: above the 10 s
	// that Prometheus gives a scrape by default, which covers the worker's
	// stats command to memcached, bounded at 5 s.
	httpWriteTimeout = 15 * time.Second
	// httpIdleTimeout bounds the wait for the next request on a kept
	// connection: above the 90 s after which Go's http.Transport, which the
	// operator's poll uses, closes an idle connection, so that the client
	// closes first and never sends on a connection that the server is
	// closing.
	httpIdleTimeout = 2 * time.Minute
	// httpMaxHeaderBytes bounds a request's header, which fits in a few
	// hundred bytes.
	httpMaxHeaderBytes = 8 << 10
	// httpMaxConns caps the open connections, and httpMaxConnsPerClient
	// those of one IP (see sidecar.LimitListener): the clients, the
	// operator's poll and a Prometheus or two, each from its own IP, need
	// one or two each, and at about 20 KiB each, 64 take about a megabyte.
	httpMaxConns          = 64
	httpMaxConnsPerClient = 8
)

// serve serves mux and /healthz, which says the process serves, at addr
// until ctx ends.
func serve(ctx context.Context, addr string, mux *http.ServeMux) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux.HandleFunc(healthPath, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	refused := func() {
		logrus.Debugf("closed a connection to %s over the cap of %d, or of %d from one IP", addr, httpMaxConns, httpMaxConnsPerClient)
	}
	return serveOn(ctx, sidecar.LimitListener(ln, httpMaxConns, httpMaxConnsPerClient, refused), newServer(mux))
}

// newServer returns the server of handler, with the bounds above.
func newServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// serveOn runs srv on ln until ctx ends.
func serveOn(ctx context.Context, ln net.Listener, srv *http.Server) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // the process exits next; a slow scrape is cut
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
