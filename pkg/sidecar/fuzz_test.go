package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	logtest "github.com/sirupsen/logrus/hooks/test"
)

// scriptConn is a connection whose client sends in, in reads of at most
// chunk bytes, and then closes its side; it keeps what the server writes.
type scriptConn struct {
	in    []byte
	chunk int
	out   bytes.Buffer
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// serveScript returns what d answers a client that sends in, in reads of
// chunk bytes.
func serveScript(d *Discovery, in []byte, chunk int) string {
	c := &scriptConn{in: in, chunk: max(chunk, 1)}
	d.serveConn(context.Background(), c)
	return c.out.String()
}

// wantReplies returns what the endpoint without auth answers to in, as
// TestDiscoveryReplies states it, or ok false when in has a storage
// command, whose data the model does not follow. The longest line the
// endpoint takes is maxCommandLine bytes with its \n.
func wantReplies(in []byte, cluster string) (want string, ok bool) {
	var b strings.Builder
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\n')
		if i < 0 && len(in) < maxCommandLine {
			break // the client went within a line
		}
		if i < 0 || i+1 > maxCommandLine {
			b.WriteString("CLIENT_ERROR line too long\r\n")
			break
		}
		fields := strings.Fields(string(in[:i+1]))
		in = in[i+1:]
		switch {
		case len(fields) == 0:
			b.WriteString("ERROR\r\n")
		case storage(fields[0]):
			return "", false
		case fields[0] == "quit":
			return b.String(), true
		case len(fields) == 1 && fields[0] == "version":
			b.WriteString("VERSION 1.6.18\r\n")
		case len(fields) == 3 && fields[0] == "config" && fields[1] == "get" && fields[2] == "cluster":
			b.WriteString("CONFIG cluster 0 92\r\n" + cluster + "\r\nEND\r\n")
		case len(fields) == 2 && fields[0] == "get" && fields[1] == clusterKey:
			b.WriteString("VALUE " + clusterKey + " 0 92\r\n" + cluster + "\r\nEND\r\n")
		default:
			b.WriteString(refusal + "\r\n")
		}
	}
	return b.String(), true
}

// FuzzDiscoveryConn feeds a connection's bytes, in reads of chunk bytes,
// to the discovery endpoint's per-connection code, with and without a -Y
// file: it must not panic; it answers at most one reply, of at most the
// longest reply, per line; how the bytes arrive changes nothing; without
// auth it answers as TestDiscoveryReplies states; with auth it serves no
// membership before a login.
func FuzzDiscoveryConn(f *testing.F) {
	seeds := []string{
		"version\r\n",
		"config get cluster\r\nget AmazonElastiCache:cluster\r\n",
		"config get cluster\n\r\nversion\r\nquit\r\nversion\r\n",
		"get foo\r\nstats\r\n\t \r\nconfig  get\tcluster \r\n",
		"set auth 0 0 10\r\napp s3cret\r\nconfig get cluster\r\n",
		"set auth 0 0 10\r\napp s3cretXX\r\n",
		"set auth 0 0 -1\r\nset auth 0 0 99999\r\n",
		"set auth 0 0\r\nset auth 0 0 +3\r\nab\r\n",
		strings.Repeat("x", maxCommandLine-2) + "\r\nversion\r\n",
		strings.Repeat("x", maxCommandLine-1) + "\r\nversion\r\n",
		strings.Repeat("v", maxCommandLine+10),
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(1), false)
		f.Add([]byte(s), uint16(7), true)
	}
	dir := f.TempDir()
	file, auth := filepath.Join(dir, "cluster"), filepath.Join(dir, "passwords")
	writeCluster(f, file, twoNodes)
	writeAuth(f, auth, "app:s3cret\n")
	log, _ := logtest.NewNullLogger()
	version := func(context.Context) (string, error) { return "1.6.18", nil }
	longest := len(refusal) + len("\r\n")
	f.Fuzz(func(t *testing.T, in []byte, chunk uint16, withAuth bool) {
		d := &Discovery{File: file, Log: log, Version: version}
		if withAuth {
			d.AuthFile = auth
		}
		got := serveScript(d, in, int(chunk))
		if whole := serveScript(d, in, len(in)); whole != got {
			t.Fatalf("in reads of %d bytes: %q; at once: %q", chunk, got, whole)
		}
		if bound := (bytes.Count(in, []byte("\n")) + 1) * longest; len(got) > bound {
			t.Fatalf("%d bytes of replies to %d lines, more than %d", len(got), bytes.Count(in, []byte("\n")), bound)
		}
		if withAuth {
			before, _, _ := strings.Cut(got, "STORED\r\n")
			if strings.Contains(before, "CONFIG cluster") || strings.Contains(before, "VALUE ") || strings.Contains(before, "VERSION ") {
				t.Fatalf("served before a login: %q", before)
			}
			return
		}
		if want, ok := wantReplies(in, twoNodes); ok && got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// FuzzParseAuthFile: ParseAuthFile does not panic; it refuses exactly the
// files memcached refuses, an empty one or one with a line without a
// colon; and each credential it returns is its line of the file, in
// order, the password being what follows the first colon and a line's
// \r dropped.
func FuzzParseAuthFile(f *testing.F) {
	for _, s := range []string{
		"app:s3cret\n", "app:s3cret", "app:s3cret\r\nother:p:w\r\n", "a:\n:b\n", "", "\n", "a:b\n\n", "a:b\nnocolon\n",
		"a b:c d\n", "\r\n", "a:b\r\r\n", "é:ü\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		creds, err := ParseAuthFile(b)
		text := strings.TrimSuffix(string(b), "\n")
		lines := strings.Split(text, "\n")
		refused := text == "" || slices.ContainsFunc(lines, func(l string) bool { return !strings.Contains(l, ":") })
		if (err != nil) != refused {
			t.Fatalf("%q: got %v, want refused %t", b, err, refused)
		}
		if err != nil {
			return
		}
		if len(creds) != len(lines) {
			t.Fatalf("%q: %d credentials of %d lines", b, len(creds), len(lines))
		}
		for i, c := range creds {
			if line := strings.TrimSuffix(lines[i], "\r"); c.User+":"+c.Password != line {
				t.Errorf("%q: credential %d %+v is not its line %q", b, i+1, c, line)
			}
			if strings.Contains(c.User, ":") || strings.Contains(c.User+c.Password, "\n") {
				t.Errorf("%q: credential %d %+v: a user with a colon, or a newline", b, i+1, c)
			}
		}
	})
}

// FuzzDecodeReport: DecodeReport does not panic; a body above
// MaxReportBytes is ErrReportTooLarge; every error is one of its two,
// in a short line; a report it returns is within every bound, and
// decoding it again changes nothing.
func FuzzDecodeReport(f *testing.F) {
	for _, s := range []string{
		`{"problems":[]}`,
		problemsJSON(1, ReasonCertificateRefreshFailed, "memcached refused to reload its certificate: refresh_certs: ERROR"),
		problemsJSON(MaxReportProblems, ReasonAuthReloadFailed, "m"),
		problemsJSON(MaxReportProblems+1, ReasonAuthReloadFailed, "m"),
		problemsJSON(1, "Not CamelCase", "m"),
		problemsJSON(1, ReasonSidecarFailing, strings.Repeat("é", MaxReportMessageBytes)),
		`{"problems":[],"worker":{"running":false,"restarts":3,"lastExit":"exit status 1"}}`,
		`{"problems":null}`, `null`, `[]`, `{"problems":[{"reason":1}]}`, `{"problems":[{}]}`,
		`{"problems":[]}` + strings.Repeat(" ", MaxReportBytes),
		`{"problems":[{"reason":"X","message":"` + strings.Repeat("a", MaxReportBytes),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(bytes.NewReader(b))
		if len(b) > MaxReportBytes && !errors.Is(err, ErrReportTooLarge) {
			t.Fatalf("a body of %d bytes: got %v, want %v", len(b), err, ErrReportTooLarge)
		}
		if err != nil {
			if !errors.Is(err, ErrReportTooLarge) && !errors.Is(err, ErrReportInvalid) {
				t.Fatalf("got %v, want %v or %v", err, ErrReportTooLarge, ErrReportInvalid)
			}
			if msg := err.Error(); len(msg) > 512 || strings.Contains(msg, "\n") {
				t.Fatalf("the error is not one short line: %q", msg)
			}
			return
		}
		if len(r.Problems) > MaxReportProblems {
			t.Fatalf("%d problems, more than %d", len(r.Problems), MaxReportProblems)
		}
		texts := []string{}
		for _, p := range r.Problems {
			if len(p.Reason) > MaxReportReasonBytes || !reasonPattern.MatchString(p.Reason) {
				t.Fatalf("reason %q", p.Reason)
			}
			texts = append(texts, p.Message)
		}
		if r.Worker != nil {
			texts = append(texts, r.Worker.LastExit)
		}
		for _, s := range texts {
			if len(s) > MaxReportMessageBytes || !utf8.ValidString(s) {
				t.Fatalf("a message of %d bytes, more than %d, or not UTF-8: %q", len(s), MaxReportMessageBytes, s)
			}
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeReport(bytes.NewReader(again))
		if err != nil || !slices.Equal(r2.Problems, r.Problems) || (r.Worker == nil) != (r2.Worker == nil) || r.Worker != nil && *r.Worker != *r2.Worker {
			t.Fatalf("decoded again: got %+v, %v; want %+v", r2, err, r)
		}
	})
}
