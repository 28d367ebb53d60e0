package sidecar

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// maxCommandLine bounds a command line, as memcached bounds its own: a
// longer one is refused and the connection closed.
const maxCommandLine = 2048

// maxLoginData bounds the data of a set that logs in: a user and a
// password, not a value.
const maxLoginData = 4096

// The bounds of the discovery endpoint's waits and connections. Any pod of
// the cluster can reach it, so a client that connects and sends nothing,
// stops halfway through a request or a TLS handshake, or opens connection
// after connection, must cost a bounded share of the worker's memory
// (GOMEMLIMIT 24MiB) for a bounded time; ElastiCache's clients send a
// request and read its reply at once.
const (
	// DefaultHandshakeTimeout bounds a TLS handshake, a few round trips
	// on the pod network that take milliseconds.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds a request from its first byte to its
	// reply's last: a command line of at most 2048 bytes and a login's
	// data of at most 4096, which a client sends at once, and a reply that
	// it reads at once.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds the wait for a request's first byte:
	// twice the minute at which ElastiCache's clients ask for the
	// membership by default, so that a client that keeps its connection
	// between polls keeps it, while one that went without closing it,
	// with its pod's network, frees its slot.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConns caps the open connections: room for the clients
	// that keep a connection to the configuration endpoint, the Service,
	// which spreads them over the pods; and at most 27 KiB each with TLS
	// (both ends of an idle TLS connection in one Go process, measured),
	// 7 MiB in all.
	DefaultMaxConns = 256
	// DefaultMaxConnsPerClient caps the open connections of one IP: an
	// application process keeps one to the configuration endpoint, and
	// the pods of a cluster reach it from their own IPs, so that a pod
	// that opens thousands takes 16 and leaves the rest to the others.
	DefaultMaxConnsPerClient = 16
)

// clusterKey is the key that ElastiCache's clients older than its engine
// 1.4.14 get the membership with.
const clusterKey = "AmazonElastiCache:cluster"

// refusal is the reply to every command the discovery endpoint does not
// serve: it is no memcached, and a client that took it for one must learn
// so at its first command rather than miss every key.
const refusal = "CLIENT_ERROR this is the discovery endpoint: it serves \"config get cluster\", \"get " + clusterKey + "\" and \"version\" alone; memcached serves on its own port"

// Discovery serves ElastiCache's auto discovery on the memcached pod: the
// reply to "config get cluster" (engine 1.4.14 and later) and to
// "get AmazonElastiCache:cluster" (earlier), and "version", which clients
// ask first to choose between the two; it refuses every other command
// with a CLIENT_ERROR.
//
// The membership is the file File, the discovery ConfigMap's key as the
// kubelet mounts it. It is read at every request, so that what the kubelet
// writes is served at once; a file that cannot be read or parsed, or whose
// version is below one served before, is logged and the last good one is
// served instead, so that a client never sees the version go back.
//
// With TLSDir it speaks TLS only, with the certificate memcached serves
// (tls.crt and tls.key), read at each handshake, so that a rotation by the
// kubelet reaches it as the Refresher makes it reach memcached; with
// ClientCert it requires client certificates signed by the Secret's
// ca.crt, as memcached's ssl_verify_mode does. With AuthFile, memcached's
// -Y file, it requires memcached's ASCII login first: a set of any key
// whose data is a user and a password of the file, separated by a space;
// before it every command gets "CLIENT_ERROR unauthenticated", as from
// memcached 1.6.
//
// Any pod of the cluster can reach it, so it bounds what a client holds:
// how long a TLS handshake, a request and an idle connection may take
// (HandshakeTimeout, RequestTimeout, IdleTimeout), and how many
// connections are open (MaxConns). Connections share no lock held across
// network I/O with each other, nor with the sidecar's refresh, reload and
// report, which run in goroutines of their own.
type Discovery struct {
	// File is the membership, the text of a Cluster.
	File string
	// TLSDir, when set, holds the mounted kubernetes.io/tls Secret.
	TLSDir string
	// ClientCert requires client certificates that TLSDir's ca.crt signed.
	ClientCert bool
	// AuthFile, when set, is memcached's -Y file.
	AuthFile string
	// Version returns memcached's version, as its "version" command
	// says it, such as 1.6.18: the engine version that clients compare with
	// 1.4.14 to choose the command they ask the membership with.
	Version func(ctx context.Context) (string, error)
	// Log takes what the endpoint serves in place of a file it cannot use.
	Log logrus.FieldLogger
	// HandshakeTimeout, RequestTimeout and IdleTimeout bound the waits
	// for a client; zero is DefaultHandshakeTimeout, DefaultRequestTimeout
	// and DefaultIdleTimeout.
	HandshakeTimeout, RequestTimeout, IdleTimeout time.Duration
	// MaxConns caps the open connections, and MaxConnsPerClient those of
	// one remote IP (see LimitListener); zero is DefaultMaxConns and
	// DefaultMaxConnsPerClient.
	MaxConns, MaxConnsPerClient int
	// Refused, when set, counts the connections closed at once because
	// MaxConns, or MaxConnsPerClient of the client's, were open (see
	// NewRefusedCounter).
	Refused prometheus.Counter

	mu sync.Mutex
	// served is the last membership served; version is memcached's
	// version, once known.
	served  *Cluster
	version string
	// tlsConfig is the last TLS configuration whose files loaded.
	tlsConfig *tls.Config
}

// ListenAndServe serves the discovery endpoint at addr until ctx ends.
func (d *Discovery) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return d.Serve(ctx, ln)
}

// Serve serves the discovery endpoint on ln until ctx ends, and closes it.
// A temporary accept error (see temporaryAcceptError) waits and serves on;
// any other returns.
func (d *Discovery) Serve(ctx context.Context, ln net.Listener) error {
	ln = LimitListener(ln, orDefault(d.MaxConns, DefaultMaxConns), orDefault(d.MaxConnsPerClient, DefaultMaxConnsPerClient), d.refuse)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var conns sync.WaitGroup
	defer conns.Wait()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !temporaryAcceptError(err) {
				return err
			}
			backoff = acceptBackoff(backoff)
			d.Log.Warnf("discovery: accepts again in %v: %v", backoff, err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		backoff = 0
		conns.Add(1)
		go func() {
			defer conns.Done()
			d.serveConn(ctx, c)
		}()
	}
}

// refuse counts a connection closed over MaxConns.
func (d *Discovery) refuse() {
	if d.Refused != nil {
		d.Refused.Inc()
	}
	d.Log.Debugf("discovery: closed a connection over the cap of %d", orDefault(d.MaxConns, DefaultMaxConns))
}

// NewRefusedCounter returns the counter of Discovery.Refused,
// memcached_sidecar_discovery_connections_refused_total, registered with reg.
func NewRefusedCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memcached_sidecar_discovery_connections_refused_total",
		Help: "Connections to the discovery endpoint that the sidecar closed at once because its cap of open connections was reached.",
	})
	reg.MustRegister(c)
	return c
}

// orDefault returns v, or def when v is zero.
func orDefault[T time.Duration | int](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// configForClient returns the TLS configuration of a handshake, from the
// files as they are now, or the last that loaded when they do not.
func (d *Discovery) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	cfg, err := d.loadTLS()
	d.mu.Lock()
	if err == nil {
		d.tlsConfig = cfg
	}
	last := d.tlsConfig
	d.mu.Unlock()
	switch {
	case err == nil:
		return cfg, nil
	case last == nil:
		return nil, err
	}
	d.Log.Warnf("discovery: keeps its last certificate: %v", err)
	return last, nil
}

// loadTLS reads the TLS configuration from TLSDir.
func (d *Discovery) loadTLS() (*tls.Config, error) {
	pair, err := LoadPair(d.TLSDir)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if d.ClientCert {
		pem, err := os.ReadFile(filepath.Join(d.TLSDir, caFile))
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no certificate", filepath.Join(d.TLSDir, caFile))
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// serveConn answers the commands of one connection until the client
// quits or goes, or ctx ends. With TLSDir it first completes the handshake
// within HandshakeTimeout. Then it waits IdleTimeout for each request's
// first byte, and gives the request RequestTimeout to arrive whole and its
// reply to be sent; a client that does not keep up is closed.
func (d *Discovery) serveConn(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	c := raw
	if d.TLSDir != "" {
		tc := tls.Server(raw, &tls.Config{GetConfigForClient: d.configForClient})
		_ = raw.SetDeadline(time.Now().Add(orDefault(d.HandshakeTimeout, DefaultHandshakeTimeout)))
		if tc.Handshake() != nil {
			return
		}
		defer tc.Close() // sends close_notify, within 5 s, before raw closes
		c = tc
	}
	idle, request := orDefault(d.IdleTimeout, DefaultIdleTimeout), orDefault(d.RequestTimeout, DefaultRequestTimeout)
	r := bufio.NewReaderSize(c, maxCommandLine)
	w := bufio.NewWriter(c)
	// The replies to the requests the client pipelined before it quit,
	// went, or broke the protocol, as memcached sends them.
	defer w.Flush()
	authenticated := d.AuthFile == ""
	for {
		if r.Buffered() == 0 {
			_ = c.SetReadDeadline(time.Now().Add(idle))
		}
		if _, err := r.Peek(1); err != nil {
			return
		}
		_ = c.SetDeadline(time.Now().Add(request))
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			_, _ = w.WriteString("CLIENT_ERROR line too long\r\n")
			return
		}
		if err != nil {
			return
		}
		reply, quit := "ERROR\r\n", false
		if fields := strings.Fields(string(line)); len(fields) > 0 {
			reply, quit, authenticated = d.answer(ctx, fields, r, authenticated)
		}
		if _, err := w.WriteString(reply); err != nil || quit {
			return
		}
		// Requests are answered in order; replies go out once the client
		// has sent all it pipelined.
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
}

// answer returns the reply to the command of fields, whose data, if it
// has any, it reads from r; whether the connection is to close after the
// reply; and whether the client is logged in after it.
func (d *Discovery) answer(ctx context.Context, fields []string, r *bufio.Reader, authenticated bool) (reply string, quit, loggedIn bool) {
	cmd := fields[0]
	if cmd == "quit" {
		return "", true, authenticated
	}
	var data []byte
	if storage(cmd) {
		var err error
		data, err = readData(fields, r)
		switch {
		case errors.Is(err, io.EOF):
			// The client went, or stalled, within the data.
			return "", true, authenticated
		case err != nil:
			return "CLIENT_ERROR " + err.Error() + "\r\n", errors.Is(err, errBadDataChunk), authenticated
		}
	}
	if !authenticated {
		if cmd != "set" {
			return "CLIENT_ERROR unauthenticated\r\n", false, false
		}
		reply, ok := d.login(string(data))
		return reply, false, ok
	}
	switch {
	case cmd == "version" && len(fields) == 1:
		return d.versionReply(ctx), false, true
	case cmd == "config" && len(fields) == 3 && fields[1] == "get" && fields[2] == "cluster":
		return d.clusterReply("CONFIG cluster"), false, true
	case cmd == "get" && len(fields) == 2 && fields[1] == clusterKey:
		return d.clusterReply("VALUE " + clusterKey), false, true
	}
	return refusal + "\r\n", false, true
}

// storage reports whether cmd is one of memcached's storage commands,
// which send a data block after their line.
func storage(cmd string) bool {
	switch cmd {
	case "set", "add", "replace", "append", "prepend", "cas":
		return true
	}
	return false
}

// errBadDataChunk reports a data block that does not end where its
// command line said, after which memcached closes the connection too.
var errBadDataChunk = errors.New("bad data chunk")

// readData reads the data block of a storage command, whose length is its
// fifth field, as memcached does, and its \r\n.
func readData(fields []string, r *bufio.Reader) ([]byte, error) {
	if len(fields) < 5 {
		return nil, errors.New("bad command line format")
	}
	n, err := strconv.Atoi(fields[4])
	if err != nil || n < 0 {
		return nil, errors.New("bad command line format")
	}
	if n > maxLoginData {
		return nil, fmt.Errorf("%w: the discovery endpoint stores nothing", errBadDataChunk)
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, io.EOF
	}
	if string(data[n:]) != "\r\n" {
		return nil, errBadDataChunk
	}
	return data[:n], nil
}

// login answers memcached's ASCII login, whose data is token, against the
// -Y file as it is now.
func (d *Discovery) login(token string) (reply string, ok bool) {
	user, password, found := strings.Cut(token, " ")
	if !found {
		return "CLIENT_ERROR bad authentication token format\r\n", false
	}
	b, err := os.ReadFile(d.AuthFile)
	var creds []Credential
	if err == nil {
		creds, err = ParseAuthFile(b)
	}
	if err != nil {
		d.Log.Warnf("discovery: refuses every login: the -Y file %s: %v", d.AuthFile, err)
		return "CLIENT_ERROR authentication failure\r\n", false
	}
	for _, c := range creds {
		if c.User == user && c.Password == password {
			return "STORED\r\n", true
		}
	}
	return "CLIENT_ERROR authentication failure\r\n", false
}

// versionReply is the reply to "version": memcached's own version, asked
// once and then kept, since it cannot change while the pod runs.
func (d *Discovery) versionReply(ctx context.Context) string {
	d.mu.Lock()
	v := d.version
	d.mu.Unlock()
	if v == "" {
		var err error
		if v, err = d.Version(ctx); err != nil {
			return "SERVER_ERROR memcached's version is not known yet: " + oneLine(err.Error()) + "\r\n"
		}
		d.mu.Lock()
		d.version = v
		d.mu.Unlock()
	}
	return "VERSION " + v + "\r\n"
}

// clusterReply is the reply to a request of the membership: head, then
// the flags and the length of the data, the data, and END.
func (d *Discovery) clusterReply(head string) string {
	c, err := d.cluster()
	if err != nil {
		return "SERVER_ERROR " + oneLine(err.Error()) + "\r\n"
	}
	text := c.Text()
	return head + " 0 " + strconv.Itoa(len(text)) + "\r\n" + text + "\r\nEND\r\n"
}

// cluster returns the membership to serve: File's, unless it cannot be
// read or parsed, or its version is below the last served, when the last
// served stays.
func (d *Discovery) cluster() (Cluster, error) {
	b, err := os.ReadFile(d.File)
	var c Cluster
	if err == nil {
		c, err = ParseCluster(string(b))
	}
	// The log lines are written after the lock is released, so that a
	// slow log never holds up another connection.
	d.mu.Lock()
	served := d.served
	if err == nil && (served == nil || c.Version >= served.Version) {
		d.served = &c
	}
	d.mu.Unlock()
	switch {
	case err != nil && served == nil:
		return Cluster{}, fmt.Errorf("the membership is not known yet: %v", err)
	case err != nil:
		d.Log.Warnf("discovery: serves version %d again: %v", served.Version, err)
		return *served, nil
	case served != nil && c.Version < served.Version:
		d.Log.Warnf("discovery: serves version %d again: %s holds version %d, which is older", served.Version, d.File, c.Version)
		return *served, nil
	}
	if served == nil || c.Version != served.Version {
		d.Log.Infof("discovery: serves version %d, %d nodes", c.Version, len(c.Nodes))
	}
	return c, nil
}

// oneLine keeps a reply on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// Version returns memcached's version, as the reply to its "version"
// command says it.
func (c *Conn) Version() (string, error) {
	reply, err := c.command("version\r\n")
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(reply, "VERSION ")
	if !ok {
		return "", fmt.Errorf("version: %s", reply)
	}
	return v, nil
}
