// Package sidecartest holds what the tests of the sidecar's servers share
// across packages: pkg/sidecar's and cmd/memcached-sidecar's.
package sidecartest

import (
	"errors"
	"net"
	"testing"
	"time"
)

// WaitClosed reads c until the server closes it, failing t unless that
// happens within patience, and returns how long after since it was.
func WaitClosed(t testing.TB, c net.Conn, since time.Time, patience time.Duration) time.Duration {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, 32<<10)
	for {
		_, err := c.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("the connection is still open after %v", patience)
		}
		return time.Since(since)
	}
}
