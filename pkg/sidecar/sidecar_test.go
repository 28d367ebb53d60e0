package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// memcachedStats is a reply of memcached 1.6.18 to stats, cut to some of
// the lines the sidecar exports and a few it ignores.
var memcachedStats = map[string]string{
	"pid": "1", "version": "1.6.18", "uptime": "42", "max_connections": "1024", "curr_connections": "3", "total_connections": "17",
	"cmd_set": "9", "cas_hits": "1", "cas_misses": "1", "cas_badval": "1", "get_hits": "5", "get_misses": "2",
	"evictions": "0", "limit_maxbytes": "67108864", "rusage_user": "0.012345", "libevent": "2.1.12-stable",
}

const wantStats = `
# HELP memcached_commands_total Commands memcached served since it started, by command and by status (hit, miss, badval).
# TYPE memcached_commands_total counter
memcached_commands_total{command="cas",status="badval"} 1
memcached_commands_total{command="cas",status="hit"} 1
memcached_commands_total{command="cas",status="miss"} 1
memcached_commands_total{command="get",status="hit"} 5
memcached_commands_total{command="get",status="miss"} 2
memcached_commands_total{command="set",status="hit"} 6
# HELP memcached_connections_total Client connections memcached accepted since it started.
# TYPE memcached_connections_total counter
memcached_connections_total 17
# HELP memcached_current_connections Client connections open now, the sidecar's own included.
# TYPE memcached_current_connections gauge
memcached_current_connections 3
# HELP memcached_items_evicted_total Items removed before they expired to make room for new ones.
# TYPE memcached_items_evicted_total counter
memcached_items_evicted_total 0
# HELP memcached_limit_bytes Bytes memcached may use for items, its -m.
# TYPE memcached_limit_bytes gauge
memcached_limit_bytes 6.7108864e+07
# HELP memcached_max_connections How many client connections memcached takes at most, its -c.
# TYPE memcached_max_connections gauge
memcached_max_connections 1024
# HELP memcached_process_user_cpu_seconds_total CPU seconds memcached's process spent in user mode.
# TYPE memcached_process_user_cpu_seconds_total counter
memcached_process_user_cpu_seconds_total 0.012345
# HELP memcached_sidecar_stats_lines_skipped_total Lines of memcached's stats replies that the sidecar skipped, by reason: malformed, not STAT with a name and a value; not_a_number, the value of a stat it exports.
# TYPE memcached_sidecar_stats_lines_skipped_total counter
memcached_sidecar_stats_lines_skipped_total{reason="malformed"} 0
memcached_sidecar_stats_lines_skipped_total{reason="not_a_number"} 0
# HELP memcached_up Whether the sidecar's last stats command to memcached got a reply: 1 yes, 0 no.
# TYPE memcached_up gauge
memcached_up 1
# HELP memcached_uptime_seconds Seconds since memcached started.
# TYPE memcached_uptime_seconds gauge
memcached_uptime_seconds 42
# HELP memcached_version Always 1; the label version is the version memcached reports.
# TYPE memcached_version gauge
memcached_version{version="1.6.18"} 1
`

const wantDown = `
# HELP memcached_sidecar_stats_lines_skipped_total Lines of memcached's stats replies that the sidecar skipped, by reason: malformed, not STAT with a name and a value; not_a_number, the value of a stat it exports.
# TYPE memcached_sidecar_stats_lines_skipped_total counter
memcached_sidecar_stats_lines_skipped_total{reason="malformed"} 0
memcached_sidecar_stats_lines_skipped_total{reason="not_a_number"} 0
# HELP memcached_up Whether the sidecar's last stats command to memcached got a reply: 1 yes, 0 no.
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
			c := NewStatsCollector(d, log)
			if err := testutil.CollectAndCompare(c, strings.NewReader(tt.want)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStatsCollectorSkipsOddLines checks that lines of a stats reply the
// sidecar cannot read are counted and cost only themselves: memcached
// stays up, and the other stats are there.
func TestStatsCollectorSkipsOddLines(t *testing.T) {
	f := startFake(t, &fakeMemcached{
		stats:      map[string]string{"curr_items": "4", "bytes": "1.5e3", "curr_connections": "many", "threads": "four"},
		extraStats: []string{"STAT", "STAT evicted_unfetched", "STAT tls version 1.3", "COUNT 3", ""},
	})
	log, _ := test.NewNullLogger()
	c := NewStatsCollector(Dialer{Addr: f.addr}, log)
	for scrape := 1; scrape <= 2; scrape++ {
		if err := testutil.CollectAndCompare(c, strings.NewReader(fmt.Sprintf(`
# HELP memcached_current_bytes Bytes the items take now.
# TYPE memcached_current_bytes gauge
memcached_current_bytes 1500
# HELP memcached_current_items Items in the cache now.
# TYPE memcached_current_items gauge
memcached_current_items 4
# HELP memcached_sidecar_stats_lines_skipped_total Lines of memcached's stats replies that the sidecar skipped, by reason: malformed, not STAT with a name and a value; not_a_number, the value of a stat it exports.
# TYPE memcached_sidecar_stats_lines_skipped_total counter
memcached_sidecar_stats_lines_skipped_total{reason="malformed"} %d
memcached_sidecar_stats_lines_skipped_total{reason="not_a_number"} %d
# HELP memcached_up Whether the sidecar's last stats command to memcached got a reply: 1 yes, 0 no.
# TYPE memcached_up gauge
memcached_up 1
`, 5*scrape, scrape))); err != nil {
			t.Errorf("scrape %d: %v", scrape, err)
		}
	}
}

func TestReadStats(t *testing.T) {
	tests := []struct {
		name          string
		reply         string
		want          map[string]string
		wantMalformed []string
		wantErr       string
	}{
		{name: "memcached's", reply: "STAT pid 7\r\nSTAT version 1.6.18\r\nEND\r\n",
			want: map[string]string{"pid": "7", "version": "1.6.18"}},
		{name: "empty", reply: "END\r\n", want: map[string]string{}},
		{name: "a value with a space", reply: "STAT libevent 2.1 stable\r\nSTAT pid 7\r\nEND\r\n",
			want: map[string]string{"pid": "7"}, wantMalformed: []string{"STAT libevent 2.1 stable"}},
		{name: "no value", reply: "STAT uptime\r\nEND\r\n", want: map[string]string{}, wantMalformed: []string{"STAT uptime"}},
		{name: "not STAT", reply: "ITEM 1 2\r\nSTAT pid 7\r\nEND\r\n", want: map[string]string{"pid": "7"}, wantMalformed: []string{"ITEM 1 2"}},
		{name: "an empty line", reply: "\r\nSTAT pid 7\r\nEND\r\n", want: map[string]string{"pid": "7"}, wantMalformed: []string{""}},
		{name: "lines ending in a newline alone", reply: "STAT pid 7\nEND\n", want: map[string]string{"pid": "7"}},
		{name: "tabs between the fields", reply: "STAT pid\t7\r\nEND\r\n", want: map[string]string{"pid": "7"}},
		{name: "a non-number is the collector's to judge", reply: "STAT uptime soon\r\nEND\r\n", want: map[string]string{"uptime": "soon"}},
		{name: "unauthenticated", reply: "CLIENT_ERROR unauthenticated\r\n", wantErr: "memcached replied to stats: CLIENT_ERROR unauthenticated"},
		{name: "unknown command", reply: "ERROR\r\n", wantErr: "memcached replied to stats: ERROR"},
		{name: "out of memory after some stats", reply: "STAT pid 7\r\nSERVER_ERROR out of memory\r\n", wantErr: "memcached replied to stats: SERVER_ERROR out of memory"},
		{name: "cut before END", reply: "STAT pid 7\r\n", wantErr: "EOF"},
		{name: "a stat named like an error", reply: "STAT ERRORS 1\r\nEND\r\n", want: map[string]string{"ERRORS": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readStats(bufio.NewReader(strings.NewReader(tt.reply)))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Values, tt.want) || !reflect.DeepEqual(got.Malformed, tt.wantMalformed) {
				t.Errorf("got %v and malformed %q, want %v and %q", got.Values, got.Malformed, tt.want, tt.wantMalformed)
			}
		})
	}
}

func TestParseStats(t *testing.T) {
	tests := []struct {
		name           string
		stats          map[string]string
		want           int
		wantNotNumbers int
	}{
		// version, 12 of statMetrics, and set from cmd_set and cas.
		{name: "memcached's", stats: memcachedStats, want: 14},
		{name: "none", stats: map[string]string{}},
		{name: "one number, one not, one not exported", stats: map[string]string{"uptime": "1", "bytes": "x", "libevent": "y"}, want: 1, wantNotNumbers: 1},
		{name: "set without cas", stats: map[string]string{"cmd_set": "3"}},
		{name: "set with a cas not a number", stats: map[string]string{"cmd_set": "3", "cas_hits": "0", "cas_misses": "0", "cas_badval": "n"},
			want: 2, wantNotNumbers: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notNumbers := parseStats(tt.stats)
			if len(got) != tt.want || notNumbers != tt.wantNotNumbers {
				t.Errorf("got %d metrics and %d not numbers, want %d and %d", len(got), notNumbers, tt.want, tt.wantNotNumbers)
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
		{name: "key of another certificate", change: writeKeyOfAnotherCertificate, wantSerial: "1", wantErr: "the mounted certificate is not usable yet",
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
// listens, as when the sidecar starts first, count no failed refresh nor
// hold the next check for RetryAfter, and that the first check that
// reaches memcached sends nothing.
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
	r.RetryAfter = time.Hour
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

// TestRefresherNotAfterIsTheServedCertificate checks that the notAfter gauge
// follows the certificate memcached serves, not the mounted one: after a
// refused refresh it still says the old certificate's.
func TestRefresherNotAfterIsTheServedCertificate(t *testing.T) {
	dir := t.TempDir()
	served := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	writeSecretUntil(t, dir, 1, served)
	f := startFake(t, &fakeMemcached{dir: dir, refuseRefresh: true})
	log, _ := test.NewNullLogger()
	r := NewRefresher(Dialer{Addr: f.addr, TLSDir: dir}, log, prometheus.NewRegistry())
	if n := testutil.CollectAndCount(r.notAfter); n != 0 {
		t.Errorf("before the first check the gauge has %d series, want none", n)
	}
	ctx := context.Background()
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	writeSecretUntil(t, dir, 2, served.Add(time.Hour))
	if err := r.Check(ctx); err == nil {
		t.Fatal("the refused refresh: got no error")
	}
	if got := testutil.ToFloat64(r.notAfter); got != float64(served.Unix()) {
		t.Errorf("after a refused refresh the gauge says %v, want the served certificate's %v", got, served.Unix())
	}
}
