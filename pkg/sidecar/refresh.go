package sidecar

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Refresher keeps memcached serving the certificate of the mounted Secret.
// The kubelet replaces the Secret's files, all at once, at its next sync of
// the pod after a change of the Secret (every syncFrequency, 1m by default,
// plus up to half of it in jitter); memcached reads them only at its start
// and on refresh_certs, which Check sends when they changed. Existing
// connections keep their session, new ones get the new certificate, and the
// cache keeps its keys.
type Refresher struct {
	// Dialer reaches memcached; its TLSDir is the mounted Secret.
	Dialer Dialer
	// Log receives a line for every refresh and every failure.
	Log logrus.FieldLogger
	// RetryAfter is how long a failed refresh of the same files waits
	// before Check tries it again, so that files memcached cannot load
	// cost a refresh_certs and a log line every RetryAfter, not every
	// check. Zero retries on the next check. New files are tried at once.
	RetryAfter time.Duration

	refreshes *prometheus.CounterVec
	notAfter  *servedNotAfter

	// served is the hash of the files memcached is known to serve.
	served [sha256.Size]byte
	// client is the certificate memcached is known to accept from the
	// sidecar, nil before the first check; a refresh may bring a CA that
	// no longer signs the old one, so it changes only after a refresh.
	client *tls.Certificate
	// refused is the hash of files Check last found unusable, so that
	// their error is logged once, not on every check.
	refused [sha256.Size]byte
	// failedSum is the hash of the files whose refresh last failed, and
	// retryAt when Check tries them again.
	failedSum [sha256.Size]byte
	retryAt   time.Time

	mu sync.Mutex
	// problem says why memcached does not serve the mounted files, "" when
	// it does or has not been seen serving yet.
	problem string
}

// NewRefresher returns a Refresher whose metrics reg registers.
func NewRefresher(d Dialer, log logrus.FieldLogger, reg prometheus.Registerer) *Refresher {
	r := &Refresher{
		Dialer: d,
		Log:    log,
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_sidecar_certificate_refreshes_total",
			Help: "Certificate changes the sidecar made memcached load with refresh_certs, by result: success once new connections get the new certificate, failure otherwise.",
		}, []string{"result"}),
		notAfter: &servedNotAfter{desc: prometheus.NewDesc("memcached_sidecar_certificate_not_after_timestamp_seconds",
			"When the certificate that memcached presented to the sidecar's last TLS handshake expires, in Unix seconds; absent before the first.", nil, nil)},
	}
	r.refreshes.WithLabelValues("success")
	r.refreshes.WithLabelValues("failure")
	reg.MustRegister(r.refreshes, r.notAfter)
	return r
}

// Run calls Check every interval until ctx ends. A check of unchanged files
// reads them and nothing more, so a short interval costs little and
// new files reach new connections soon after the kubelet writes them.
func (r *Refresher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Check(ctx); err != nil {
			r.Log.Error(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check compares the mounted files with those memcached serves and, when
// they differ, sends refresh_certs and confirms that a new connection gets
// the mounted certificate. A failure is retried on the next check.
func (r *Refresher) Check(ctx context.Context) error {
	sum, written := r.hash()
	if sum == r.served {
		// Also after a change that failed was undone.
		r.setProblem("")
		return nil
	}
	if sum == r.failedSum && time.Now().Before(r.retryAt) {
		return nil
	}
	pair, err := LoadPair(r.Dialer.TLSDir)
	if err != nil {
		if sum != r.refused {
			// The kubelet replaces the files at once, but one check may
			// read some before and some after: only files found so twice
			// are a problem.
			r.refused = sum
			return fmt.Errorf("the mounted certificate is not usable yet: %v", err)
		}
		if r.served != [sha256.Size]byte{} {
			r.setProblem(fmt.Sprintf("the mounted certificate files do not load, so the sidecar does not ask memcached to load them and memcached keeps the certificate it serves: %v", err))
		}
		return nil
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("failed to parse %s: %v", certFile, err)
	}
	if r.client == nil {
		r.client = &pair
	}
	// Until memcached is seen serving, as while it starts, nothing is a
	// failed refresh.
	first := r.served == [sha256.Size]byte{}
	d := r.Dialer
	d.Certificate = r.client
	c, err := d.Dial(ctx)
	if err != nil {
		return r.failed(sum, first, "failed to connect to memcached: %v", err)
	}
	defer c.Close()
	r.notAfter.observe(c.Peer)
	if same, err := samePeer(c, leaf.Raw); err != nil {
		return r.failed(sum, first, "%v", err)
	} else if same {
		// Memcached serves these files already: at the sidecar's start,
		// or after a refresh that a failed confirmation left unconfirmed.
		r.served = sum
		r.setProblem("")
		return nil
	}
	if err := c.RefreshCerts(); err != nil {
		return r.failed(sum, false, "memcached refused to reload its certificate: %v", err)
	}
	d.Certificate = &pair
	confirm, err := d.Dial(ctx)
	if err != nil {
		return r.failed(sum, false, "failed to connect to memcached after refresh_certs: %v", err)
	}
	defer confirm.Close()
	r.notAfter.observe(confirm.Peer)
	if same, err := samePeer(confirm, leaf.Raw); err != nil || !same {
		return r.failed(sum, false, "memcached still serves certificate serial %s after refresh_certs, not the mounted serial %s", serial(confirm), leaf.SerialNumber)
	}
	r.served, r.client = sum, &pair
	r.setProblem("")
	r.refreshes.WithLabelValues("success").Inc()
	r.Log.WithFields(logrus.Fields{
		"subject":  leaf.Subject.String(),
		"serial":   leaf.SerialNumber.String(),
		"notAfter": leaf.NotAfter.UTC().Format(time.RFC3339),
		// How long after the files were written: the sidecar's share of
		// a rotation; the rest is the kubelet's.
		"sinceFilesWritten": time.Since(written).Round(time.Millisecond).String(),
	}).Info("memcached reloaded its certificate with refresh_certs; new connections get it")
	return nil
}

// failed returns the error of a failed refresh of the files of hash sum.
// Unless memcached was never seen serving (first), as while it starts, it
// also holds the next try of those files until RetryAfter, counts a failed
// refresh and keeps it as the problem: the first check that reaches
// memcached is the next one, and the served certificate's notAfter is
// known from then on.
func (r *Refresher) failed(sum [sha256.Size]byte, first bool, format string, args ...interface{}) error {
	err := fmt.Errorf(format, args...)
	if !first {
		r.failedSum, r.retryAt = sum, time.Now().Add(r.RetryAfter)
		r.refreshes.WithLabelValues("failure").Inc()
		r.setProblem(err.Error())
	}
	return err
}

// Problem returns why memcached does not serve the mounted certificate, or
// "" when it does or, after the sidecar's start, is not serving yet.
func (r *Refresher) Problem() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.problem
}

func (r *Refresher) setProblem(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problem = p
}

// hash returns the hash of the mounted files, or of why one cannot be
// read, and when the certificate file was written.
func (r *Refresher) hash() (sum [sha256.Size]byte, written time.Time) {
	h := sha256.New()
	for _, name := range []string{certFile, keyFile, caFile} {
		b, err := os.ReadFile(filepath.Join(r.Dialer.TLSDir, name))
		if err != nil && !(name == caFile && os.IsNotExist(err)) {
			b = []byte(err.Error())
		}
		h.Write([]byte(name))
		h.Write(b)
	}
	copy(sum[:], h.Sum(nil))
	if fi, err := os.Stat(filepath.Join(r.Dialer.TLSDir, certFile)); err == nil {
		written = fi.ModTime()
	}
	return sum, written
}

// serial returns the serial number of c's peer, or "none".
func serial(c *Conn) string {
	if c.Peer == nil {
		return "none"
	}
	return c.Peer.SerialNumber.String()
}

// servedNotAfter is the gauge of the notAfter of the certificate memcached
// serves, as the Refresher's handshakes see it: what memcached serves,
// which is the mounted certificate only once a refresh took. It is absent
// until the first handshake, since a 0 would read as a certificate that
// expired long ago.
type servedNotAfter struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	value float64
	seen  bool
}

// observe takes the notAfter of peer, memcached's certificate; nil, a
// handshake without one, leaves the gauge as it was.
func (g *servedNotAfter) observe(peer *x509.Certificate) {
	if peer == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.value, g.seen = float64(peer.NotAfter.Unix()), true
}

// Describe implements prometheus.Collector.
func (g *servedNotAfter) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *servedNotAfter) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value)
	}
}
