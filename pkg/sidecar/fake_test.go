package sidecar

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMemcached speaks the part of memcached's ASCII protocol that the
// sidecar uses, on loopback: login with a set, stats and refresh_certs,
// which reloads the certificate from dir as memcached does.
type fakeMemcached struct {
	// addr is where it listens; "" picks a free loopback port.
	addr     string
	dir      string // the mounted Secret; "" serves plaintext
	password string // "" accepts any client without login
	// authFile, when set instead of password, is the -Y file whose users
	// log in: loaded at the start and, after a hangUp, on the next tick,
	// as memcached loads it on its next clock tick after SIGHUP.
	authFile string
	// refuseRefresh makes refresh_certs fail, as memcached does when the
	// files do not load.
	refuseRefresh bool
	stats         map[string]string
	// extraStats are lines of the reply to stats after those of stats.
	extraStats []string

	mu       sync.Mutex
	cert     tls.Certificate
	commands []string
	users    map[string]string
	hup      bool
}

// loadAuth loads f.authFile as memcached does: a malformed file leaves
// the users as they were.
func (f *fakeMemcached) loadAuth(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(f.authFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ParseAuthFile(b)
	if err != nil {
		return
	}
	users := map[string]string{}
	for _, c := range creds {
		users[c.User] = c.Password
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users = users
}

// tick is memcached's clock tick: after a SIGHUP it loads the -Y file.
func (f *fakeMemcached) tick(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	hup := f.hup
	f.hup = false
	f.mu.Unlock()
	if hup {
		f.loadAuth(t)
	}
}

// login reports whether token, "user password", logs in.
func (f *fakeMemcached) login(token string) bool {
	if f.authFile == "" {
		return token == "sidecar "+f.password
	}
	user, password, _ := strings.Cut(token, " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.users[user]
	return ok && p == password
}

// fakeProcess is memcached's process as the AuthReloader sees it: its
// SIGHUP marks f for a load on its next tick.
type fakeProcess struct {
	f *fakeMemcached
	// findErr and hangUpErr, when set, are what Find and HangUp return.
	findErr, hangUpErr error
	mu                 sync.Mutex
	hangUps            int
}

func (p *fakeProcess) Find() (int, error) { return 42, p.findErr }

func (p *fakeProcess) HangUp(pid int) error {
	if pid != 42 {
		return fmt.Errorf("no process %d", pid)
	}
	if p.hangUpErr != nil {
		return p.hangUpErr
	}
	p.mu.Lock()
	p.hangUps++
	p.mu.Unlock()
	p.f.mu.Lock()
	p.f.hup = true
	p.f.mu.Unlock()
	return nil
}

func (p *fakeProcess) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hangUps
}

// login is a fixed credential, as Credentials.
type login Credential

func (l login) Credential() (Credential, error) { return Credential(l), nil }

// startFake starts f on a loopback port until the test ends.
func startFake(t *testing.T, f *fakeMemcached) *fakeMemcached {
	t.Helper()
	addr := f.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if f.authFile != "" {
		f.loadAuth(t)
	}
	if f.dir != "" {
		if f.cert, err = LoadPair(f.dir); err != nil {
			t.Fatal(err)
		}
		l = tls.NewListener(l, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			c := f.cert
			return &c, nil
		}})
	}
	f.addr = l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeMemcached) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	authed := f.password == "" && f.authFile == ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		f.record(line)
		fields := strings.Fields(line)
		switch {
		case len(fields) == 5 && fields[0] == "set":
			n, _ := strconv.Atoi(fields[4])
			data := make([]byte, n+2)
			if _, err := io.ReadFull(r, data); err != nil {
				return
			}
			if !authed && f.login(string(data[:n])) {
				authed = true
				fmt.Fprint(c, "STORED\r\n")
			} else if !authed {
				fmt.Fprint(c, "CLIENT_ERROR authentication failure\r\n")
			} else {
				fmt.Fprint(c, "STORED\r\n")
			}
		case !authed:
			fmt.Fprint(c, "CLIENT_ERROR unauthenticated\r\n")
		case line == "stats":
			for k, v := range f.stats {
				fmt.Fprintf(c, "STAT %s %s\r\n", k, v)
			}
			for _, l := range f.extraStats {
				fmt.Fprintf(c, "%s\r\n", l)
			}
			fmt.Fprint(c, "END\r\n")
		case line == "refresh_certs":
			cert, err := LoadPair(f.dir)
			if err != nil || f.refuseRefresh {
				fmt.Fprint(c, "ERROR failed to refresh SSL settings\r\n")
				continue
			}
			f.mu.Lock()
			f.cert = cert
			f.mu.Unlock()
			fmt.Fprint(c, "OK\r\n")
		default:
			fmt.Fprint(c, "ERROR\r\n")
		}
	}
}

func (f *fakeMemcached) record(line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, line)
}

// count returns how often f received command.
func (f *fakeMemcached) count(command string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.commands {
		if c == command {
			n++
		}
	}
	return n
}

// writeSecret writes a kubernetes.io/tls Secret's files into dir as the
// kubelet mounts them: a certificate for serial, signed by a CA of its own,
// its key, and the CA as ca.crt.
func writeSecret(t *testing.T, dir string, serial int64) {
	t.Helper()
	writeSecretUntil(t, dir, serial, time.Now().Add(time.Hour))
}

// writeKeyOfAnotherCertificate replaces the key in dir, a Secret's mount
// that writeSecret wrote, with the key of another certificate, serial 2 of
// another CA, so that the pair no longer loads.
func writeKeyOfAnotherCertificate(t *testing.T, dir string) {
	t.Helper()
	other := t.TempDir()
	writeSecret(t, other, 2)
	b, err := os.ReadFile(filepath.Join(other, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeSecretUntil is writeSecret of a certificate that expires at
// notAfter.
func writeSecretUntil(t *testing.T, dir string, serial int64, notAfter time.Time) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "memcached"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		caFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAuth writes the -Y file path with content, as the kubelet replaces
// it: whole, at once.
func writeAuth(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
