// Package npm runs memcached-elasticache, a third-party npm client of
// ElastiCache's auto discovery (test/npm/package-lock.json pins it), against
// the sidecar's discovery endpoint on this machine's loopback, with no
// cluster: three real memcached processes and a membership file that the test
// rewrites as the kubelet rewrites the mounted ConfigMap. The real-node suite's
// TestDiscoveryWithTheNPMClient runs the same client against real pods.
package npm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// poll is the client's discovery interval (memcached-elasticache's
// autoDiscoverInterval), a minute by default.
const poll = 500 * time.Millisecond

// freeAddr returns a loopback address that nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs name with args until the test ends, or until it is stopped
// with the function it returns.
func start(t *testing.T, name string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// startMemcached runs Debian's memcached on a free loopback port, and waits
// until it answers.
func startMemcached(t *testing.T) (addr string, stop func()) {
	t.Helper()
	addr = freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "16"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	stop = start(t, "memcached", args...)
	if err := framework.Eventually(context.Background(), 10*time.Second, "memcached at "+addr, func(context.Context) error {
		return framework.MemcachedSetGet(addr, "ready", "yes")
	}); err != nil {
		t.Fatal(err)
	}
	return addr, stop
}

// writeCluster replaces the membership file as the kubelet replaces a
// ConfigMap's file, whole, with version and addrs (host:port, the host
// being the IP), and returns when.
func writeCluster(t *testing.T, file string, version int, addrs ...string) time.Time {
	t.Helper()
	var nodes []string
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		nodes = append(nodes, host+"|"+host+"|"+port)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(version)+"\n"+strings.Join(nodes, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// TestClientFollowsTheMembership: the client, given the discovery endpoint
// alone, finds the nodes, stores and reads keys on them, and follows a scale
// from 2 to 3 nodes, back to 2, and a node replaced by another, each within
// its poll interval of the file's change, without a restart; the keys on the
// nodes that stayed read back through it after each change.
func TestClientFollowsTheMembership(t *testing.T) {
	paths, err := framework.NewPaths()
	if err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(paths.Output(), "bin", "memcached-sidecar")
	if err := framework.RequireFiles("make build", sidecar); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"memcached", "node"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("%s is required (test/scripts/install-deps.sh test installs it): %v", cmd, err)
		}
	}
	a, _ := startMemcached(t)
	b, stopB := startMemcached(t)
	c, _ := startMemcached(t)
	file := filepath.Join(t.TempDir(), "cluster")
	writeCluster(t, file, 1, a, b)
	endpoint := freeAddr(t)
	start(t, sidecar, "--memcached="+a, "--discovery-addr="+endpoint, "--discovery-file="+file)
	if err := framework.Eventually(context.Background(), 10*time.Second, "the discovery endpoint", func(context.Context) error {
		conn, err := net.Dial("tcp", endpoint)
		if err == nil {
			conn.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	client, err := framework.StartNPMClient(t, paths, endpoint, poll)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the npm client printed:\n%s", client.Output())
		}
	}()
	keys := framework.NewClientKeys(client)
	// follow waits for the client to list want, within its poll interval of
	// changed plus the slack of a busy machine, and returns how long it took.
	follow := func(changed time.Time, want ...string) time.Duration {
		t.Helper()
		want = slices.Sorted(slices.Values(want))
		var took time.Duration
		if err := framework.Eventually(context.Background(), 30*time.Second, fmt.Sprintf("the client to list %v", want), func(context.Context) error {
			nodes, at := client.Nodes()
			if !slices.Equal(nodes, want) {
				return fmt.Errorf("it lists %v", nodes)
			}
			took = at.Sub(changed)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return took
	}

	took := follow(time.Now(), a, b)
	if err := keys.Write("two", 20, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	t.Logf("2 nodes found, 20 keys written: %v", keys.Holders())

	steps := []struct {
		name   string
		nodes  []string
		stayed bool
		before func()
	}{
		{name: "scaled to 3", nodes: []string{a, b, c}},
		{name: "scaled back to 2", nodes: []string{a, b}, stayed: true},
		{name: "b replaced by c", nodes: []string{a, c}, before: stopB},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		took = follow(writeCluster(t, file, i+2, s.nodes...), s.nodes...)
		// A poll is due within the interval; its round trips take
		// milliseconds, and a slow machine gets the rest of the deadline.
		t.Logf("%s: the client listed %v %v after the file changed (poll interval %v)", s.name, s.nodes, took.Round(time.Millisecond), poll)
		read, moved, err := keys.ReadBack(s.nodes, s.stayed)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		t.Logf("%s: %d keys on nodes that stayed read back, %d moved by the hash to a new node", s.name, read, moved)
		if read == 0 {
			t.Fatalf("%s: no key read back", s.name)
		}
		if err := keys.Write(strings.ReplaceAll(s.name, " ", "-"), 5, s.nodes); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}
