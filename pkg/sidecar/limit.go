package sidecar

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// LimitListener returns a listener that accepts from ln while fewer than max
// of the connections it returned are open, and closes any other at once,
// calling refused for each: any pod of the cluster can reach the sidecar's
// ports, and each connection costs the sidecar memory out of a container
// limit of 64Mi. It closes rather than queues, unlike
// golang.org/x/net/netutil's LimitListener, so that a client over the cap
// learns it at once and a flood of them holds nothing but the kernel's
// backlog; a slot frees when its connection is closed. max must be
// positive; refused may be nil.
func LimitListener(ln net.Listener, max int, refused func()) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), refused: refused}
}

type limitListener struct {
	net.Listener
	// slots holds a token for each open connection.
	slots   chan struct{}
	refused func()
}

// Accept returns the next connection under the cap; one over it is closed
// and Accept waits for the next.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
			if l.refused != nil {
				l.refused()
			}
		}
	}
}

// limitConn frees its slot when it is first closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Bounds of the wait after a temporary accept error, as net/http's
// Server waits: the error, such as EMFILE when the process is out of file
// descriptors, passes once connections close, and a server that returned
// on it would take the sidecar's worker down with it.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// acceptBackoff returns the wait after a temporary accept error that
// follows a wait of last, zero after a successful accept.
func acceptBackoff(last time.Duration) time.Duration {
	if last == 0 {
		return acceptBackoffMin
	}
	return min(2*last, acceptBackoffMax)
}

// temporaryAcceptError reports whether an accept error passes by itself:
// out of file descriptors (EMFILE, ENFILE) or buffers (ENOBUFS, ENOMEM), a
// connection reset before it was accepted (ECONNABORTED), or a timeout.
func temporaryAcceptError(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
