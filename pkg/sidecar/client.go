// Package sidecar is the memcached pod's sidecar: it tells its own memcached
// to reload its TLS certificate when the kubelet updates the mounted Secret,
// serves memcached's stats as Prometheus metrics, and answers ElastiCache's
// auto discovery with the membership the operator mounts (Discovery). It talks to memcached
// over the pod's loopback, with TLS and ASCII authentication when memcached
// has them. A Supervisor runs that work in a worker process and restarts it
// when it exits, so that the sidecar's container, and the pod's readiness
// with it, never follow the worker's failures.
package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"
)

// The files of a kubernetes.io/tls Secret, as the kubelet mounts them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// ioTimeout bounds every exchange with memcached, which answers at once on
// the pod's loopback.
const ioTimeout = 5 * time.Second

// Dialer opens connections to memcached as the sidecar needs them.
type Dialer struct {
	// Addr is memcached's host:port.
	Addr string
	// TLSDir, when set, holds the mounted Secret: connections speak TLS.
	TLSDir string
	// ClientCert presents a client certificate, as memcached requires when
	// it verifies clients: the certificate of Certificate, or of the files
	// in TLSDir while Certificate is nil.
	ClientCert bool
	// Certificate, when set, is the client certificate to present.
	Certificate *tls.Certificate
	// Credentials, when set, give the user and password to log in with:
	// memcached has authentication.
	Credentials Credentials
}

// Conn is an open connection to memcached.
type Conn struct {
	net.Conn
	r *bufio.Reader
	// Peer is the certificate memcached presented, nil without TLS.
	Peer *x509.Certificate
	// login is the credential Dial logged in with, zero without auth.
	login Credential
}

// Dial connects to memcached, completes the TLS handshake and logs in
// with the credential of d.Credentials.
func (d *Dialer) Dial(ctx context.Context) (*Conn, error) {
	var cred Credential
	if d.Credentials != nil {
		var err error
		if cred, err = d.Credentials.Credential(); err != nil {
			return nil, err
		}
	}
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	if d.Credentials != nil {
		if err := c.Login(cred); err != nil {
			c.Close()
			return nil, err
		}
		c.login = cred
	}
	return c, nil
}

// dial connects to memcached and completes the TLS handshake, without a
// login.
//
// The handshake does not verify memcached's certificate: the connection
// never leaves the pod's own loopback, which only the pod's containers
// share, so there is no one to impersonate memcached. The certificate it
// presents is what the refresh compares with the mounted one.
func (d *Dialer) dial(ctx context.Context) (*Conn, error) {
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", d.Addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: raw}
	if d.TLSDir != "" {
		cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
		if d.ClientCert {
			cert := d.Certificate
			if cert == nil {
				pair, err := LoadPair(d.TLSDir)
				if err != nil {
					raw.Close()
					return nil, err
				}
				cert = &pair
			}
			cfg.Certificates = []tls.Certificate{*cert}
		}
		tc := tls.Client(raw, cfg)
		_ = tc.SetDeadline(time.Now().Add(ioTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %v", d.Addr, err)
		}
		if peers := tc.ConnectionState().PeerCertificates; len(peers) > 0 {
			c.Peer = peers[0]
		}
		c.Conn = tc
	}
	c.r = bufio.NewReader(c.Conn)
	return c, nil
}

// LoginRefusedError reports that memcached refused a login: it has not
// loaded the credential, or no longer has it.
type LoginRefusedError struct {
	// User is the user that tried.
	User string
	// Reply is memcached's reply, such as "CLIENT_ERROR authentication
	// failure".
	Reply string
}

func (e *LoginRefusedError) Error() string {
	return fmt.Sprintf("memcached refused the login of user %s: %s", e.User, e.Reply)
}

// Login authenticates as cred, as memcached's ASCII authentication
// expects it: a set of any key whose data is the user and the password
// separated by a space. A refusal is a *LoginRefusedError.
func (c *Conn) Login(cred Credential) error {
	token := cred.User + " " + cred.Password
	reply, err := c.command(fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(token), token))
	if err != nil {
		return err
	}
	if strings.HasPrefix(reply, "CLIENT_ERROR") {
		return &LoginRefusedError{User: cred.User, Reply: reply}
	}
	if reply != "STORED" {
		return fmt.Errorf("unexpected reply to the login of user %s: %s", cred.User, reply)
	}
	return nil
}

// command sends req and returns memcached's one-line reply.
func (c *Conn) command(req string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// Stats returns memcached's reply to the stats command.
func (c *Conn) Stats() (StatsReply, error) {
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		return StatsReply{}, err
	}
	return readStats(c.r)
}

// RefreshCerts tells memcached to reload its certificate files.
func (c *Conn) RefreshCerts() error {
	reply, err := c.command("refresh_certs\r\n")
	if err != nil {
		return err
	}
	if reply != "OK" {
		return fmt.Errorf("refresh_certs: %s", reply)
	}
	return nil
}

// LoadPair reads the certificate and key of the Secret mounted in dir.
func LoadPair(dir string) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
}

// errNoCertificate reports a handshake without a server certificate.
var errNoCertificate = errors.New("memcached presented no certificate")

// samePeer reports whether c's peer certificate is der.
func samePeer(c *Conn, der []byte) (bool, error) {
	if c.Peer == nil {
		return false, errNoCertificate
	}
	return bytes.Equal(c.Peer.Raw, der), nil
}
