package sidecar

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// LimitListener returns a listener that accepts from ln while fewer than max
// of the connections it returned are open, and fewer than perClient of them
// from the connection's remote IP, and closes any other at once, calling
// refused for each: any pod of the cluster can reach the sidecar's ports,
// and each connection costs the sidecar memory out of a container limit of
// 64Mi. The share of one IP keeps one client, such as a pod that opens
// thousands of connections, from taking every slot, so that the others
// still get in; only clients from more IPs than max/perClient together can
// fill it. It closes rather than queues, unlike golang.org/x/net/netutil's
// LimitListener, so that a client over the cap learns it at once and a
// flood of them holds nothing but the kernel's backlog; a slot frees when
// its connection is closed. max and perClient must be positive; refused
// may be nil.
func LimitListener(ln net.Listener, max, perClient int, refused func()) net.Listener {
	return &limitListener{Listener: ln, max: max, perClient: perClient, byClient: map[string]int{}, refused: refused}
}

type limitListener struct {
	net.Listener
	max, perClient int
	refused        func()

	mu sync.Mutex
	// open counts the open connections, and byClient those of each
	// remote IP that has any.
	open     int
	byClient map[string]int
}

// Accept returns the next connection under the caps; one over them is
// closed and Accept waits for the next.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c.RemoteAddr())
		if l.take(client) {
			return &limitConn{Conn: c, release: func() { l.give(client) }}, nil
		}
		// Counted before the close, so that whoever sees the close sees
		// it counted.
		if l.refused != nil {
			l.refused()
		}
		c.Close()
	}
}

// take takes a slot for a connection of client, if the caps leave one.
func (l *limitListener) take(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max || l.byClient[client] >= l.perClient {
		return false
	}
	l.open++
	l.byClient[client]++
	return true
}

// give frees the slot of a connection of client.
func (l *limitListener) give(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byClient[client]--; l.byClient[client] == 0 {
		delete(l.byClient, client)
	}
}

// clientOf returns what identifies a connection's client: the IP of a TCP
// address, the whole address otherwise.
func clientOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return addr.String()
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
