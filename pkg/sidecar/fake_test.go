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
	// refuseRefresh makes refresh_certs fail, as memcached does when the
	// files do not load.
	refuseRefresh bool
	stats         map[string]string

	mu       sync.Mutex
	cert     tls.Certificate
	commands []string
}

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
	authed := f.password == ""
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
			if !authed && string(data[:n]) == "sidecar "+f.password {
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
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
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
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

// writeAuth writes a -Y file whose first line is the sidecar's login.
func writeAuth(t *testing.T, dir, password string) string {
	t.Helper()
	path := filepath.Join(dir, "passwords")
	if err := os.WriteFile(path, []byte("sidecar:"+password+"\nother:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
