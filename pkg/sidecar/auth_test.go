package sidecar

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus/hooks/test"
)

func TestParseAuthFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Credential
		wantErr string
	}{
		{name: "two lines", in: "app:s3cret\nreporting:0ther\n", want: []Credential{{"app", "s3cret"}, {"reporting", "0ther"}}},
		{name: "no final newline", in: "app:s3cret", want: []Credential{{"app", "s3cret"}}},
		{name: "CRLF", in: "app:s3cret\r\nb:2\r\n", want: []Credential{{"app", "s3cret"}, {"b", "2"}}},
		{name: "colon in the password", in: "app:a:b\n", want: []Credential{{"app", "a:b"}}},
		{name: "empty password", in: "app:\n", want: []Credential{{"app", ""}}},
		{name: "empty line", in: "app:1\n\nb:2\n", wantErr: "line 2 is not user:password"},
		{name: "comment", in: "#users\napp:1\n", wantErr: "line 1 is not user:password"},
		{name: "empty", in: "", wantErr: "no user:password line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAuthFile([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestProcProcessFind(t *testing.T) {
	tests := []struct {
		name    string
		procs   map[string]string // pid: comm
		want    int
		wantErr string
	}{
		{name: "memcached beside pause and the sidecar", procs: map[string]string{"1": "pause", "7": "memcached", "12": "memcached-sidec"}, want: 7},
		{name: "not shared", procs: map[string]string{"1": "memcached-sidec"}, wantErr: "shareProcessNamespace"},
		{name: "two", procs: map[string]string{"7": "memcached", "9": "memcached"}, wantErr: "2 processes named memcached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := t.TempDir()
			for pid, comm := range tt.procs {
				if err := os.Mkdir(filepath.Join(proc, pid), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Entries that are not processes are skipped.
			if err := os.Mkdir(filepath.Join(proc, "sys"), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := ProcProcess{Proc: proc, Name: "memcached"}.Find()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %d, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// authFixture is an AuthReloader of a fake memcached, with a clock the test
// moves.
type authFixture struct {
	f    *fakeMemcached
	p    *fakeProcess
	a    *AuthReloader
	file string
	now  time.Time
	hook *test.Hook
}

// newAuthFixture starts a fake memcached with the -Y file content and an
// AuthReloader for it, unchecked yet.
func newAuthFixture(t *testing.T, content string) *authFixture {
	t.Helper()
	file := filepath.Join(t.TempDir(), "passwords")
	writeAuth(t, file, content)
	fx := &authFixture{file: file, now: time.Unix(1000, 0)}
	fx.f = startFake(t, &fakeMemcached{authFile: file, stats: memcachedStats})
	fx.p = &fakeProcess{f: fx.f}
	log, hook := test.NewNullLogger()
	fx.hook = hook
	fx.a = NewAuthReloader(file, Dialer{Addr: fx.f.addr}, fx.p, log, prometheus.NewRegistry(), 5*time.Second)
	fx.a.now = func() time.Time { return fx.now }
	return fx
}

// check runs a Check and fails the test on an error other than want's.
func (fx *authFixture) check(t *testing.T, wantErr string) {
	t.Helper()
	err := fx.a.Check(context.Background())
	if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
		t.Fatalf("check: got error %v, want %q", err, wantErr)
	}
}

// user returns the user the sidecar logs in as, "" without one.
func (fx *authFixture) user() string {
	c, err := fx.a.Credential()
	if err != nil {
		return ""
	}
	return c.User
}

// loggedIn reports whether the sidecar's Dialer logs in to memcached.
func (fx *authFixture) loggedIn() bool {
	c, err := (&Dialer{Addr: fx.f.addr, Credentials: fx.a}).Dial(context.Background())
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (fx *authFixture) counts() (success, failure float64) {
	return testutil.ToFloat64(fx.a.reloads.WithLabelValues("success")), testutil.ToFloat64(fx.a.reloads.WithLabelValues("failure"))
}

// started checks the file memcached started with once, as the sidecar's
// start does, and expects one SIGHUP, confirmed by the first user.
func (fx *authFixture) started(t *testing.T) {
	t.Helper()
	fx.check(t, "")
	fx.f.tick(t)
	fx.check(t, "")
	if got := fx.p.count(); got != 1 {
		t.Fatalf("at the start memcached got %d SIGHUPs, want 1", got)
	}
	if fx.user() == "" || !fx.loggedIn() {
		t.Fatalf("after the start the sidecar logs in as %q: %t", fx.user(), fx.loggedIn())
	}
}

func TestAuthReloader(t *testing.T) {
	tests := []struct {
		name string
		// to is the -Y file the Secret's edit brings; "" keeps it.
		to string
		// ticks is whether memcached gets a clock tick after the SIGHUP.
		ticks bool
		// wait is how long after the SIGHUP the second check runs.
		wait        time.Duration
		wantHangUps int
		// wantUser is the sidecar's login after the edit.
		wantUser    string
		wantSuccess float64
		wantFailure float64
		// firstErr is the error of the check right after the edit,
		// wantErr of the one after the wait.
		firstErr    string
		wantErr     string
		wantProblem string
	}{
		{name: "unchanged", wantHangUps: 1, wantUser: "app", wantSuccess: 1},
		{name: "a user added and the old one removed", to: "new:pw2\n", ticks: true, wantHangUps: 2, wantUser: "new", wantSuccess: 2},
		{name: "a user added, the sidecar's kept", to: "app:pw1\nnew:pw2\n", ticks: true, wantHangUps: 2, wantUser: "app", wantSuccess: 2},
		{name: "a user removed, the sidecar's kept", to: "app:pw1\n", ticks: true, wantHangUps: 2, wantUser: "app", wantSuccess: 2},
		{name: "the sidecar's user removed", to: "other:pw3\n", ticks: true, wantHangUps: 2, wantUser: "other", wantSuccess: 2},
		{name: "a password changed", to: "app:pw9\nother:pw3\n", ticks: true, wantHangUps: 2, wantUser: "app", wantSuccess: 2},
		{name: "the same users written with CRLF", to: "app:pw1\r\nother:pw3\r\n", wantHangUps: 2, wantUser: "app", wantSuccess: 2},
		{name: "memcached has not loaded it yet", to: "new:pw2\n", wait: time.Second, wantHangUps: 2, wantUser: "app", wantSuccess: 1},
		{name: "memcached does not load it", to: "new:pw2\n", wait: 6 * time.Second, wantHangUps: 2, wantUser: "app", wantSuccess: 1, wantFailure: 1,
			wantErr: "memcached did not load the changed -Y file", wantProblem: "user new, which the file has, is refused: CLIENT_ERROR"},
		{name: "malformed", to: "new:pw2\n\n", ticks: true, wantHangUps: 1, wantUser: "app", wantSuccess: 1,
			firstErr: "is malformed", wantProblem: "line 2 is not user:password, so memcached refuses the whole file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newAuthFixture(t, "app:pw1\nother:pw3\n")
			fx.started(t)
			if tt.to != "" {
				writeAuth(t, fx.file, tt.to)
			}
			fx.check(t, tt.firstErr)
			if fx.user() != "app" || !fx.loggedIn() {
				t.Errorf("before memcached loads the edit the sidecar logs in as %q (%t), want app as before", fx.user(), fx.loggedIn())
			}
			if tt.ticks {
				fx.f.tick(t)
			}
			fx.now = fx.now.Add(tt.wait)
			fx.check(t, tt.wantErr)
			if got := fx.p.count(); got != tt.wantHangUps {
				t.Errorf("memcached got %d SIGHUPs, want %d", got, tt.wantHangUps)
			}
			if got := fx.user(); got != tt.wantUser || !fx.loggedIn() {
				t.Errorf("the sidecar logs in as %q (%t), want %q and logged in", got, fx.loggedIn(), tt.wantUser)
			}
			if s, f := fx.counts(); s != tt.wantSuccess || f != tt.wantFailure {
				t.Errorf("got loads success %v failure %v, want %v and %v", s, f, tt.wantSuccess, tt.wantFailure)
			}
			if got := fx.a.Problem(); tt.wantProblem == "" && got != "" || !strings.Contains(got, tt.wantProblem) {
				t.Errorf("problem %q, want %q", got, tt.wantProblem)
			}
			// Another check, with nothing new, adds no SIGHUP and no error.
			fx.check(t, "")
			if got := fx.p.count(); got != tt.wantHangUps {
				t.Errorf("after another check memcached got %d SIGHUPs, want still %d", got, tt.wantHangUps)
			}
		})
	}
}

// TestAuthReloaderRetriesAFailedLoad checks that a load memcached did not
// confirm is signaled again after RetryAfter, not before, and that its
// problem clears once memcached loads it.
func TestAuthReloaderRetriesAFailedLoad(t *testing.T) {
	fx := newAuthFixture(t, "app:pw1\n")
	fx.started(t)
	writeAuth(t, fx.file, "new:pw2\n")
	fx.check(t, "")
	fx.now = fx.now.Add(6 * time.Second)
	fx.check(t, "did not load")
	fx.now = fx.now.Add(time.Second)
	fx.check(t, "")
	if got := fx.p.count(); got != 2 {
		t.Errorf("within RetryAfter memcached got %d SIGHUPs, want 2", got)
	}
	fx.now = fx.now.Add(5 * time.Second)
	fx.check(t, "")
	if got := fx.p.count(); got != 3 {
		t.Errorf("after RetryAfter memcached got %d SIGHUPs, want 3", got)
	}
	fx.f.tick(t)
	fx.check(t, "")
	if fx.user() != "new" || fx.a.Problem() != "" {
		t.Errorf("after the load: user %q, problem %q; want new and none", fx.user(), fx.a.Problem())
	}
}

// TestAuthReloaderUndoneChangeClearsItsProblem checks that a malformed
// file's problem clears once the Secret is back to the file memcached has.
func TestAuthReloaderUndoneChangeClearsItsProblem(t *testing.T) {
	fx := newAuthFixture(t, "app:pw1\n")
	fx.started(t)
	writeAuth(t, fx.file, "app\n")
	fx.check(t, "malformed")
	if fx.a.Problem() == "" {
		t.Fatal("no problem for a malformed file")
	}
	writeAuth(t, fx.file, "app:pw1\n")
	fx.check(t, "")
	if p := fx.a.Problem(); p != "" || fx.p.count() != 1 {
		t.Errorf("problem %q and %d SIGHUPs after the undo, want none and 1", p, fx.p.count())
	}
}

// TestAuthReloaderWaitsForMemcached checks that the start sends no SIGHUP
// before memcached answers on its port, when its signal handlers may not be
// installed yet, and counts nothing as failed then; and that a process the
// sidecar cannot see or signal after the start is a problem.
func TestAuthReloaderWaitsForMemcached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	file := filepath.Join(t.TempDir(), "passwords")
	writeAuth(t, file, "app:pw1\n")
	f := &fakeMemcached{addr: addr, authFile: file}
	p := &fakeProcess{f: f}
	log, _ := test.NewNullLogger()
	a := NewAuthReloader(file, Dialer{Addr: addr}, p, log, prometheus.NewRegistry(), 5*time.Second)
	for i := 0; i < 2; i++ {
		if err := a.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "failed to connect") {
			t.Errorf("check %d without memcached: got %v, want a connection error", i, err)
		}
	}
	if _, err := a.Credential(); err == nil || p.count() != 0 || a.Problem() != "" {
		t.Errorf("before memcached answers: credential error %v, %d SIGHUPs, problem %q; want an error, none and none", err, p.count(), a.Problem())
	}
	startFake(t, f)
	if err := a.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.tick(t)
	if err := a.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Credential(); err != nil || p.count() != 1 {
		t.Errorf("once memcached answers: credential error %v, %d SIGHUPs; want none and 1", err, p.count())
	}

	p.hangUpErr = errors.New("operation not permitted")
	writeAuth(t, file, "new:pw2\n")
	if err := a.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "failed to send SIGHUP to memcached (pid 42): operation not permitted") {
		t.Errorf("check with a process it cannot signal: got %v", err)
	}
	if got := a.Problem(); !strings.Contains(got, "operation not permitted") {
		t.Errorf("problem %q, want the signal's error", got)
	}
}

func TestTakenAsWritten(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "one line with a newline", in: "app:s3cret\n"},
		{name: "one line with CRLF", in: "app:s3cret\r\n"},
		{name: "one line ending in CR", in: "app:s3cret\r"},
		{name: "two lines without a final newline", in: "app:s3cret\nb:22"},
		{name: "eight lines", in: strings.Repeat("u:p\n", 8)},
		{name: "one line without a newline", in: "app:s3cret", wantErr: "one line without a final newline, and memcached drops that line's last byte, so it refuses user app's password as written"},
		{name: "nine lines", in: "u1:p\nu2:p\nu3:p\nu4:p\nu5:p\nu6:p\nu7:p\nu8:p\nu9:p\n", wantErr: "it has 9 lines, and memcached reads the first 8 alone, so it refuses users u9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := ParseAuthFile([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			err = takenAsWritten([]byte(tt.in), creds)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}
