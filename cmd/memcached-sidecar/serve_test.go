package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/example-inc/memcached-operator/pkg/sidecar/sidecartest"
)

// patience bounds the wait for what a test expects to happen soon, such as
// a close after a timeout of 100 ms: far above it, so that a slow machine
// passes, and far below the test's own timeout.
const patience = 10 * time.Second

// startServer runs srv, with the sidecar's /healthz, on a loopback port
// behind a sidecar.LimitListener of maxConns until the test ends, and
// returns its address.
func startServer(t *testing.T, srv *http.Server, maxConns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, sidecar.LimitListener(ln, maxConns, maxConns, nil), srv) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveOn: %v", err)
		}
	})
	return ln.Addr().String()
}

// testMux serves /healthz, /upload, which reads the request's body, and
// /endless, whose reply never ends.
func testMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	mux.HandleFunc("/endless", func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	return mux
}

// waitClosed is sidecartest.WaitClosed within patience.
func waitClosed(t *testing.T, c net.Conn, since time.Time) time.Duration {
	t.Helper()
	return sidecartest.WaitClosed(t, c, since, patience)
}

// TestServerCutsSlowClients: the sidecar's HTTP server closes a client
// that sends its header a byte at a time, leaves its body unfinished,
// would take longer than the write timeout to read its reply, or keeps
// its connection idle, once the timeout of each passes; the other timeouts are an hour, so that only the
// one under test can close it.
func TestServerCutsSlowClients(t *testing.T) {
	const short, long = 100 * time.Millisecond, time.Hour
	tests := []struct {
		name string
		// set makes one of srv's timeouts short.
		set  func(srv *http.Server)
		send string
		// trickle, when set, is sent a byte at a time after send, until
		// the server closes.
		trickle bool
		// reply is whether to read a whole reply before waiting.
		reply bool
	}{
		{
			name:    "the header a byte at a time",
			set:     func(srv *http.Server) { srv.ReadHeaderTimeout = short },
			send:    "GET /healthz HTTP/1.1\r\nHost: sidecar\r\nX-Slow: ",
			trickle: true,
		},
		{
			name: "a body never finished",
			set:  func(srv *http.Server) { srv.ReadTimeout = short },
			send: "POST /upload HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 1000\r\n\r\nten bytes.",
		},
		{
			name: "a reply longer than the write timeout",
			set:  func(srv *http.Server) { srv.WriteTimeout = short },
			send: "GET /endless HTTP/1.1\r\nHost: sidecar\r\n\r\n",
		},
		{
			name:  "an idle kept connection",
			set:   func(srv *http.Server) { srv.IdleTimeout = short },
			send:  "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n",
			reply: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(testMux())
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = long, long, long, long
			tt.set(srv)
			addr := startServer(t, srv, httpMaxConns)
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
			if tt.reply {
				_ = c.SetReadDeadline(time.Now().Add(patience))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
					t.Fatalf("got %+v, %v; want 200 OK, the connection kept", resp, err)
				}
				resp.Body.Close()
			}
			if tt.trickle {
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := io.WriteString(c, "x"); err != nil {
								return
							}
						}
					}
				}()
			}
			if took := waitClosed(t, c, start); took < short {
				t.Errorf("closed after %v, before its timeout of %v", took, short)
			}
		})
	}
}

// TestServerRefusesLargeHeadersAndTooManyConnections: a header above
// httpMaxHeaderBytes gets 431, and a connection over the cap is closed at
// once, without a reply, while those open are held; once one closes, a
// new client is answered.
func TestServerRefusesLargeHeadersAndTooManyConnections(t *testing.T) {
	const max = 2
	addr := startServer(t, newServer(testMux()), max)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(patience))
	big := "GET /healthz HTTP/1.1\r\nHost: sidecar\r\nX-Big: " + strings.Repeat("x", 2*httpMaxHeaderBytes) + "\r\n\r\n"
	if _, err := io.WriteString(c, big); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header of %d bytes: got %+v, %v; want 431", len(big), resp, err)
	}
	c.Close()

	// The listener accepts in the order of the connections: the first max
	// are held before the next is accepted.
	held := make([]net.Conn, max)
	for i := range held {
		if held[i], err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		defer held[i].Close()
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetDeadline(time.Now().Add(patience))
	_, _ = io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(over), nil); err == nil {
		t.Errorf("connection %d: got %s, want it closed without a reply", max+1, resp.Status)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("connection %d: still open after %v, want it closed at once", max+1, patience)
	}

	held[0].Close()
	deadline := time.Now().Add(patience)
	client := &http.Client{Timeout: patience}
	for {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer within %v after a held connection closed: %v", patience, err)
		}
	}
	client.CloseIdleConnections()
}

// TestNewServerBoundsEverything: no timeout or size of the sidecar's
// server is Go's default, which is none.
func TestNewServerBoundsEverything(t *testing.T) {
	srv := newServer(http.NewServeMux())
	for name, v := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if v <= 0 {
			t.Errorf("%s: got %v, want a bound", name, v)
		}
	}
	if srv.MaxHeaderBytes <= 0 {
		t.Errorf("MaxHeaderBytes: got %d, want a bound", srv.MaxHeaderBytes)
	}
}

// TestProbeSucceedsWhileClientsHoldEveryConnection: clients that hold
// every connection the supervisor's server on the pod's IP takes, each
// answered once and kept idle, leave that server answering no one, and the
// liveness probe, run --probe against the loopback health server, still
// succeeds.
func TestProbeSucceedsWhileClientsHoldEveryConnection(t *testing.T) {
	addr, healthAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveWithHealth(ctx, addr, http.NewServeMux(), healthAddr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveWithHealth: %v", err)
		}
	})
	waitFor(t, "both servers", func() error {
		if err := probe(addr, patience); err != nil {
			return err
		}
		return probe(healthAddr, patience)
	})

	// A connection the server answered holds a slot. One that it closed
	// came while the server still held the closed connection of a probe
	// above, and is dialed again. Each client IP of the loopback's holds
	// its share, as many clients do on the pod network.
	for i := 0; i < httpMaxConns; i++ {
		from := fmt.Sprintf("127.0.0.%d", 2+i/httpMaxConnsPerClient)
		waitFor(t, "an answered connection", func() error {
			c, err := answered(from, addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			return nil
		})
	}

	if err := probe(addr, patience); err == nil {
		t.Errorf("GET %s/healthz answered with all %d connections held, want it refused", addr, httpMaxConns)
	}
	if err := run([]string{"--probe=" + healthAddr}); err != nil {
		t.Errorf("--probe=%s with all %d connections of %s held: %v, want success", healthAddr, httpMaxConns, addr, err)
	}
}

// answered dials addr from the IP from and returns the connection once
// the server has answered a GET of /healthz on it, kept open and idle.
func answered(from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(patience))
	if _, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n"); err == nil {
		var resp *http.Response
		if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, c.SetDeadline(time.Time{})
}
