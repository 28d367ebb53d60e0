package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus/hooks/test"
)

// TestReportTellsAndClearsARefusedCertificate: a key that does not match
// its certificate is reported from its second check on, by the report the
// operator polls, and the report clears once a good pair is mounted and
// memcached serves it.
func TestReportTellsAndClearsARefusedCertificate(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, 1)
	f := startFake(t, &fakeMemcached{dir: dir})
	log, _ := test.NewNullLogger()
	r := NewRefresher(Dialer{Addr: f.addr, TLSDir: dir}, log, prometheus.NewRegistry())
	ctx := context.Background()
	report := func() Report {
		t.Helper()
		rec := httptest.NewRecorder()
		ReportHandler(r, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReportPath, nil))
		var got Report
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %q: %v", ReportPath, rec.Code, rec.Body.String(), err)
		}
		return got
	}
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	writeKeyOfAnotherCertificate(t, dir)
	_ = r.Check(ctx)
	if got := report(); !reflect.DeepEqual(got, Report{Problems: []Problem{}}) {
		t.Errorf("after one check of the mismatched pair: got %+v, want no problem yet", got)
	}
	_ = r.Check(ctx)
	got := report()
	if len(got.Problems) != 1 || got.Problems[0].Reason != ReasonCertificateRefreshFailed {
		t.Fatalf("after two checks: got %+v, want one %s", got, ReasonCertificateRefreshFailed)
	}
	writeSecret(t, dir, 3)
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got := report(); len(got.Problems) != 0 {
		t.Errorf("after a good pair: got %+v, want no problem", got)
	}
}

// TestReportOfBothParts: the report lists the problems of the certificate
// refresh and the -Y file's reload, each with its reason.
func TestReportOfBothParts(t *testing.T) {
	r := &Refresher{problem: "memcached refused to reload its certificate: refresh_certs: ERROR"}
	a := &AuthReloader{problem: "the mounted -Y file is malformed"}
	rec := httptest.NewRecorder()
	ReportHandler(r, a).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReportPath, nil))
	var got Report
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := Report{Problems: []Problem{
		{Reason: ReasonCertificateRefreshFailed, Message: r.problem},
		{Reason: ReasonAuthReloadFailed, Message: a.problem},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestFetchReportFromTheHandler reads the report that the sidecar's
// own handler serves, as the operator's poll and the supervisor do, and
// refuses an answer that is not one.
func TestFetchReportFromTheHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(ReportPath, ReportHandler(nil, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r, err := FetchReport(context.Background(), srv.Client(), srv.URL+ReportPath)
	if err != nil || r.Problems == nil || len(r.Problems) != 0 {
		t.Errorf("got %+v, %v; want an empty report", r, err)
	}
	if _, err := FetchReport(context.Background(), srv.Client(), srv.URL+"/metrics"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a path without a report: got %v, want 404", err)
	}
}

// problemsJSON returns a report's body of n problems of reason with
// message.
func problemsJSON(n int, reason, message string) string {
	p, _ := json.Marshal(Problem{Reason: reason, Message: message})
	return `{"problems":[` + strings.TrimSuffix(strings.Repeat(string(p)+",", n), ",") + `]}`
}

// TestFetchReportBounds: a body above MaxReportBytes, with or without its
// length, is ErrReportTooLarge; one of exactly MaxReportBytes is read; a
// report of more than MaxReportProblems problems, or with a reason that is
// no CamelCase word, is ErrReportInvalid, with an error of one short line;
// a long message, and the worker's last exit, are cut to
// MaxReportMessageBytes, between runes; a reason the operator does not
// know stays.
func TestFetchReportBounds(t *testing.T) {
	// The cut, at MaxReportMessageBytes-len(TruncatedMarker), an even
	// number, falls within a rune of two bytes, and moves to its start.
	long := "x" + strings.Repeat("é", MaxReportMessageBytes)
	cut := long[:MaxReportMessageBytes-len(TruncatedMarker)-1] + TruncatedMarker
	atBound := strings.Repeat("y", MaxReportMessageBytes)
	exact := `{"problems":[]}`
	exact += strings.Repeat(" ", MaxReportBytes-len(exact))
	tests := []struct {
		name   string
		body   string
		length bool // whether the reply says its Content-Length
		want   Report
		// wantErr is the sentinel of the error, nil for none.
		wantErr error
	}{
		{name: "one byte too many", body: exact + " ", wantErr: ErrReportTooLarge},
		{name: "one byte too many, of a stated length", body: exact + " ", length: true, wantErr: ErrReportTooLarge},
		{name: "exactly the bound", body: exact, want: Report{Problems: []Problem{}}},
		{name: "the most problems", body: problemsJSON(MaxReportProblems, ReasonAuthReloadFailed, "m"),
			want: Report{Problems: slices.Repeat([]Problem{{ReasonAuthReloadFailed, "m"}}, MaxReportProblems)}},
		{name: "a problem too many", body: problemsJSON(MaxReportProblems+1, ReasonAuthReloadFailed, "m"), wantErr: ErrReportInvalid},
		{name: "a long message", body: problemsJSON(1, ReasonCertificateRefreshFailed, long),
			want: Report{Problems: []Problem{{ReasonCertificateRefreshFailed, cut}}}},
		{name: "a message at the bound", body: problemsJSON(1, ReasonCertificateRefreshFailed, atBound),
			want: Report{Problems: []Problem{{ReasonCertificateRefreshFailed, atBound}}}},
		{name: "a long last exit", body: `{"problems":[],"worker":{"running":true,"lastExit":"` + long + `"}}`,
			want: Report{Problems: []Problem{}, Worker: &WorkerState{Running: true, LastExit: cut}}},
		{name: "an unknown reason", body: problemsJSON(1, "DiskFull", "m"), want: Report{Problems: []Problem{{"DiskFull", "m"}}}},
		{name: "a reason of two words", body: problemsJSON(1, "Disk full", "m"), wantErr: ErrReportInvalid},
		{name: "an empty reason", body: problemsJSON(1, "", "m"), wantErr: ErrReportInvalid},
		{name: "a long reason", body: problemsJSON(1, "A"+strings.Repeat("b", MaxReportReasonBytes), "m"), wantErr: ErrReportInvalid},
		{name: "not JSON", body: "<html>", wantErr: ErrReportInvalid},
		{name: "a string for the problems", body: `{"problems":"` + strings.Repeat("x", 1000) + `"}`, wantErr: ErrReportInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.length {
					w.Header().Set("Content-Length", strconv.Itoa(len(tt.body)))
				}
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			got, err := FetchReport(context.Background(), srv.Client(), srv.URL+ReportPath)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want %v", got, err, tt.wantErr)
				}
				if msg := strings.TrimPrefix(err.Error(), "GET "+srv.URL+ReportPath+": "); len(msg) > 200 || strings.Contains(msg, "\n") {
					t.Errorf("the error is not one short line: %q", msg)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
			for _, p := range got.Problems {
				if !utf8.ValidString(p.Message) {
					t.Errorf("message %q is not UTF-8", p.Message)
				}
			}
		})
	}
}

// endless is a body that never ends: the start of a report whose message
// never closes, as a hostile pod may serve on a sidecar's port.
type endless struct{ started bool }

func (e *endless) Read(p []byte) (int, error) {
	if !e.started {
		e.started = true
		return copy(p, `{"problems":[{"reason":"X","message":"`), nil
	}
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// countingTransport counts the bytes its caller reads of the bodies of
// the replies.
type countingTransport struct {
	http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(req)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestFetchReportOfAnEndlessBody: an endless body is ErrReportTooLarge
// after MaxReportBytes+1 bytes read, not one more, and FetchReport closes
// the connection rather than draining it, so that the server's writes
// fail: a pod that took the operator from 63 MiB to 831 MiB so now costs
// it 64 KiB.
func TestFetchReportOfAnEndlessBody(t *testing.T) {
	served := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, err := io.Copy(w, &endless{})
		served <- err
	}))
	defer srv.Close()
	transport := &countingTransport{RoundTripper: srv.Client().Transport}
	client := &http.Client{Transport: transport}
	_, err := FetchReport(context.Background(), client, srv.URL+ReportPath)
	if !errors.Is(err, ErrReportTooLarge) {
		t.Fatalf("got %v, want %v", err, ErrReportTooLarge)
	}
	if want := "GET " + srv.URL + ReportPath + ": report larger than 64 KiB"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if got := transport.read.Load(); got != MaxReportBytes+1 {
		t.Errorf("read %d bytes of the body, want %d", got, MaxReportBytes+1)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Error("the endless body ended")
		}
	case <-time.After(patience):
		t.Fatalf("the server still writes %v after FetchReport returned: the connection was not closed", patience)
	}
}
