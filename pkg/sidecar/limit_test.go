package sidecar

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/sidecar/sidecartest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// patience bounds the wait for what a test expects to happen soon, such as
// a close after a timeout of 100 ms: far above it, so that a slow machine
// passes, and far below the test's own timeout, so that a failure says
// what did not happen.
const patience = 10 * time.Second

// waitClosed is sidecartest.WaitClosed within patience.
func waitClosed(t *testing.T, c net.Conn, since time.Time) time.Duration {
	t.Helper()
	return sidecartest.WaitClosed(t, c, since, patience)
}

// askVersion sends "version" on a new connection to addr and reads the
// reply, or the error that a refused connection gets.
func askVersion(addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return askVersionOn(c)
}

// askVersionOn sends "version" on c and reads the reply, within patience.
func askVersionOn(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(c, "version\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// eventuallyAnswered asks addr for its version until it answers, within
// patience.
func eventuallyAnswered(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		reply, err := askVersion(addr)
		if err == nil && reply == "VERSION 1.6.18\r\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new client is not answered within %v: %q, %v", patience, reply, err)
		}
	}
}

// clientHello returns the first record a TLS client sends, its
// ClientHello.
func clientHello(t *testing.T) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		// It fails once server closes.
		_ = tls.Client(client, &tls.Config{ServerName: "127.0.0.1"}).Handshake()
		client.Close()
	}()
	_ = server.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, 16<<10)
	n, err := server.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// tlsVersion asks addr for its version over TLS, trusting tlsDir's CA.
func tlsVersion(t *testing.T, addr, tlsDir string) (string, error) {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(tlsDir, caFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: patience}, Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return askVersionOn(c)
}

// TestDiscoveryClosesStalledClients: a client that sends nothing, stops
// within a request or a login's data, or stalls in its TLS handshake, with
// nothing sent or half a ClientHello, is closed once its timeout passes,
// and not before; the other timeouts are an hour, so that only the one
// under test can close it.
func TestDiscoveryClosesStalledClients(t *testing.T) {
	dir := t.TempDir()
	file, auth, tlsDir := filepath.Join(dir, "cluster"), filepath.Join(dir, "passwords"), filepath.Join(dir, "tls")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeCluster(t, file, twoNodes)
	writeAuth(t, auth, "app:s3cret\n")
	writeSecret(t, tlsDir, 1)
	const short, long = 100 * time.Millisecond, time.Hour
	hello := clientHello(t)
	tests := []struct {
		name string
		// handshake, request and idle are the timeouts, long when zero.
		handshake, request, idle time.Duration
		tls, auth                bool
		send                     string
	}{
		{name: "nothing sent", idle: short},
		{name: "idle after a reply", idle: short, send: "version\r\n"},
		{name: "half a command line", request: short, send: "config get"},
		{name: "a line without its data", request: short, auth: true, send: "set auth 0 0 10\r\napp"},
		{name: "TLS, nothing sent", handshake: short, tls: true},
		{name: "TLS, half a ClientHello", handshake: short, tls: true, send: string(hello[:len(hello)/2])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Discovery{
				File:             file,
				HandshakeTimeout: orDefault(tt.handshake, long),
				RequestTimeout:   orDefault(tt.request, long),
				IdleTimeout:      orDefault(tt.idle, long),
			}
			if tt.tls {
				d.TLSDir = tlsDir
			}
			if tt.auth {
				d.AuthFile = auth
			}
			addr := startDiscovery(t, d)
			// Before the server can start any timeout of the connection.
			start := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			if took := waitClosed(t, c, start); took < short {
				t.Errorf("closed after %v, before its timeout of %v", took, short)
			}
		})
	}
}

// TestDiscoveryServesTLSBesideStalledHandshakes: clients that stall in
// their handshake hold nothing that another client's handshake needs, such
// as the lock of the TLS configuration: a new client gets in at once.
func TestDiscoveryServesTLSBesideStalledHandshakes(t *testing.T) {
	dir := t.TempDir()
	file, tlsDir := filepath.Join(dir, "cluster"), filepath.Join(dir, "tls")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeCluster(t, file, twoNodes)
	writeSecret(t, tlsDir, 1)
	const stalled = 7
	addr := startDiscovery(t, &Discovery{File: file, TLSDir: tlsDir, MaxConns: stalled + 1})
	hello := clientHello(t)
	for i := 0; i < stalled; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(hello[:len(hello)/2]); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := tlsVersion(t, addr, tlsDir); err != nil || got != "VERSION 1.6.18\r\n" {
		t.Errorf("beside %d stalled handshakes: got %q, %v, want the version", stalled, got, err)
	}
}

// TestDiscoveryCapsConnections: with MaxConns open, a new connection is
// closed at once, without a reply, and counted, while those open are
// still served; once one of them closes, by the client or by the idle
// timeout, a new client is answered.
func TestDiscoveryCapsConnections(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster")
	writeCluster(t, file, twoNodes)
	const max = 3
	tests := []struct {
		name string
		idle time.Duration
		// release frees a slot of the held connections.
		release func(t *testing.T, held []net.Conn, r []*bufio.Reader)
	}{
		{
			name: "a client quits",
			idle: time.Hour,
			release: func(t *testing.T, held []net.Conn, _ []*bufio.Reader) {
				if _, err := io.WriteString(held[0], "quit\r\n"); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "the idle timeout closes them",
			idle: time.Second,
			release: func(t *testing.T, held []net.Conn, _ []*bufio.Reader) {
				for _, c := range held {
					waitClosed(t, c, time.Now())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := NewRefusedCounter(prometheus.NewRegistry())
			addr := startDiscovery(t, &Discovery{File: file, MaxConns: max, IdleTimeout: tt.idle, Refused: refused})
			start := time.Now()
			held := make([]net.Conn, max)
			readers := make([]*bufio.Reader, max)
			for i := range held {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				held[i], readers[i] = c, bufio.NewReader(c)
				if got := exchange(t, c, readers[i], "version\r\n", ""); got != "VERSION 1.6.18\r\n" {
					t.Fatalf("held connection %d: got %q", i, got)
				}
			}

			over, err := askVersion(addr)
			// The held connections' idle timeouts start after their
			// replies, after start: before start+idle, all are open.
			if time.Since(start) < tt.idle {
				if err == nil || over != "" {
					t.Errorf("connection %d: got %q, %v; want it closed without a reply", max+1, over, err)
				}
				if got := testutil.ToFloat64(refused); got != 1 {
					t.Errorf("refused: got %v, want 1", got)
				}
				if got := exchange(t, held[max-1], readers[max-1], "version\r\n", ""); got != "VERSION 1.6.18\r\n" {
					t.Errorf("a held connection after the refusal: got %q", got)
				}
			}

			tt.release(t, held, readers)
			eventuallyAnswered(t, addr)
		})
	}
}

// flakyListener fails its first Accepts with errs, and then accepts.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// timeoutError is a net.Error of a timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// acceptError is the error of a failed accept(2), as package net returns it.
func acceptError(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// TestDiscoveryServesAfterTemporaryAcceptErrors: an accept that fails for
// a while, as when the process is out of file descriptors, is retried,
// with a warning each time, and clients are served after; any other error
// ends Serve with it.
func TestDiscoveryServesAfterTemporaryAcceptErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster")
	writeCluster(t, file, twoNodes)
	const times = 4
	tests := []struct {
		name string
		err  error
	}{
		{"EMFILE", acceptError(syscall.EMFILE)},
		{"ENFILE", acceptError(syscall.ENFILE)},
		{"ENOBUFS", acceptError(syscall.ENOBUFS)},
		{"ECONNABORTED", acceptError(syscall.ECONNABORTED)},
		{"a timeout", timeoutError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, times)
			for i := range errs {
				errs[i] = tt.err
			}
			log, hook := logtest.NewNullLogger()
			startDiscoveryOn(t, &Discovery{File: file, Log: log}, &flakyListener{Listener: ln, errs: errs})
			eventuallyAnswered(t, ln.Addr().String())
			warned := 0
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel {
					warned++
				}
			}
			if warned != times {
				t.Errorf("warned %d times, want %d", warned, times)
			}
		})
	}

	t.Run("a permanent error", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		permanent := acceptError(syscall.EINVAL)
		log, _ := logtest.NewNullLogger()
		d := &Discovery{File: file, Log: log}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := d.Serve(ctx, &flakyListener{Listener: ln, errs: []error{permanent}}); err != permanent {
			t.Errorf("got %v, want %v", err, permanent)
		}
	})
}

func TestAcceptBackoff(t *testing.T) {
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	var got time.Duration
	for i, w := range want {
		got = acceptBackoff(got)
		if got != w*time.Millisecond {
			t.Fatalf("wait %d: got %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
}

// queuedListener returns, from Accept, connections from the queued remote
// addresses, one each, and fails once they are gone.
type queuedListener struct {
	net.Listener
	remotes chan net.Addr
	closed  []string
}

func (l *queuedListener) Accept() (net.Conn, error) {
	select {
	case a := <-l.remotes:
		local, remote := net.Pipe()
		remote.Close()
		return &addrConn{Conn: local, remote: a, l: l}, nil
	default:
		return nil, net.ErrClosed
	}
}

// addrConn is a connection from remote that records its closing.
type addrConn struct {
	net.Conn
	remote net.Addr
	l      *queuedListener
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

func (c *addrConn) Close() error {
	c.l.closed = append(c.l.closed, c.remote.String())
	return c.Conn.Close()
}

func TestLimitListenerSharesSlotsBetweenClients(t *testing.T) {
	from := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	q := &queuedListener{remotes: make(chan net.Addr, 16)}
	refused := 0
	ln := LimitListener(q, 3, 2, func() { refused++ })
	accept := func(addrs ...net.Addr) (net.Conn, error) {
		for _, a := range addrs {
			q.remotes <- a
		}
		return ln.Accept()
	}

	a1, err := accept(from("198.18.0.10", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accept(from("198.18.0.10", 2)); err != nil {
		t.Fatal(err)
	}
	// A third of the same IP is over its share of 2, and closed; another
	// IP gets the last slot.
	b, err := accept(from("198.18.0.10", 3), from("198.18.0.11", 1))
	if err != nil || b.RemoteAddr().String() != "198.18.0.11:1" {
		t.Fatalf("got %v, %v; want the connection of 198.18.0.11", b, err)
	}
	if refused != 1 || len(q.closed) != 1 || q.closed[0] != "198.18.0.10:3" {
		t.Fatalf("refused %d, closed %v; want the third of 198.18.0.10 alone", refused, q.closed)
	}
	// With 3 open, a third IP is refused, until one of them closes.
	if c, err := accept(from("198.18.0.12", 1)); err == nil {
		t.Fatalf("accepted %v over the cap of 3", c.RemoteAddr())
	}
	if refused != 2 {
		t.Fatalf("refused %d, want 2", refused)
	}
	a1.Close()
	a1.Close() // a second close frees nothing more
	c, err := accept(from("198.18.0.12", 2))
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	c.Close()
	b.Close()
	// Closed, b's IP has its whole share again, as has a new one.
	for i := range 2 {
		if _, err := accept(from("198.18.0.11", 10+i)); err != nil {
			t.Fatalf("198.18.0.11 again: %v", err)
		}
	}
}
