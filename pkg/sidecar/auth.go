package sidecar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Credential is one user:password line of memcached's -Y file.
type Credential struct {
	User, Password string
}

// Credentials give the credential the sidecar logs in to memcached with.
type Credentials interface {
	// Credential returns the credential to log in with, or why there is
	// none yet.
	Credential() (Credential, error)
}

// ParseAuthFile returns the credentials of a -Y file, in their order, as
// memcached 1.6 reads them: one user:password per line, the password being
// everything after the first colon, a line's trailing \r dropped. A line
// without a colon, an empty line among them included, makes memcached
// refuse the whole file: at its start it exits, on SIGHUP it keeps the
// passwords it had, saying nothing (both checked on 1.6.18).
func ParseAuthFile(b []byte) ([]Credential, error) {
	text := strings.TrimSuffix(string(b), "\n")
	if text == "" {
		return nil, errors.New("it has no user:password line")
	}
	var creds []Credential
	for i, line := range strings.Split(text, "\n") {
		user, password, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
		if !ok {
			return nil, fmt.Errorf("line %d is not user:password, so memcached refuses the whole file", i+1)
		}
		creds = append(creds, Credential{User: user, Password: password})
	}
	return creds, nil
}

// memcachedMaxUsers is how many lines of a -Y file memcached 1.6 reads; it
// ignores the lines after them, saying nothing (checked on 1.6.18).
const memcachedMaxUsers = 8

// takenAsWritten returns why memcached 1.6 would load other credentials from
// the -Y file b than creds, b's ParseAuthFile, or nil when it loads those
// (both checked on 1.6.18):
//   - it reads the first memcachedMaxUsers lines alone;
//   - of a file of one line without a final newline, such as a Secret's
//     value written with kubectl's --from-literal, it drops the last byte,
//     the password's last character, at its start and on SIGHUP alike.
//
// memcached then refuses a credential of the file as written, which no
// load, restart or retry changes.
func takenAsWritten(b []byte, creds []Credential) error {
	if n := len(creds); n > memcachedMaxUsers {
		var users []string
		for _, c := range creds[memcachedMaxUsers:] {
			users = append(users, c.User)
		}
		return fmt.Errorf("it has %d lines, and memcached reads the first %d alone, so it refuses users %s: keep %d users at most", n, memcachedMaxUsers, strings.Join(users, ", "), memcachedMaxUsers)
	}
	if len(creds) == 1 && !bytes.HasSuffix(b, []byte("\n")) && !bytes.HasSuffix(b, []byte("\r")) {
		return fmt.Errorf("it is one line without a final newline, and memcached drops that line's last byte, so it refuses user %s's password as written: end the file with a newline", creds[0].User)
	}
	return nil
}

// Process is memcached's process, which the sidecar sees in the pod's
// shared process namespace.
type Process interface {
	// Find returns memcached's process id.
	Find() (int, error)
	// HangUp sends SIGHUP to the process pid, which makes memcached load
	// its -Y file again.
	HangUp(pid int) error
}

// ProcProcess finds memcached under a proc file system by its command
// name, and signals it with kill(2). The sidecar runs as memcached's user
// (see package memcached's PodSpec), so the kernel lets it signal
// memcached without any capability; it sees memcached only when the pod
// shares its process namespace.
type ProcProcess struct {
	// Proc is where the proc file system is mounted, /proc.
	Proc string
	// Name is memcached's command name, as /proc/<pid>/comm gives it.
	Name string
}

// Find implements Process: the one process named p.Name.
func (p ProcProcess) Find() (int, error) {
	entries, err := os.ReadDir(p.Proc)
	if err != nil {
		return 0, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(p.Proc, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == p.Name {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no process named %s in %s: does the pod share its process namespace (shareProcessNamespace)?", p.Name, p.Proc)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d processes named %s in %s (%v), want one", len(found), p.Name, p.Proc, found)
}

// HangUp implements Process.
func (ProcProcess) HangUp(pid int) error {
	return syscall.Kill(pid, syscall.SIGHUP)
}

// AuthReloader keeps memcached on the passwords of the mounted -Y file, and
// the sidecar logged in with a credential memcached has loaded. memcached
// reads the file at its start and on SIGHUP, and nothing else; the kubelet
// replaces the mounted file at its next sync of the pod after the Secret
// changed, as with the certificate (see Refresher). When the file differs
// from the one memcached is known to have loaded, Check sends SIGHUP, then
// confirms the load by a login that only the new file allows (or refuses):
// memcached loads it on its next clock tick, within a second. Until then the
// sidecar keeps logging in as before, so its logins never run ahead of
// memcached; after it, it keeps its user if the new file still has it.
//
// A file that memcached would not take as written (see takenAsWritten),
// which would have it refuse a credential of the file whatever it loads,
// gets no SIGHUP and stays the problem, as a malformed one does, until the
// Secret changes.
//
// At the sidecar's start memcached's file is unknown, since the sidecar
// may have restarted after a change memcached never loaded, so Check sends
// SIGHUP then too, once memcached answers on its port: memcached installs
// its signal handlers before it listens, and a SIGHUP before them would end
// it (checked on 1.6.18).
type AuthReloader struct {
	// File is memcached's -Y file, as mounted.
	File string
	// Dialer reaches memcached, with TLS when it has it; its Credentials
	// are not used, the reloader logs in as it needs.
	Dialer Dialer
	// Process finds and signals memcached.
	Process Process
	// Log receives a line for every load and every failure.
	Log logrus.FieldLogger
	// ConfirmWithin is how long memcached may take to load the file after
	// SIGHUP before Check calls the load failed.
	ConfirmWithin time.Duration
	// RetryAfter is how long a failed load of the same file waits before
	// Check sends SIGHUP again.
	RetryAfter time.Duration
	// now is the clock, time.Now outside tests.
	now func() time.Time

	reloads *prometheus.CounterVec

	// loaded is the hash of the file memcached is known to have loaded,
	// and creds its credentials; zero and nil before the first load.
	loaded [sha256.Size]byte
	creds  []Credential
	// signaled is the hash of the file of the last SIGHUP, and signaledAt
	// when it was sent.
	signaled   [sha256.Size]byte
	signaledAt time.Time
	// failed is the hash of the file whose load last failed, and retryAt
	// when Check signals it again.
	failed  [sha256.Size]byte
	retryAt time.Time
	// refused is the hash of a file Check last found malformed, or not
	// taken as written (see takenAsWritten), so that its error is
	// returned once, not on every check.
	refused [sha256.Size]byte

	mu sync.Mutex
	// login is the credential the sidecar logs in with, nil before the
	// first load.
	login *Credential
	// problem says why memcached does not have the mounted file, "" when
	// it has.
	problem string
}

// NewAuthReloader returns an AuthReloader of file whose metrics reg
// registers, which confirms a load within 5 s and retries a failed one
// after retry.
func NewAuthReloader(file string, d Dialer, p Process, log logrus.FieldLogger, reg prometheus.Registerer, retry time.Duration) *AuthReloader {
	a := &AuthReloader{
		File: file, Dialer: d, Process: p, Log: log,
		ConfirmWithin: 5 * time.Second,
		RetryAfter:    retry,
		now:           time.Now,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_sidecar_auth_reloads_total",
			Help: "Changes of the -Y file the sidecar made memcached load with SIGHUP, by result: success once a login confirms it, failure otherwise.",
		}, []string{"result"}),
	}
	a.reloads.WithLabelValues("success")
	a.reloads.WithLabelValues("failure")
	reg.MustRegister(a.reloads)
	return a
}

// Credential implements Credentials: a credential memcached has loaded.
func (a *AuthReloader) Credential() (Credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.login == nil {
		return Credential{}, errors.New("memcached has not been seen loading its -Y file yet")
	}
	return *a.login, nil
}

// Problem returns why memcached does not serve the mounted -Y file, or ""
// when it does or, after the sidecar's start, is not serving yet.
func (a *AuthReloader) Problem() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.problem
}

// Run calls Check every interval until ctx ends.
func (a *AuthReloader) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := a.Check(ctx); err != nil {
			a.Log.Error(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check makes memcached load the mounted file when it has not yet (see
// AuthReloader), and confirms it. A check of an unchanged file reads it
// and nothing more.
func (a *AuthReloader) Check(ctx context.Context) error {
	b, err := os.ReadFile(a.File)
	if err != nil {
		return a.fail([sha256.Size]byte{}, a.login != nil, "failed to read the -Y file: %v", err)
	}
	sum := sha256.Sum256(b)
	if sum == a.loaded {
		// Also after a change that failed was undone.
		a.setProblem("")
		return nil
	}
	creds, err := ParseAuthFile(b)
	if err != nil {
		return a.refuse(sum, fmt.Sprintf("is malformed: %v; memcached keeps the passwords it has", err))
	}
	if err := takenAsWritten(b, creds); err != nil {
		// A SIGHUP would make memcached load credentials that its clients,
		// and the confirming login, do not have.
		return a.refuse(sum, fmt.Sprintf("is not what memcached reads: %v; the sidecar sends no SIGHUP for it", err))
	}
	now := a.now()
	if sum == a.failed && now.Before(a.retryAt) {
		return nil
	}
	// Before memcached is first seen serving, as while it starts, nothing
	// is a failed load, and the next check tries again.
	first := a.login == nil
	if sum != a.signaled || sum == a.failed {
		if serving, err := a.hangUp(ctx); err != nil {
			return a.fail(sum, !first || serving, "%v", err)
		}
		a.signaled, a.signaledAt = sum, now
		a.failed = [sha256.Size]byte{}
	}
	ok, proof, err := a.confirm(ctx, creds)
	if err != nil {
		return a.fail(sum, !first, "failed to confirm that memcached loaded the -Y file: %v", err)
	}
	if !ok {
		if now.Sub(a.signaledAt) < a.ConfirmWithin {
			// memcached loads the file on its next clock tick.
			return nil
		}
		return a.fail(sum, true, "memcached did not load the changed -Y file %s within %v of SIGHUP: %s", a.File, a.ConfirmWithin, proof)
	}
	a.loaded, a.creds = sum, creds
	a.mu.Lock()
	a.login, a.problem = choose(a.login, creds), ""
	user := a.login.User
	a.mu.Unlock()
	a.reloads.WithLabelValues("success").Inc()
	a.Log.WithFields(logrus.Fields{"users": len(creds), "sidecarUser": user, "confirmedBy": proof}).Info("memcached loaded its -Y file on SIGHUP; the sidecar logs in with it")
	return nil
}

// hangUp sends memcached SIGHUP once it answers on its port, and reports
// whether it did answer. It finds the process before it connects, so that
// the process it signals is one that listened, and so had its signal
// handlers, or one that is gone.
func (a *AuthReloader) hangUp(ctx context.Context) (serving bool, err error) {
	pid, findErr := a.Process.Find()
	c, err := a.Dialer.dial(ctx)
	if err != nil {
		return false, fmt.Errorf("failed to connect to memcached: %v", err)
	}
	c.Close()
	if findErr != nil {
		return true, fmt.Errorf("failed to find memcached's process: %v", findErr)
	}
	if err := a.Process.HangUp(pid); err != nil {
		return true, fmt.Errorf("failed to send SIGHUP to memcached (pid %d): %v", pid, err)
	}
	return true, nil
}

// confirm reports whether memcached serves creds rather than the
// credentials loaded before, by a login that tells them apart: a
// credential that creds add must log in, else one that they drop must be
// refused. At the sidecar's start, with nothing loaded before, the first
// credential must log in. proof says which login it tried and how it went.
func (a *AuthReloader) confirm(ctx context.Context, creds []Credential) (ok bool, proof string, err error) {
	try, wantIn := *choose(nil, creds), true
	if a.creds != nil {
		added, removed := diff(a.creds, creds), diff(creds, a.creds)
		switch {
		case len(added) > 0:
			try = added[0]
		case len(removed) > 0:
			try, wantIn = removed[0], false
		default:
			// The same credentials, written otherwise: nothing to tell.
			return true, "the same credentials", nil
		}
	}
	c, err := a.Dialer.dial(ctx)
	if err != nil {
		return false, "", err
	}
	defer c.Close()
	err = c.Login(try)
	var refused *LoginRefusedError
	switch {
	case err == nil && wantIn:
		return true, fmt.Sprintf("user %s, which the file adds, logs in", try.User), nil
	case err == nil:
		return false, fmt.Sprintf("user %s, which the file removes, still logs in", try.User), nil
	case errors.As(err, &refused) && wantIn:
		return false, fmt.Sprintf("user %s, which the file has, is refused: %s", try.User, refused.Reply), nil
	case errors.As(err, &refused):
		return true, fmt.Sprintf("user %s, which the file removes, is refused", try.User), nil
	}
	return false, "", err
}

// refuse keeps why memcached is not to load the file of hash sum, why, as
// the problem, and returns it as an error the first time, not on every
// check.
func (a *AuthReloader) refuse(sum [sha256.Size]byte, why string) error {
	problem := fmt.Sprintf("the mounted -Y file %s %s", a.File, why)
	a.setProblem(problem)
	if sum == a.refused {
		return nil
	}
	a.refused = sum
	return errors.New(problem)
}

// fail returns the error of a failed load of the file of hash sum. Unless
// memcached was never seen serving (report false), it also holds the next
// SIGHUP of that file until RetryAfter, counts the failure and keeps it as
// the problem.
func (a *AuthReloader) fail(sum [sha256.Size]byte, report bool, format string, args ...interface{}) error {
	err := fmt.Errorf(format, args...)
	if report {
		a.failed, a.retryAt = sum, a.now().Add(a.RetryAfter)
		a.reloads.WithLabelValues("failure").Inc()
		a.setProblem(err.Error())
	}
	return err
}

func (a *AuthReloader) setProblem(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.problem = p
}

// choose returns current if creds still hold it, else the first of creds
// that memcached's login can carry: a user without a space, since the
// login's data is the user and the password separated by one.
func choose(current *Credential, creds []Credential) *Credential {
	for _, c := range creds {
		if current != nil && c == *current {
			return current
		}
	}
	for _, c := range creds {
		if c.User != "" && !strings.Contains(c.User, " ") {
			c := c
			return &c
		}
	}
	return &creds[0]
}

// diff returns the credentials of b that a lacks.
func diff(a, b []Credential) []Credential {
	have := map[Credential]bool{}
	for _, c := range a {
		have[c] = true
	}
	var out []Credential
	for _, c := range b {
		if !have[c] {
			out = append(out, c)
		}
	}
	return out
}
