package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus/hooks/test"
)

// The tests of this file run Debian's memcached, which test/scripts/install-deps.sh
// installs with the rest of what the tests need: the fake of fake_test.go
// answers what the sidecar expects, the real one what memcached does.

// memcachedStartWithin bounds a memcached's start: it listens within
// milliseconds; the bound is for a loaded machine.
const memcachedStartWithin = 30 * time.Second

// realMemcached is one memcached process on a loopback port of this machine.
type realMemcached struct {
	args []string
	port int
	// ready reaches it as the test's clients do, to tell it listens.
	ready Dialer

	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// startMemcached starts memcached with args on a free loopback port, which
// ready.Addr is set to, and waits until ready reaches it; the test's end
// stops it.
func startMemcached(t *testing.T, ready Dialer, args ...string) *realMemcached {
	t.Helper()
	m := &realMemcached{args: args, ready: ready}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		err = m.start()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Address already in use") || attempt == 4 {
			t.Fatal(err)
		}
	}
	t.Cleanup(m.stop)
	return m
}

// addr is where memcached listens.
func (m *realMemcached) addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port))
}

// start runs memcached on m.port and waits until it serves, or says why it
// does not.
func (m *realMemcached) start() error {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		return fmt.Errorf("these tests run Debian's memcached 1.6 (apt-get install memcached, as test/scripts/install-deps.sh does): %v", err)
	}
	args := append([]string{"-p", strconv.Itoa(m.port), "-l", "127.0.0.1", "-U", "0"}, m.args...)
	if os.Geteuid() == 0 {
		// memcached runs as root only when told so.
		args = append(args, "-u", "root")
	}
	m.cmd = exec.Command(bin, args...)
	m.out = &lockedBuffer{}
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return err
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(m.cmd, m.exited)
	ctx, cancel := context.WithTimeout(context.Background(), memcachedStartWithin)
	defer cancel()
	d := m.ready
	d.Addr = m.addr()
	for {
		c, err := d.dial(ctx)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("memcached %s exited: %s: %s", strings.Join(args, " "), m.cmd.ProcessState, m.out.String())
		case <-ctx.Done():
			m.stop()
			return fmt.Errorf("memcached %s does not answer on %s within %v: %v; output: %s", strings.Join(args, " "), d.Addr, memcachedStartWithin, err, m.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop kills memcached and waits for its exit.
func (m *realMemcached) stop() {
	_ = m.cmd.Process.Kill() // gone already if it exited
	<-m.exited
}

// restart stops memcached and starts it again on the same port, as when
// its container restarts beside the sidecar's.
func (m *realMemcached) restart(t *testing.T) {
	t.Helper()
	m.stop()
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// memcachedVersion is the version the installed memcached prints.
func memcachedVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("memcached", "-V").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "memcached ")
}

// switchLogin is Credentials whose credential the test changes, as the
// AuthReloader's changes after memcached loaded a new -Y file.
type switchLogin struct {
	mu sync.Mutex
	c  Credential
}

func (s *switchLogin) Credential() (Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c, nil
}

func (s *switchLogin) set(c Credential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = c
}

// scrape is one scrape of a registry: each series' value by its name and
// labels, as the exposition format writes them, and each name's type.
type scrape struct {
	values map[string]float64
	types  map[string]string
}

func gather(t *testing.T, reg *prometheus.Registry) scrape {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	s := scrape{values: map[string]float64{}, types: map[string]string{}}
	for _, f := range families {
		s.types[f.GetName()] = strings.ToLower(f.GetType().String())
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := f.GetName()
			if len(labels) > 0 {
				sort.Strings(labels)
				series += "{" + strings.Join(labels, ",") + "}"
			}
			// One of them is set; the others read 0.
			s.values[series] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return s
}

// value returns series' value, failing the test when the scrape lacks it.
func (s scrape) value(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := s.values[series]
	if !ok {
		t.Fatalf("the scrape has no %s; it has %v", series, s.names())
	}
	return v
}

func (s scrape) names() []string {
	var names []string
	for n := range s.types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// documentedStats returns the metrics of METRICS.md's table of memcached's
// stats with their types, without those it marks TLS unless tls.
func documentedStats(t *testing.T, tls bool) map[string]string {
	t.Helper()
	b, err := os.ReadFile("METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## From memcached's `stats`\n")
	if !ok {
		t.Fatal("METRICS.md has no section of memcached's stats")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	want := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		if strings.Contains(cells[4], "*TLS*") && !tls {
			continue
		}
		want[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	if len(want) < 30 {
		t.Fatalf("METRICS.md's table of memcached's stats has %d metrics, want its 30 and more: %v", len(want), want)
	}
	return want
}

// command sends req on c and reads memcached's reply up to its line last.
func command(t *testing.T, c *Conn, req, last string) []string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("%q: %v after %q", req, err, lines)
		}
		line = strings.TrimRight(line, "\r\n")
		lines = append(lines, line)
		if line == last || strings.Contains(line, "ERROR") {
			return lines
		}
	}
}

// TestMetricsOfRealMemcached scrapes Debian's memcached through the
// sidecar's StatsCollector, in plaintext and with TLS, client certificates
// and a -Y login: the scrape has exactly the metrics METRICS.md lists, the
// commands a client sends show under memcached_exporter's names, the
// scrapes share one connection, a restarted memcached is scraped at once,
// and with TLS a plaintext client's handshake is counted.
func TestMetricsOfRealMemcached(t *testing.T) {
	tests := []struct {
		name string
		tls  bool
	}{
		{name: "plaintext"},
		{name: "TLS with client certificates and login", tls: true},
	}
	version := memcachedVersion(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"-c", "77", "-m", "32"}
			creds := &switchLogin{c: Credential{User: "sidecar", Password: "pw"}}
			var d Dialer
			if tt.tls {
				dir := t.TempDir()
				writeSecret(t, dir, 1)
				auth := filepath.Join(dir, "auth")
				writeAuth(t, auth, "sidecar:pw\nother:pw2\n")
				args = append(args, "-Y", auth, "-Z", "-o", fmt.Sprintf("ssl_chain_cert=%s,ssl_key=%s,ssl_ca_cert=%s,ssl_verify_mode=2",
					filepath.Join(dir, certFile), filepath.Join(dir, keyFile), filepath.Join(dir, caFile)))
				d = Dialer{TLSDir: dir, ClientCert: true, Credentials: creds}
			}
			m := startMemcached(t, d, args...)
			d.Addr = m.addr()
			log, _ := test.NewNullLogger()
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewStatsCollector(d, log))

			client, err := d.Dial(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			command(t, client, "set k 0 0 5\r\nvalue\r\n", "STORED")
			command(t, client, "get k\r\n", "END")
			command(t, client, "get missing\r\n", "END")
			raw, err := client.Stats()
			if err != nil {
				t.Fatal(err)
			}

			first := gather(t, reg)
			want := documentedStats(t, tt.tls)
			for name, typ := range want {
				if got, ok := first.types[name]; !ok {
					t.Errorf("METRICS.md lists %s, which the scrape lacks", name)
				} else if got != typ {
					t.Errorf("%s is a %s, METRICS.md says %s", name, got, typ)
				}
			}
			for _, name := range first.names() {
				if _, ok := want[name]; !ok && !strings.HasPrefix(name, "memcached_sidecar_") {
					t.Errorf("the scrape has %s, which METRICS.md does not list", name)
				}
			}
			wantValues := map[string]float64{
				"memcached_up": 1,
				fmt.Sprintf("memcached_version{version=%q}", version):                1,
				`memcached_commands_total{command="get",status="hit"}`:               1,
				`memcached_commands_total{command="get",status="miss"}`:              1,
				`memcached_commands_total{command="set",status="hit"}`:               1,
				`memcached_commands_total{command="cas",status="badval"}`:            0,
				"memcached_max_connections":                                          77,
				"memcached_limit_bytes":                                              32 << 20,
				"memcached_current_items":                                            1,
				"memcached_connections_rejected_total":                               0,
				"memcached_items_evicted_unfetched_total":                            0,
				`memcached_sidecar_stats_lines_skipped_total{reason="malformed"}`:    0,
				`memcached_sidecar_stats_lines_skipped_total{reason="not_a_number"}`: 0,
			}
			if tt.tls {
				wantValues["memcached_tls_handshake_errors_total"] = 0
			}
			for series, v := range wantValues {
				if got := first.value(t, series); got != v {
					t.Errorf("%s = %v, want %v", series, got, v)
				}
			}
			// cmd_get and cmd_set are in memcached_commands_total, as in
			// memcached_exporter's.
			gets := first.value(t, `memcached_commands_total{command="get",status="hit"}`) + first.value(t, `memcached_commands_total{command="get",status="miss"}`)
			if cmdGet, _ := strconv.ParseFloat(raw.Values["cmd_get"], 64); cmdGet != gets {
				t.Errorf("cmd_get is %v, the get series add up to %v", cmdGet, gets)
			}
			if cmdSet, _ := strconv.ParseFloat(raw.Values["cmd_set"], 64); cmdSet != 1 {
				t.Errorf("cmd_set is %v after one set, want 1: the login's set is not one", cmdSet)
			}
			if read := first.value(t, "memcached_read_bytes_total"); read < float64(len("set k 0 0 5\r\nvalue\r\nget k\r\nget missing\r\n")) {
				t.Errorf("memcached_read_bytes_total = %v, less than the client sent", read)
			}

			// The scrapes share one connection.
			opened := first.value(t, "memcached_connections_total")
			for i := 0; i < 3; i++ {
				if got := gather(t, reg).value(t, "memcached_connections_total"); got != opened {
					t.Fatalf("scrape %d: memcached_connections_total went from %v to %v: the scrape dialled again", i+2, opened, got)
				}
			}

			if tt.tls {
				// A plaintext client fails its handshake. memcached counts
				// a failure of its first handshake step, which it takes
				// when it accepts the connection: the client's bytes are
				// there by then while memcached is stopped.
				if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				plain, err := net.Dial("tcp", d.Addr)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = plain.Write([]byte("version\r\n"))
				if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				_ = plain.SetReadDeadline(time.Now().Add(ioTimeout))
				_, _ = bufio.NewReader(plain).ReadString('\n') // memcached closes it
				plain.Close()
				var s scrape
				deadline := time.Now().Add(memcachedStartWithin)
				for s = gather(t, reg); s.value(t, "memcached_tls_handshake_errors_total") != 1 && time.Now().Before(deadline); s = gather(t, reg) {
					time.Sleep(20 * time.Millisecond)
				}
				if got := s.value(t, "memcached_tls_handshake_errors_total"); got != 1 {
					t.Errorf("memcached_tls_handshake_errors_total = %v after a plaintext client, want 1", got)
				}

				// Another credential of memcached's -Y file: the next
				// scrape logs in with it, on a new connection.
				opened = s.value(t, "memcached_connections_total")
				creds.set(Credential{User: "other", Password: "pw2"})
				s = gather(t, reg)
				if s.value(t, "memcached_up") != 1 || s.value(t, "memcached_connections_total") != opened+1 {
					t.Errorf("after the credential changed: memcached_up %v and memcached_connections_total %v, want 1 and %v",
						s.value(t, "memcached_up"), s.value(t, "memcached_connections_total"), opened+1)
				}
				// One memcached refuses is memcached_up 0, although the
				// connection of the last one was logged in.
				creds.set(Credential{User: "other", Password: "wrong"})
				if got := gather(t, reg).value(t, "memcached_up"); got != 0 {
					t.Errorf("with a refused credential memcached_up = %v, want 0", got)
				}
				creds.set(Credential{User: "sidecar", Password: "pw"})
			}

			// memcached restarts: the next scrape finds the new process.
			m.restart(t)
			s := gather(t, reg)
			if s.value(t, "memcached_up") != 1 || s.value(t, "memcached_current_items") != 0 {
				t.Errorf("the first scrape after memcached's restart: memcached_up %v and memcached_current_items %v, want 1 and 0 (a new, empty memcached)",
					s.value(t, "memcached_up"), s.value(t, "memcached_current_items"))
			}
		})
	}
}

// TestRefresherWithRealMemcached runs the Refresher against Debian's
// memcached: the notAfter gauge is absent before the first check, then that
// of the certificate memcached serves, and after a new certificate memcached
// reloads it on refresh_certs, counted as a success.
func TestRefresherWithRealMemcached(t *testing.T) {
	dir := t.TempDir()
	firstNotAfter := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	writeSecretUntil(t, dir, 1, firstNotAfter)
	d := Dialer{TLSDir: dir}
	m := startMemcached(t, d, "-Z", "-o", fmt.Sprintf("ssl_chain_cert=%s,ssl_key=%s", filepath.Join(dir, certFile), filepath.Join(dir, keyFile)))
	d.Addr = m.addr()
	log, _ := test.NewNullLogger()
	reg := prometheus.NewRegistry()
	r := NewRefresher(d, log, reg)
	const notAfter = "memcached_sidecar_certificate_not_after_timestamp_seconds"
	if _, ok := gather(t, reg).values[notAfter]; ok {
		t.Errorf("%s is there before the first check", notAfter)
	}
	ctx := context.Background()
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, reg).value(t, notAfter); got != float64(firstNotAfter.Unix()) {
		t.Errorf("%s = %v, want the served certificate's %v", notAfter, got, firstNotAfter.Unix())
	}

	secondNotAfter := firstNotAfter.Add(time.Hour)
	writeSecretUntil(t, dir, 2, secondNotAfter)
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	s := gather(t, reg)
	if got := s.value(t, notAfter); got != float64(secondNotAfter.Unix()) {
		t.Errorf("after the refresh %s = %v, want the new certificate's %v", notAfter, got, secondNotAfter.Unix())
	}
	success, failure := s.value(t, `memcached_sidecar_certificate_refreshes_total{result="success"}`), s.value(t, `memcached_sidecar_certificate_refreshes_total{result="failure"}`)
	if success != 1 || failure != 0 {
		t.Errorf("refreshes success %v failure %v, want 1 and 0", success, failure)
	}
	c, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := serial(c); got != "2" {
		t.Errorf("a new connection gets serial %s, want 2", got)
	}
}

// realProcess is the Process of a realMemcached, as the sidecar sees
// memcached's in the pod: the process that runs now, none after it exited.
type realProcess struct {
	m *realMemcached

	mu      sync.Mutex
	hangUps int
}

func (p *realProcess) Find() (int, error) {
	select {
	case <-p.m.exited:
		return 0, errors.New("no process named memcached")
	default:
		return p.m.cmd.Process.Pid, nil
	}
}

func (p *realProcess) HangUp(pid int) error {
	p.mu.Lock()
	p.hangUps++
	p.mu.Unlock()
	return syscall.Kill(pid, syscall.SIGHUP)
}

func (p *realProcess) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hangUps
}

// newRealAuthReloader returns an AuthReloader of file for m, with a clock
// that stands still unless the test moves *now.
func newRealAuthReloader(t *testing.T, file string, m *realMemcached) (*AuthReloader, *realProcess, *time.Time) {
	t.Helper()
	p := &realProcess{m: m}
	log, _ := test.NewNullLogger()
	a := NewAuthReloader(file, Dialer{Addr: m.addr()}, p, log, prometheus.NewRegistry(), 5*time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	return a, p, &now
}

// checkAuth runs a.Check and fails the test unless its error contains
// wantErr, or is nil when wantErr is "".
func checkAuth(t *testing.T, a *AuthReloader, wantErr string) {
	t.Helper()
	err := a.Check(context.Background())
	if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
		t.Fatalf("check: got error %v, want %q", err, wantErr)
	}
}

// logsIn reports whether memcached at addr takes c.
func logsIn(t *testing.T, addr string, c Credential) bool {
	t.Helper()
	conn, err := (&Dialer{Addr: addr, Credentials: login(c)}).Dial(context.Background())
	var refused *LoginRefusedError
	if errors.As(err, &refused) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	return true
}

// TestAuthReloaderFollowsARestartOnTheFixedFile is issue 40's case 4 as the
// sidecar sees it: memcached exits at its start on a malformed -Y file, the
// Secret is fixed while it waits out its back-off, and it reads the fixed
// file when it starts again, with no SIGHUP. The first check that reaches
// it confirms the file and clears the problem, with no failed load
// counted; a later restart, a new process on the same file, changes nothing.
func TestAuthReloaderFollowsARestartOnTheFixedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwords")
	writeAuth(t, file, "nocolonhere\n")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &realMemcached{args: []string{"-Y", file}, port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	if err := m.start(); err == nil || !strings.Contains(err.Error(), "malformed entry") {
		t.Fatalf("memcached on a malformed -Y file: got %v, want its exit", err)
	}
	a, p, _ := newRealAuthReloader(t, file, m)
	checkAuth(t, a, "is malformed")

	writeAuth(t, file, "app:s3cret\n")
	for i := 0; i < 2; i++ {
		checkAuth(t, a, "failed to connect")
	}
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	checkAuth(t, a, "")
	if c, err := a.Credential(); err != nil || c.User != "app" || a.Problem() != "" {
		t.Errorf("once memcached runs on the fixed file: login %v, %v, problem %q; want app and none", c, err, a.Problem())
	}
	if failure := testutil.ToFloat64(a.reloads.WithLabelValues("failure")); failure != 0 {
		t.Errorf("%v failed loads counted, want none", failure)
	}

	m.restart(t)
	checkAuth(t, a, "")
	if a.Problem() != "" || !logsIn(t, m.addr(), Credential{"app", "s3cret"}) {
		t.Errorf("after memcached's restart: problem %q", a.Problem())
	}
	if got := p.count(); got != 1 {
		t.Errorf("memcached got %d SIGHUPs, want 1", got)
	}
}

// TestAuthReloaderRefusesAFileMemcachedCutsShort checks the file that kept
// issue 40's case 4 Degraded: a Secret's value of one line without a final
// newline, as kubectl create secret --from-literal writes it. memcached
// takes that line's password without its last character, at its start and
// on SIGHUP, so no load could ever confirm the file: the problem says so,
// and no SIGHUP is sent, until the Secret has the final newline, which
// memcached loads and the problem clears.
func TestAuthReloaderRefusesAFileMemcachedCutsShort(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwords")
	writeAuth(t, file, "app:s3cret")
	m := startMemcached(t, Dialer{}, "-Y", file)
	if logsIn(t, m.addr(), Credential{"app", "s3cret"}) || !logsIn(t, m.addr(), Credential{"app", "s3cre"}) {
		t.Fatalf("memcached %s takes the password of a file without a final newline as written; takenAsWritten is to follow it", memcachedVersion(t))
	}
	a, p, now := newRealAuthReloader(t, file, m)
	checkAuth(t, a, "one line without a final newline")
	*now = now.Add(6 * time.Second)
	checkAuth(t, a, "")
	if got := a.Problem(); !strings.Contains(got, "end the file with a newline") || p.count() != 0 {
		t.Errorf("problem %q and %d SIGHUPs, want the final newline named and none", got, p.count())
	}

	writeAuth(t, file, "app:s3cret\n")
	deadline := time.After(memcachedStartWithin)
	for {
		checkAuth(t, a, "")
		if _, err := a.Credential(); err == nil && a.Problem() == "" {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("memcached did not load the fixed file within %v: problem %q", memcachedStartWithin, a.Problem())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !logsIn(t, m.addr(), Credential{"app", "s3cret"}) || p.count() != 1 {
		t.Errorf("after the fix: app refused, or %d SIGHUPs, want 1", p.count())
	}
}
