package framework

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// APIProxy is a reverse proxy on loopback in front of a cluster's API server.
// It records every request that passes through it, so that a suite can count
// what one client, such as the operator, asks of the API server, including the
// requests that the API server never answers because it is paused. It adds no
// credentials: the client's own (a ServiceAccount token) pass through
// unchanged. It serves TLS with a certificate of its own, which Kubeconfig
// names.
type APIProxy struct {
	srv      *httptest.Server
	upstream *url.URL

	mu       sync.Mutex
	requests []ProxiedRequest
	stall    *Stall
}

// Stall holds the first request that a proxy receives with a given method
// and path, unanswered, until its client gives up on it, as a request lost
// on a half-open connection is; the requests after it pass.
type Stall struct {
	method, path string
	// held is closed when the request arrives, abandoned when its client
	// gives up on it.
	held, abandoned chan struct{}
	// heldAt and abandonedAt are when; read them after the channel closed.
	heldAt, abandonedAt time.Time
}

// Held is closed when the stalled request has arrived.
func (s *Stall) Held() <-chan struct{} { return s.held }

// Abandoned is closed when the stalled request's client has given up on it.
func (s *Stall) Abandoned() <-chan struct{} { return s.abandoned }

// HeldAt and AbandonedAt are when the request arrived and when its client
// gave up; each is valid once its channel is closed.
func (s *Stall) HeldAt() time.Time      { return s.heldAt }
func (s *Stall) AbandonedAt() time.Time { return s.abandonedAt }

// StallNext makes the proxy hold the next request with method and path (the
// URL's path, without its query) unanswered until its client cancels it or
// closes its connection. Only one request is held per call.
func (p *APIProxy) StallNext(method, path string) *Stall {
	s := &Stall{method: method, path: path, held: make(chan struct{}), abandoned: make(chan struct{})}
	p.mu.Lock()
	p.stall = s
	p.mu.Unlock()
	return s
}

// takeStall returns the stall that r matches, and clears it, or nil.
func (p *APIProxy) takeStall(r *http.Request) *Stall {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stall
	if s == nil || r.Method != s.method || r.URL.Path != s.path {
		return nil
	}
	p.stall = nil
	return s
}

// ProxiedRequest is one request that went through an APIProxy.
type ProxiedRequest struct {
	// Start is when the proxy received the request.
	Start time.Time
	// Method and URI are the request's method and path with its query.
	Method, URI string
	// Code is the response status, 502 when the API server could not be
	// reached, or 0 while the request is unanswered.
	Code int
}

// Watch reports whether the request is a watch.
func (r ProxiedRequest) Watch() bool {
	return strings.Contains(r.URI, "watch=true") || strings.Contains(r.URI, "watch=1") || strings.Contains(r.URI, "/watch/")
}

func (r ProxiedRequest) String() string {
	return fmt.Sprintf("%s %s %s -> %d", r.Start.Format("15:04:05.000"), r.Method, r.URI, r.Code)
}

// StartAPIProxy starts a proxy to the API server of adminKubeconfig, whose
// certificate authority it trusts; it uses none of its credentials.
func StartAPIProxy(adminKubeconfig string) (*APIProxy, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 {
		return nil, fmt.Errorf("%s has no certificate-authority-data", adminKubeconfig)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate in certificate-authority-data", adminKubeconfig)
	}
	p := &APIProxy{upstream: upstream}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
		},
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
		},
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := p.record(r)
		if s := p.takeStall(r); s != nil {
			s.heldAt = time.Now()
			close(s.held)
			<-r.Context().Done()
			s.abandonedAt = time.Now()
			close(s.abandoned)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		p.mu.Lock()
		p.requests[i].Code = code
		p.mu.Unlock()
	}))
	p.srv.EnableHTTP2 = true
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.StartTLS()
	return p, nil
}

func (p *APIProxy) record(r *http.Request) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, ProxiedRequest{Start: time.Now(), Method: r.Method, URI: r.URL.RequestURI()})
	return len(p.requests) - 1
}

// Requests returns the requests received from from until to.
func (p *APIProxy) Requests(from, to time.Time) []ProxiedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ProxiedRequest
	for _, r := range p.requests {
		if !r.Start.Before(from) && r.Start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// Kubeconfig writes to out a copy of kubeconfig in which every cluster is the
// proxy: the same user, through the proxy.
func (p *APIProxy) Kubeconfig(kubeconfig, out string) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return err
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	for _, c := range cfg.Clusters {
		c.Server = p.srv.URL
		c.CertificateAuthority = ""
		c.CertificateAuthorityData = ca
		c.InsecureSkipTLSVerify = false
	}
	return clientcmd.WriteToFile(*cfg, out)
}

// Close stops the proxy and ends the requests in flight.
func (p *APIProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// statusRecorder remembers the status code written through it.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Flush passes flushes on, so that watch events stream through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
