// Command tenant is what a hostile tenant runs in its pods in the real-node
// suite (TestHostileTenant): nothing a tenant with the right to create pods
// could not run. The suite's TestNetworkPolicyIsEnforced uses it as a plain
// client too. It has four modes.
//
//	tenant report ADDR
//
// serves, at ADDR, every HTTP request with a 200 and a JSON report whose
// message never ends, as a pod that passes for a memcached pod's sidecar
// would answer the operator's poll, and logs each request it gets, so that
// the test can tell whom the operator asked.
//
//	tenant flood ADDR CONNS plain|tls
//
// opens CONNS connections to ADDR and holds them: plain ones send nothing,
// tls ones send the first bytes of a TLS ClientHello and never finish it.
// It logs "done: opened N of CONNS" once it has tried them all, then every
// few seconds how many it opened and how many the server has closed. It never exits by itself.
//
//	tenant idle
//
// does nothing until SIGTERM or SIGINT, then exits 0, so that a pod stays up for
// `kubectl exec` and stops at once when it is deleted.
//
//	tenant probe ADDR
//
// connects to the memcached server at ADDR, sends `version` and prints one line:
// "ok VERSION ..." and exit status 0 when the server answered, or "connect: ERROR"
// or "version: ERROR" and exit status 1 when the connection or the command failed
// (within probeTimeout each), so that a test can tell a refused or dropped
// connection from a server that does not answer.
//
//	tenant keys ADDR [USER PASSWORD]
//
// connects to the plain memcached server at ADDR, logs in as USER with PASSWORD
// when given (memcached's -Y authentication), stores a key and reads it back,
// and prints one line: "ok stored and read KEY" and exit status 0, or "connect:
// ERROR" or "keys: ERROR" and exit status 1, within probeTimeout each.
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 || (len(os.Args) < 3 && os.Args[1] != "idle") {
		fmt.Fprintln(os.Stderr, "usage: tenant report ADDR | tenant flood ADDR CONNS plain|tls | tenant idle | tenant probe ADDR | tenant keys ADDR [USER PASSWORD]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "idle":
		idle()
	case "probe":
		os.Exit(probe(os.Args[2]))
	case "keys":
		var user, password string
		if len(os.Args) == 5 {
			user, password = os.Args[3], os.Args[4]
		}
		os.Exit(keys(os.Args[2], user, password))
	case "report":
		err = report(os.Args[2])
	case "flood":
		if len(os.Args) != 5 {
			err = fmt.Errorf("usage: tenant flood ADDR CONNS plain|tls")
			break
		}
		var n int
		if n, err = strconv.Atoi(os.Args[3]); err == nil {
			err = flood(os.Args[2], n, os.Args[4] == "tls")
		}
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenant:", err)
		os.Exit(1)
	}
}

// report serves the endless report.
func report(addr string) error {
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a'
	}
	return http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("%s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write([]byte(`{"problems":[{"reason":"CertificateRefreshFailed","message":"`)); err != nil {
			return
		}
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
}

// clientHelloStart is a TLS record header of a handshake of 512 bytes and
// the start of a ClientHello: a server waits for the rest.
var clientHelloStart = []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}

// flood opens n connections to addr and holds them, logging every 5 s.
func flood(addr string, n int, tls bool) error {
	var opened, closed atomic.Int64
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Printf("dial: %v\n", err)
			continue
		}
		opened.Add(1)
		if tls {
			_, _ = c.Write(clientHelloStart)
		}
		go func() {
			// A read returns once the server closes the connection.
			var b [1]byte
			_, _ = c.Read(b[:])
			closed.Add(1)
		}()
	}
	fmt.Printf("done: opened %d of %d\n", opened.Load(), n)
	for {
		fmt.Printf("opened %d, closed by the server %d\n", opened.Load(), closed.Load())
		time.Sleep(5 * time.Second)
	}
}

// idle waits for SIGTERM or SIGINT. As a container's first process it has no
// default action for them, so it must catch them to stop when the pod goes.
func idle() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}

// probeTimeout bounds the connection and the answer of a probe each: a policy
// that drops packets instead of refusing them shows as a connect timeout.
const probeTimeout = 3 * time.Second

// probe asks the memcached server at addr for its version, prints the outcome
// and returns the exit status.
func probe(addr string) int {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		fmt.Printf("connect: %v\n", err)
		return 1
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		fmt.Printf("version: %v\n", err)
		return 1
	}
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		fmt.Printf("version: %v\n", err)
		return 1
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Printf("version: %v\n", err)
		return 1
	}
	if !strings.HasPrefix(line, "VERSION ") {
		fmt.Printf("version: unexpected answer %q\n", line)
		return 1
	}
	fmt.Printf("ok %s\n", strings.TrimSpace(line))
	return 0
}

// keys stores a key at the memcached server at addr and reads it back, prints
// the outcome and returns the exit status.
func keys(addr, user, password string) int {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		fmt.Printf("connect: %v\n", err)
		return 1
	}
	defer c.Close()
	key := fmt.Sprintf("tenant-%d", time.Now().UnixNano())
	if err := storeAndRead(c, key, user, password); err != nil {
		fmt.Printf("keys: %v\n", err)
		return 1
	}
	fmt.Printf("ok stored and read %s\n", key)
	return 0
}

// storeAndRead logs in on c as user, unless user is "", then sets key to its
// own name and gets it back.
func storeAndRead(c net.Conn, key, user, password string) error {
	if err := c.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return err
	}
	var want []string
	if user != "" {
		login := user + " " + password
		if _, err := fmt.Fprintf(c, "set login 0 0 %d\r\n%s\r\n", len(login), login); err != nil {
			return err
		}
		want = append(want, "STORED")
	}
	if _, err := fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(key), key, key); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	want = append(want, "STORED", fmt.Sprintf("VALUE %s 0 %d", key, len(key)), key, "END")
	for _, w := range want {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got := strings.TrimRight(line, "\r\n"); got != w {
			return fmt.Errorf("got %q, want %q", got, w)
		}
	}
	return nil
}
