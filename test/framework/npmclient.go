package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NPMClient is test/npm/discovery-client.js running memcached-elasticache, the
// third-party npm client of ElastiCache's auto discovery that the discovery tests
// drive, installed by test/scripts/npm-client.sh as test/npm/package-lock.json
// pins it. It is given the configuration endpoint and its poll interval and
// nothing else, as an application moving from ElastiCache is.
type NPMClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu sync.Mutex
	// lines is everything the client printed, for diagnostics and the docs.
	lines []string
	// nodes is the last list of nodes its discovery found, with when.
	nodes   []string
	nodesAt time.Time
	// failures are the polls that failed.
	failures []string
	replies  map[int]chan npmReply
	nextID   int
	exited   chan struct{}
}

// npmReply is the client's answer to one request.
type npmReply struct {
	ID    int     `json:"id"`
	OK    bool    `json:"ok"`
	Value *string `json:"value"`
	Error *string `json:"error"`
}

// npmLine is one line the client prints.
type npmLine struct {
	Event string   `json:"event"`
	Nodes []string `json:"nodes"`
	Error string   `json:"error"`
	npmReply
}

// StartNPMClient installs the npm client (instant once installed) and starts it
// against endpoint, polling every poll; the test's end stops it.
func StartNPMClient(t testing.TB, p Paths, endpoint string, poll time.Duration) (*NPMClient, error) {
	t.Helper()
	out, err := p.RunScript(context.Background(), 5*time.Minute, "npm-client.sh")
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSpace(out)
	cmd := exec.Command("node", filepath.Join(p.Root, "test", "npm", "discovery-client.js"), endpoint, strconv.FormatInt(poll.Milliseconds(), 10))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the npm client: %v", err)
	}
	c := &NPMClient{cmd: cmd, stdin: stdin, replies: map[int]chan npmReply{}, exited: make(chan struct{})}
	go c.read(stdout)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-c.exited
		}
		_ = cmd.Wait()
	})
	return c, nil
}

// read takes in what the client prints until it exits.
func (c *NPMClient) read(stdout io.Reader) {
	defer close(c.exited)
	s := bufio.NewScanner(stdout)
	for s.Scan() {
		var l npmLine
		line := s.Text()
		c.mu.Lock()
		c.lines = append(c.lines, line)
		if err := json.Unmarshal([]byte(line), &l); err == nil {
			switch {
			case l.Event == "nodes":
				c.nodes, c.nodesAt = slices.Clone(l.Nodes), time.Now()
			case l.Event == "failure":
				c.failures = append(c.failures, l.Error)
			case c.replies[l.ID] != nil:
				c.replies[l.ID] <- l.npmReply
				delete(c.replies, l.ID)
			}
		}
		c.mu.Unlock()
	}
}

// Nodes returns the nodes the client's discovery last found, as host:port,
// and when it found them; nil before its first discovery.
func (c *NPMClient) Nodes() ([]string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes), c.nodesAt
}

// Output is everything the client printed so far, one JSON object a line.
func (c *NPMClient) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// Set stores value under key through the client.
func (c *NPMClient) Set(key, value string) error {
	r, err := c.request(map[string]string{"op": "set", "key": key, "value": value})
	if err == nil && !r.OK {
		err = fmt.Errorf("set %s: %s", key, deref(r.Error))
	}
	return err
}

// Get returns the value of key through the client, and whether it had one.
func (c *NPMClient) Get(key string) (string, bool, error) {
	r, err := c.request(map[string]string{"op": "get", "key": key})
	if err != nil {
		return "", false, err
	}
	if !r.OK {
		return "", false, fmt.Errorf("get %s: %s", key, deref(r.Error))
	}
	return deref(r.Value), r.Value != nil, nil
}

// request sends req and waits up to 10 s for its reply: the client's own
// timeouts are a second.
func (c *NPMClient) request(req map[string]string) (npmReply, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan npmReply, 1)
	c.replies[id] = ch
	c.mu.Unlock()
	body := map[string]interface{}{"id": id}
	for k, v := range req {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return npmReply{}, fmt.Errorf("the npm client does not take requests: %v", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.exited:
		return npmReply{}, fmt.Errorf("the npm client exited")
	case <-time.After(10 * time.Second):
		return npmReply{}, fmt.Errorf("the npm client did not answer %s in 10 s", b)
	}
}

// Server returns the node, host:port, that the client sends key to now.
func (c *NPMClient) Server(key string) (string, error) {
	r, err := c.request(map[string]string{"op": "server", "key": key})
	if err == nil && !r.OK {
		err = fmt.Errorf("server of %s: %s", key, deref(r.Error))
	}
	return deref(r.Value), err
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ClientKeys are keys written through an NPMClient, each with the node that
// holds it, found by asking every node directly: what a membership change must
// leave readable.
type ClientKeys struct {
	client *NPMClient
	values map[string]string
	holder map[string]string
}

// NewClientKeys tracks the keys written through c.
func NewClientKeys(c *NPMClient) *ClientKeys {
	return &ClientKeys{client: c, values: map[string]string{}, holder: map[string]string{}}
}

// Write stores n keys named prefix:1 to prefix:n through the client, reads each
// back through it, and finds the node of nodes that holds it.
func (k *ClientKeys) Write(prefix string, n int, nodes []string) error {
	for i := 1; i <= n; i++ {
		key, value := fmt.Sprintf("%s:%d", prefix, i), fmt.Sprintf("value %d of %s", i, prefix)
		if err := k.client.Set(key, value); err != nil {
			return err
		}
		got, ok, err := k.client.Get(key)
		if err != nil || !ok || got != value {
			return fmt.Errorf("get %s through the client just after its set: %q, found %t, %v", key, got, ok, err)
		}
		holder := ""
		for _, node := range nodes {
			if MemcachedGet(node, key, value) == nil {
				holder = node
			}
		}
		if holder == "" {
			return fmt.Errorf("no node of %v holds %s, which the client stored", nodes, key)
		}
		k.values[key], k.holder[key] = value, holder
	}
	return nil
}

// Holders counts the keys each node holds.
func (k *ClientKeys) Holders() map[string]int {
	out := map[string]int{}
	for _, h := range k.holder {
		out[h]++
	}
	return out
}

// ReadBack reads every key whose node is still among nodes through the client.
// A key that the client's hash now sends to its node must read back; one that
// it sends to another node, as consistent hashing moves some keys to a node that
// joined, must not be found there (a miss, not another value). With stayed,
// every key whose node stayed must still be sent to it, as consistent hashing
// promises when nodes only leave. A key that moved is no longer followed: the
// client cannot reach it, and when the node it went to leaves later, the hash
// may send it back to a node that stayed, which is not the one that holds it.
// It returns how many read back and how many moved.
func (k *ClientKeys) ReadBack(nodes []string, stayed bool) (read, moved int, err error) {
	keys := make([]string, 0, len(k.values))
	for key := range k.values {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if !slices.Contains(nodes, k.holder[key]) {
			continue
		}
		server, err := k.client.Server(key)
		if err != nil {
			return read, moved, err
		}
		got, ok, err := k.client.Get(key)
		if err != nil {
			return read, moved, err
		}
		switch {
		case server == k.holder[key] && (!ok || got != k.values[key]):
			return read, moved, fmt.Errorf("%s, on %s which stayed, read back through the client as %q (found %t), want %q", key, server, got, ok, k.values[key])
		case server == k.holder[key]:
			read++
		case stayed:
			return read, moved, fmt.Errorf("%s is on %s, which stayed, but the client now sends it to %s", key, k.holder[key], server)
		case ok:
			return read, moved, fmt.Errorf("%s, moved by the hash from %s to %s, read %q there", key, k.holder[key], server, got)
		default:
			moved++
			delete(k.values, key)
			delete(k.holder, key)
		}
	}
	return read, moved, nil
}
