// Command memcached-sidecar runs beside memcached in the pods of a Memcached
// with TLS, auth or monitoring: it makes memcached reload its certificate
// (pkg/sidecar.Refresher) and its -Y file (pkg/sidecar.AuthReloader) when
// the kubelet updates the mounted Secrets, and serves memcached's stats as
// Prometheus metrics (pkg/sidecar.StatsCollector).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		logrus.Fatal(err)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("memcached-sidecar", flag.ContinueOnError)
	var d sidecar.Dialer
	var metricsAddr, statusAddr, authFile string
	var interval, retry time.Duration
	fs.StringVar(&d.Addr, "memcached", "127.0.0.1:11211", "memcached's host:port.")
	fs.StringVar(&d.TLSDir, "tls-dir", "", "Folder of the mounted kubernetes.io/tls Secret memcached serves; empty: memcached speaks plaintext and nothing is refreshed.")
	fs.BoolVar(&d.ClientCert, "client-cert", false, "Present the Secret's certificate to memcached, which requires client certificates.")
	fs.StringVar(&authFile, "auth-file", "", "memcached's -Y file: the sidecar sends memcached SIGHUP when it changes, which needs the pod's shared process namespace, and logs in with a user:password line memcached has loaded.")
	fs.StringVar(&metricsAddr, "metrics-addr", "", "Address of the HTTP server for /metrics, /status and /healthz, such as :9150; empty serves none.")
	fs.StringVar(&statusAddr, "status-addr", "", "Address of the HTTP server for /status and /healthz alone, without --metrics-addr, such as :9150; empty serves none.")
	fs.DurationVar(&interval, "refresh-interval", time.Second, "How often the mounted certificate files and -Y file are compared with those memcached serves.")
	fs.DurationVar(&retry, "refresh-retry", 5*time.Second, "How long a failed refresh of the same certificate files, or load of the same -Y file, waits before it is tried again.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if d.TLSDir == "" && authFile == "" && metricsAddr == "" {
		return errors.New("nothing to do: set --tls-dir, --auth-file, --metrics-addr or several")
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
	log := logrus.StandardLogger()
	log.Infof("memcached-sidecar %s for memcached at %s (TLS: %t, auth: %t)", sidecar.Version, d.Addr, d.TLSDir != "", authFile != "")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

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
	addr := metricsAddr + statusAddr
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	mux := http.NewServeMux()
	if metricsAddr != "" {
		reg.MustRegister(&sidecar.StatsCollector{Dialer: d, Log: log})
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	mux.Handle(sidecar.ReportPath, sidecar.ReportHandler(refresher, reloader))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // the process exits next; a slow scrape is cut
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
