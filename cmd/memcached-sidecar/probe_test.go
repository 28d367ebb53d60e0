package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbeSucceedsOnOKAlone: --probe's request succeeds on a 200 OK, and
// fails on any other status, a refused connection and a server that takes
// the connection but does not answer within the timeout.
func TestProbeSucceedsOnOKAlone(t *testing.T) {
	answering := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != healthPath {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	// silent's backlog takes the connection, and no one accepts it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	tests := []struct {
		name    string
		addr    string
		timeout time.Duration
		// want is part of the error, "" for success.
		want string
	}{
		{name: "200", addr: answering(http.StatusOK), timeout: patience},
		{name: "500", addr: answering(http.StatusInternalServerError), timeout: patience, want: "500 Internal Server Error"},
		{name: "503", addr: answering(http.StatusServiceUnavailable), timeout: patience, want: "503 Service Unavailable"},
		{name: "refused", addr: freeAddr(t), timeout: patience, want: "connection refused"},
		{name: "no answer", addr: silent.Addr().String(), timeout: 100 * time.Millisecond, want: "Timeout exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := probe(tt.addr, tt.timeout)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestRunProbe: run with --probe returns nil on a 200 OK, and otherwise
// the probeFailed that main writes as one line and exits 1 on.
func TestRunProbe(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) }))
	defer srv.Close()
	arg := "--probe=" + srv.Listener.Addr().String()
	if err := run([]string{arg}); err != nil {
		t.Errorf("200: got %v, want nil", err)
	}
	code.Store(http.StatusInternalServerError)
	err := run([]string{arg})
	var failed probeFailed
	if !errors.As(err, &failed) || strings.Contains(err.Error(), "\n") {
		t.Errorf("500: got %#v, want a probeFailed of one line", err)
	}
}
