package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
	other := t.TempDir()
	writeSecret(t, other, 2)
	b, err := os.ReadFile(filepath.Join(other, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
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
