package sidecar

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// memcachedStats is a reply of memcached 1.6.18 to stats, cut to the lines
// the sidecar exports and a few it ignores.
var memcachedStats = map[string]string{
	"pid": "1", "version": "1.6.18", "uptime": "42", "curr_connections": "3", "total_connections": "17",
	"get_hits": "5", "get_misses": "2", "evictions": "0", "bytes": "1024", "limit_maxbytes": "67108864",
	"curr_items": "4", "listen_disabled_num": "1", "rusage_user": "0.012345",
}

const wantStats = `
# HELP memcached_connections_listener_disabled_total Times memcached stopped accepting connections because it reached its connection limit.
# TYPE memcached_connections_listener_disabled_total counter
memcached_connections_listener_disabled_total 1
# HELP memcached_connections_total Client connections opened since memcached started.
# TYPE memcached_connections_total counter
memcached_connections_total 17
# HELP memcached_current_bytes Bytes the items take.
# TYPE memcached_current_bytes gauge
memcached_current_bytes 1024
# HELP memcached_current_connections Open client connections.
# TYPE memcached_current_connections gauge
memcached_current_connections 3
# HELP memcached_current_items Items in the cache.
# TYPE memcached_current_items gauge
memcached_current_items 4
# HELP memcached_get_hits_total Gets that found their key.
# TYPE memcached_get_hits_total counter
memcached_get_hits_total 5
# HELP memcached_get_misses_total Gets that did not find their key.
# TYPE memcached_get_misses_total counter
memcached_get_misses_total 2
# HELP memcached_items_evicted_total Items removed before they expired to make room for new ones.
# TYPE memcached_items_evicted_total counter
memcached_items_evicted_total 0
# HELP memcached_limit_bytes Bytes memcached may use for items, its -m.
# TYPE memcached_limit_bytes gauge
memcached_limit_bytes 6.7108864e+07
# HELP memcached_up Whether the last stats command to memcached succeeded.
# TYPE memcached_up gauge
memcached_up 1
# HELP memcached_uptime_seconds Seconds since memcached started.
# TYPE memcached_uptime_seconds gauge
memcached_uptime_seconds 42
# HELP memcached_version The version of memcached, in the label version.
# TYPE memcached_version gauge
memcached_version{version="1.6.18"} 1
`

const wantDown = `
# HELP memcached_up Whether the last stats command to memcached succeeded.
# TYPE memcached_up gauge
memcached_up 0
`

func TestStatsCollector(t *testing.T) {
	tests := []struct {
		name string
		// tls and password configure the fake memcached.
		tls      bool
		password string
		// login is the password the sidecar logs in with.
		login string
		// clientCert makes the sidecar present the Secret's certificate.
		clientCert bool
		down       bool
		want       string
	}{
		{name: "plaintext", want: wantStats},
		{name: "TLS", tls: true, want: wantStats},
		{name: "TLS with a client certificate", tls: true, clientCert: true, want: wantStats},
		{name: "TLS and login", tls: true, password: "s3cret", login: "s3cret", want: wantStats},
		{name: "wrong password", tls: true, password: "s3cret", login: "wrong", want: wantDown},
		{name: "memcached down", down: true, want: wantDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := &fakeMemcached{password: tt.password, stats: memcachedStats}
			d := Dialer{ClientCert: tt.clientCert}
			if tt.tls {
				writeSecret(t, dir, 1)
				f.dir, d.TLSDir = dir, dir
			}
			if tt.login != "" {
				d.Credentials = login{User: "sidecar", Password: tt.login}
			}
			if tt.down {
				d.Addr = "127.0.0.1:1"
			} else {
				d.Addr = startFake(t, f).addr
			}
			log, _ := test.NewNullLogger()
			c := &StatsCollector{Dialer: d, Log: log}
			if err := testutil.CollectAndCompare(c, strings.NewReader(tt.want)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestParseStatsSkipsMissingAndMalformed(t *testing.T) {
	tests := []struct {
		name  string
		stats map[string]string
		want  int
	}{
		{name: "all", stats: memcachedStats, want: 1 + len(statMetrics)},
		{name: "none", stats: map[string]string{}, want: 0},
		{name: "no version, one number, one malformed", stats: map[string]string{"uptime": "1", "bytes": "x"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(parseStats(tt.stats)); got != tt.want {
				t.Errorf("got %d metrics, want %d", got, tt.want)
			}
		})
	}
}

// refreshCounts returns the refresh counter's success and failure values.
func refreshCounts(t *testing.T, r *Refresher) (success, failure float64) {
	t.Helper()
	return testutil.ToFloat64(r.refreshes.WithLabelValues("success")), testutil.ToFloat64(r.refreshes.WithLabelValues("failure"))
}

func TestRefresher(t *testing.T) {
	tests := []struct {
		name string
		// change runs between the first and the second check.
		change        func(t *testing.T, dir string)
		refuseRefresh bool
		clientCert    bool
		// wantRefreshes is how often memcached gets refresh_certs.
		wantRefreshes int
		wantSuccess   float64
		wantFailure   float64
		wantSerial    string
		wantErr       string
		wantLogged    string
		// wantProblem is the Report's problem after a third check.
		wantProblem string
	}{
		{name: "unchanged files", change: func(*testing.T, string) {}, wantSerial: "1"},
		{name: "new certificate", change: func(t *testing.T, dir string) { writeSecret(t, dir, 2) },
			wantRefreshes: 1, wantSuccess: 1, wantSerial: "2", wantLogged: "memcached reloaded its certificate with refresh_certs"},
		{name: "new certificate and CA with client certificates", clientCert: true, change: func(t *testing.T, dir string) { writeSecret(t, dir, 3) },
			wantRefreshes: 1, wantSuccess: 1, wantSerial: "3", wantLogged: "memcached reloaded its certificate with refresh_certs"},
		{name: "memcached refuses", refuseRefresh: true, change: func(t *testing.T, dir string) { writeSecret(t, dir, 2) },
			wantRefreshes: 1, wantFailure: 1, wantSerial: "1", wantErr: "memcached refused to reload its certificate",
			wantProblem: "memcached refused to reload its certificate: refresh_certs: ERROR failed to refresh SSL settings"},
		{name: "key of another certificate", change: func(t *testing.T, dir string) {
			other := t.TempDir()
			writeSecret(t, other, 2)
			b, err := os.ReadFile(filepath.Join(other, keyFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, keyFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantSerial: "1", wantErr: "the mounted certificate is not usable yet",
			wantProblem: "the mounted certificate files do not load, so the sidecar does not ask memcached to load them and memcached keeps the certificate it serves: tls: private key does not match public key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSecret(t, dir, 1)
			f := startFake(t, &fakeMemcached{dir: dir, password: "pw", refuseRefresh: tt.refuseRefresh})
			log, hook := test.NewNullLogger()
			r := NewRefresher(Dialer{Addr: f.addr, TLSDir: dir, ClientCert: tt.clientCert, Credentials: login{User: "sidecar", Password: "pw"}}, log, prometheus.NewRegistry())
			ctx := context.Background()
			if err := r.Check(ctx); err != nil {
				t.Fatalf("first check: %v", err)
			}
			tt.change(t, dir)
			err := r.Check(ctx)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("second check: got error %v, want %q", err, tt.wantErr)
			}
			if got := f.count("refresh_certs"); got != tt.wantRefreshes {
				t.Errorf("memcached got refresh_certs %d times, want %d", got, tt.wantRefreshes)
			}
			if s, fl := refreshCounts(t, r); s != tt.wantSuccess || fl != tt.wantFailure {
				t.Errorf("got refreshes success %v failure %v, want %v and %v", s, fl, tt.wantSuccess, tt.wantFailure)
			}
			c, err := (&Dialer{Addr: f.addr, TLSDir: dir, Credentials: login{User: "sidecar", Password: "pw"}}).Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := serial(c); got != tt.wantSerial {
				t.Errorf("a new connection gets serial %s, want %s", got, tt.wantSerial)
			}
			if tt.wantLogged != "" && !logged(hook, tt.wantLogged) {
				t.Errorf("no log line %q", tt.wantLogged)
			}
			if tt.wantSuccess > 0 {
				// The refresh's line says how long after the files were
				// written it came: the sidecar's share of a rotation.
				since, _ := hook.LastEntry().Data["sinceFilesWritten"].(string)
				if d, err := time.ParseDuration(since); err != nil || d < 0 || d > time.Minute {
					t.Errorf("the refresh's log line has sinceFilesWritten %q (%v), want the time since the change", since, err)
				}
			}
			// A third check with nothing new changes nothing more.
			_ = r.Check(ctx)
			if got := f.count("refresh_certs"); got != tt.wantRefreshes+boolInt(tt.refuseRefresh) {
				t.Errorf("after a third check memcached got refresh_certs %d times, want %d", got, tt.wantRefreshes+boolInt(tt.refuseRefresh))
			}
			if got := r.Problem(); got != tt.wantProblem {
				t.Errorf("problem %q, want %q", got, tt.wantProblem)
			}
		})
	}
}

// TestRefresherRetryAfter checks that a refused refresh of the same files
// waits for RetryAfter, while new files are tried at once.
func TestRefresherRetryAfter(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, 1)
	f := startFake(t, &fakeMemcached{dir: dir, refuseRefresh: true})
	log, _ := test.NewNullLogger()
	r := NewRefresher(Dialer{Addr: f.addr, TLSDir: dir}, log, prometheus.NewRegistry())
	r.RetryAfter = time.Hour
	ctx := context.Background()
	if err := r.Check(ctx); err != nil {
		t.Fatalf("first check: %v", err)
	}
	writeSecret(t, dir, 2)
	for i := 0; i < 3; i++ {
		err := r.Check(ctx)
		if wantErr := i == 0; (err != nil) != wantErr {
			t.Errorf("check %d of the refused files: got %v, want an error: %t", i, err, wantErr)
		}
	}
	if got := f.count("refresh_certs"); got != 1 {
		t.Errorf("memcached got refresh_certs %d times within RetryAfter, want 1", got)
	}
	writeSecret(t, dir, 3)
	if err := r.Check(ctx); err == nil {
		t.Error("check of new files within RetryAfter: got no error, want memcached's refusal")
	}
	if got := f.count("refresh_certs"); got != 2 {
		t.Errorf("memcached got refresh_certs %d times, want 2: new files are tried at once", got)
	}
}

// TestRefresherWaitsForMemcached checks that checks before memcached
// listens, as when the sidecar starts first, count no failed refresh, and
// that the first check that reaches memcached sends nothing.
func TestRefresherWaitsForMemcached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	writeSecret(t, dir, 1)
	log, _ := test.NewNullLogger()
	r := NewRefresher(Dialer{Addr: addr, TLSDir: dir}, log, prometheus.NewRegistry())
	for i := 0; i < 2; i++ {
		if err := r.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "failed to connect") {
			t.Errorf("check %d without memcached: got %v, want a connection error", i, err)
		}
	}
	f := startFake(t, &fakeMemcached{addr: addr, dir: dir})
	if err := r.Check(context.Background()); err != nil {
		t.Errorf("check with memcached: %v", err)
	}
	if s, fl := refreshCounts(t, r); s != 0 || fl != 0 || f.count("refresh_certs") != 0 {
		t.Errorf("got refreshes success %v failure %v and %d refresh_certs, want none", s, fl, f.count("refresh_certs"))
	}
}

// boolInt is 1 for true: a refused refresh is tried again on the next check.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func logged(hook *test.Hook, msg string) bool {
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, msg) && e.Level == logrus.InfoLevel {
			return true
		}
	}
	return false
}
