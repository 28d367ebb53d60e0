package sidecar

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// twoNodes is a membership file of two nodes at version 12; its reply's
// data is 12\n, the line of nodes and its \n: 3 + 43 + 1 + 44 + 1 = 92 bytes.
const twoNodes = "12\nmycluster.0001.example.com|198.18.0.1|11211 mycluster.0002.example.com|198.18.0.20|11211\n"

// startDiscovery serves d on a loopback port until the test ends, and
// returns its address.
func startDiscovery(t *testing.T, d *Discovery) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startDiscoveryOn(t, d, ln)
	return ln.Addr().String()
}

// startDiscoveryOn serves d on ln until the test ends, and then expects
// Serve to return nil.
func startDiscoveryOn(t *testing.T, d *Discovery, ln net.Listener) {
	t.Helper()
	if d.Log == nil {
		d.Log, _ = logtest.NewNullLogger()
	}
	if d.Version == nil {
		d.Version = func(context.Context) (string, error) { return "1.6.18", nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// writeCluster writes the membership file path as the kubelet replaces a
// ConfigMap's file: whole, at once.
func writeCluster(t testing.TB, path, text string) {
	t.Helper()
	writeAuth(t, path, text)
}

// exchange sends req on c and reads the reply up to and including its
// line that ends the reply, last (such as "END"), or its first line when
// last is "".
func exchange(t *testing.T, c net.Conn, r *bufio.Reader, req, last string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var reply strings.Builder
	for {
		line, err := r.ReadString('\n')
		reply.WriteString(line)
		if err != nil {
			t.Fatalf("after %q: %v", reply.String(), err)
		}
		if last == "" || line == last+"\r\n" || strings.HasPrefix(line, "CLIENT_ERROR") || strings.HasPrefix(line, "SERVER_ERROR") {
			return reply.String()
		}
	}
}

// TestDiscoveryReplies checks each reply byte for byte: the data of the
// membership is the file's as it is, its length counts the \n after the
// version and after the nodes but not the \r\n before END, and every
// command that is not discovery's is refused.
func TestDiscoveryReplies(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster")
	writeCluster(t, file, twoNodes)
	addr := startDiscovery(t, &Discovery{File: file})
	refused := refusal + "\r\n"
	tests := []struct {
		name, req, last, want string
	}{
		{"config get cluster", "config get cluster\r\n", "END", "CONFIG cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n"},
		{"with a bare newline, as memcached takes it", "config get cluster\n", "END", "CONFIG cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n"},
		{"the key of engines before 1.4.14", "get AmazonElastiCache:cluster\r\n", "END", "VALUE AmazonElastiCache:cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n"},
		{"version", "version\r\n", "", "VERSION 1.6.18\r\n"},
		{"another key", "get foo\r\n", "", refused},
		{"two keys", "get AmazonElastiCache:cluster foo\r\n", "", refused},
		{"another config", "config get foo\r\n", "", refused},
		{"a set, whose data is skipped", "set foo 0 0 3\r\nbar\r\n", "", refused},
		{"stats", "stats\r\n", "", refused},
		{"an unknown command", "hello\r\n", "", refused},
		{"an empty line", "\r\n", "", "ERROR\r\n"},
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	// One connection for all: each reply must leave the next intact.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exchange(t, c, r, tt.req, tt.last); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("pipelined", func(t *testing.T) {
		got := exchange(t, c, r, "version\r\nconfig get cluster\r\n", "END")
		if want := "VERSION 1.6.18\r\nCONFIG cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("quit", func(t *testing.T) {
		if _, err := io.WriteString(c, "quit\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("after quit: got %v, want the connection closed", err)
		}
	})
}

// TestDiscoveryRepliesBeforeClosing: a connection that ends, by quit, by
// data that does not end where its line said, or by a line too long, first
// gets the replies to all it sent before, pipelined, and the error, as
// from memcached.
func TestDiscoveryRepliesBeforeClosing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster")
	writeCluster(t, file, twoNodes)
	addr := startDiscovery(t, &Discovery{File: file})
	tests := []struct {
		name, send, want string
	}{
		{"quit", "version\r\nquit\r\nversion\r\n", "VERSION 1.6.18\r\n"},
		{"data longer than said", "version\r\nset foo 0 0 3\r\nbarXX\r\nversion\r\n", "VERSION 1.6.18\r\nCLIENT_ERROR bad data chunk\r\n"},
		{"data above a login's", "version\r\nset foo 0 0 99999\r\n", "VERSION 1.6.18\r\nCLIENT_ERROR bad data chunk: the discovery endpoint stores nothing\r\n"},
		{"a line too long", "version\r\n" + strings.Repeat("x", maxCommandLine) + "\r\n", "VERSION 1.6.18\r\nCLIENT_ERROR line too long\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(patience))
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			// A close with what the client sent still unread is a reset.
			if errors.Is(err, syscall.ECONNRESET) {
				err = nil
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %q, %v; want %q, then the connection closed", got, err, tt.want)
			}
		})
	}
}

// TestDiscoveryFollowsTheFile: each request reads the file as the kubelet
// left it; a file that is missing, malformed or older than what was
// served leaves the last version served.
func TestDiscoveryFollowsTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster")
	log, hook := logtest.NewNullLogger()
	addr := startDiscovery(t, &Discovery{File: file, Log: log})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	three := "13\n198.18.0.1|198.18.0.1|11211 198.18.0.2|198.18.0.2|11211 198.18.0.3|198.18.0.3|11211\n"
	steps := []struct {
		name, write, want, wantLog string
	}{
		{name: "no file yet", want: "SERVER_ERROR the membership is not known yet: open " + file + ": no such file or directory\r\n"},
		{name: "the first", write: twoNodes, want: twoNodes},
		{name: "a new version", write: three, want: three},
		{name: "malformed", write: "14\nnot a node\n", want: three, wantLog: "discovery: serves version 13 again: the cluster file's node \"not\": not host|ip|port"},
		{name: "older", write: twoNodes, want: three, wantLog: "discovery: serves version 13 again: " + file + " holds version 12, which is older"},
		{name: "no node left", write: "14\n\n", want: "14\n\n"},
	}
	for _, s := range steps {
		hook.Reset()
		if s.write != "" {
			writeCluster(t, file, s.write)
		}
		got := exchange(t, c, r, "config get cluster\r\n", "END")
		want := s.want
		if !strings.HasPrefix(want, "SERVER_ERROR") {
			want = "CONFIG cluster 0 " + strconv.Itoa(len(s.want)) + "\r\n" + s.want + "\r\nEND\r\n"
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", s.name, got, want)
		}
		var warned string
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				warned = e.Message
			}
		}
		if warned != s.wantLog {
			t.Errorf("%s: logged %q, want %q", s.name, warned, s.wantLog)
		}
	}
}

// TestDiscoveryLogin: with a -Y file every command before memcached's
// ASCII login is refused as memcached refuses it, a wrong or malformed
// login too, and a user of the file, as it is at the login, gets in.
func TestDiscoveryLogin(t *testing.T) {
	dir := t.TempDir()
	file, auth := filepath.Join(dir, "cluster"), filepath.Join(dir, "passwords")
	writeCluster(t, file, twoNodes)
	writeAuth(t, auth, "app:s3cret\nreporting:0ther\n")
	addr := startDiscovery(t, &Discovery{File: file, AuthFile: auth})
	tests := []struct {
		name    string
		rotate  string
		steps   [][2]string
		wantEnd string
	}{
		{
			name: "refused before the login, served after",
			steps: [][2]string{
				{"config get cluster\r\n", "CLIENT_ERROR unauthenticated\r\n"},
				{"version\r\n", "CLIENT_ERROR unauthenticated\r\n"},
				{"get AmazonElastiCache:cluster\r\n", "CLIENT_ERROR unauthenticated\r\n"},
				{"set auth 0 0 10\r\nbad-format\r\n", "CLIENT_ERROR bad authentication token format\r\n"},
				{"set auth 0 0 9\r\napp wrong\r\n", "CLIENT_ERROR authentication failure\r\n"},
				{"config get cluster\r\n", "CLIENT_ERROR unauthenticated\r\n"},
				{"set auth 0 0 15\r\nreporting 0ther\r\n", "STORED\r\n"},
				{"version\r\n", "VERSION 1.6.18\r\n"},
			},
			wantEnd: "CONFIG cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n",
		},
		{
			name:   "the file as it is now",
			rotate: "app:n3w\n",
			steps: [][2]string{
				{"set auth 0 0 10\r\napp s3cret\r\n", "CLIENT_ERROR authentication failure\r\n"},
				{"set auth 0 0 7\r\napp n3w\r\n", "STORED\r\n"},
			},
			wantEnd: "CONFIG cluster 0 92\r\n" + twoNodes + "\r\nEND\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.rotate != "" {
				writeAuth(t, auth, tt.rotate)
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for _, s := range tt.steps {
				if got := exchange(t, c, r, s[0], ""); got != s[1] {
					t.Errorf("%q: got %q, want %q", s[0], got, s[1])
				}
			}
			if got := exchange(t, c, r, "config get cluster\r\n", "END"); got != tt.wantEnd {
				t.Errorf("after the login: got %q, want %q", got, tt.wantEnd)
			}
		})
	}
}

// TestDiscoveryTLS: with a TLS Secret the endpoint speaks TLS only, with
// the certificate as the kubelet last wrote it, and with client
// certificates required refuses a client without one.
func TestDiscoveryTLS(t *testing.T) {
	dir := t.TempDir()
	file, tlsDir := filepath.Join(dir, "cluster"), filepath.Join(dir, "tls")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeCluster(t, file, twoNodes)
	writeSecret(t, tlsDir, 1)
	plain := startDiscovery(t, &Discovery{File: file, TLSDir: tlsDir})
	required := startDiscovery(t, &Discovery{File: file, TLSDir: tlsDir, ClientCert: true})
	dial := func(addr string, clientCert bool) (*tls.Conn, error) {
		pem, err := os.ReadFile(filepath.Join(tlsDir, caFile))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		if clientCert {
			pair, err := LoadPair(tlsDir)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return nil, err
		}
		// TLS 1.3 tells a refused client certificate at the first read.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "version\r\n"); err != nil {
			c.Close()
			return nil, err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		if line != "VERSION 1.6.18\r\n" {
			t.Errorf("version over TLS: got %q", line)
		}
		return c, nil
	}
	serial := func(c *tls.Conn) int64 { return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64() }
	c, err := dial(plain, false)
	if err != nil {
		t.Fatalf("TLS: %v", err)
	}
	if got := serial(c); got != 1 {
		t.Errorf("certificate serial: got %d, want 1", got)
	}
	c.Close()
	raw, err := net.Dial("tcp", plain)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(raw, "config get cluster\r\n")
	if line, _ := bufio.NewReader(raw).ReadString('\n'); strings.HasPrefix(line, "CONFIG") {
		t.Errorf("plaintext got %q, want no membership", line)
	}
	raw.Close()

	writeSecret(t, tlsDir, 2)
	c, err = dial(plain, false)
	if err != nil {
		t.Fatalf("TLS after the rotation: %v", err)
	}
	if got := serial(c); got != 2 {
		t.Errorf("certificate serial after the rotation: got %d, want 2", got)
	}
	c.Close()

	if c, err := dial(required, false); err == nil {
		c.Close()
		t.Error("a client without a certificate got in where client certificates are required")
	}
	c, err = dial(required, true)
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	c.Close()

	// A pair that does not load leaves the last one served.
	if err := os.WriteFile(filepath.Join(tlsDir, keyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = dial(plain, false)
	if err != nil {
		t.Fatalf("TLS with a broken key file: %v", err)
	}
	if got := serial(c); got != 2 {
		t.Errorf("certificate serial with a broken key file: got %d, want 2 kept", got)
	}
	c.Close()
}

// TestDiscoveryVersionOfRealMemcached: "version" answers memcached's
// own version, through the sidecar's Dialer, with its login.
func TestDiscoveryVersionOfRealMemcached(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "passwords")
	writeAuth(t, auth, "app:s3cret\n")
	d := Dialer{Credentials: login{User: "app", Password: "s3cret"}}
	m := startMemcached(t, d, "-Y", auth)
	d.Addr = m.addr()
	file := filepath.Join(dir, "cluster")
	writeCluster(t, file, twoNodes)
	addr := startDiscovery(t, &Discovery{File: file, Version: func(ctx context.Context) (string, error) {
		c, err := d.Dial(ctx)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.Version()
	}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := exchange(t, c, bufio.NewReader(c), "version\r\n", ""), "VERSION "+memcachedVersion(t)+"\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
