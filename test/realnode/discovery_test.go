package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// discoveryPort is the sidecar's discovery port in the pods and the Service.
	discoveryPort = 11212
	// npmPoll is the npm client's discovery interval in the tests, its
	// autoDiscoverInterval; the client's default is a minute.
	npmPoll = 5 * time.Second
)

// discoveryReply is a pod's answer to "config get cluster".
type discoveryReply struct {
	version int
	// nodes are host:port of the nodes, sorted, the host being checked to be
	// the IP.
	nodes []string
}

// askDiscovery sends "config get cluster" on c and reads ElastiCache's reply,
// checking its byte count, the \r\n after the data and END.
func askDiscovery(c *mcConn) (discoveryReply, error) {
	head, err := c.do("config get cluster\r\n")
	if err != nil {
		return discoveryReply{}, err
	}
	var n int
	if _, err := fmt.Sscanf(head, "CONFIG cluster 0 %d", &n); err != nil {
		return discoveryReply{}, fmt.Errorf("config get cluster: got %q", head)
	}
	data := make([]byte, n+len("\r\nEND\r\n"))
	if _, err := io.ReadFull(c.r, data); err != nil {
		return discoveryReply{}, err
	}
	if tail := string(data[n:]); tail != "\r\nEND\r\n" {
		return discoveryReply{}, fmt.Errorf("config get cluster: %d bytes are followed by %q, want \\r\\nEND\\r\\n", n, tail)
	}
	lines := strings.Split(string(data[:n]), "\n")
	if len(lines) != 3 || lines[2] != "" {
		return discoveryReply{}, fmt.Errorf("config get cluster: data %q is not two lines ending in \\n", data[:n])
	}
	var r discoveryReply
	if r.version, err = strconv.Atoi(lines[0]); err != nil {
		return discoveryReply{}, fmt.Errorf("config get cluster: version %q", lines[0])
	}
	for _, entry := range strings.Fields(lines[1]) {
		parts := strings.Split(entry, "|")
		if len(parts) != 3 || parts[0] != parts[1] || parts[2] != strconv.Itoa(memcachedPort) {
			return discoveryReply{}, fmt.Errorf("config get cluster: node %q, want ip|ip|%d", entry, memcachedPort)
		}
		r.nodes = append(r.nodes, net.JoinHostPort(parts[1], parts[2]))
	}
	slices.Sort(r.nodes)
	return r, nil
}

// readyNodes returns memcached's host:port of o's Ready pods, sorted as the npm
// client sorts them, and their discovery addresses by pod.
func readyNodes(o framework.Observed) (nodes []string, endpoints map[string]string) {
	endpoints = map[string]string{}
	for _, p := range o.Pods {
		if !p.Ready() || p.Metadata.DeletionTimestamp != nil {
			continue
		}
		nodes = append(nodes, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(memcachedPort)))
		endpoints[p.Metadata.Name] = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(discoveryPort))
	}
	slices.Sort(nodes)
	return nodes, endpoints
}

// waitEveryPodServes waits until the discovery endpoint of every pod of
// endpoints answers want at a version above after, and returns when each did
// after since, and the version. The kubelet writes each pod's copy of the
// ConfigMap at its own sync of that pod; a new pod mounts the current one.
func waitEveryPodServes(t *testing.T, dial func(context.Context, string) (*mcConn, error), endpoints map[string]string, want []string, after int, since time.Time, budget time.Duration) (map[string]time.Duration, int) {
	t.Helper()
	took := map[string]time.Duration{}
	version := 0
	err := framework.EventuallyEvery(context.Background(), budget, time.Second, fmt.Sprintf("every pod's discovery endpoint to serve %v", want), func(ctx context.Context) error {
		var waiting []string
		for pod, addr := range endpoints {
			if _, ok := took[pod]; ok {
				continue
			}
			c, err := dial(ctx, addr)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", pod, err))
				continue
			}
			r, err := askDiscovery(c)
			c.Close()
			switch {
			case err != nil:
				waiting = append(waiting, fmt.Sprintf("%s: %v", pod, err))
			case r.version < after:
				return framework.Permanent(fmt.Errorf("pod %s serves version %d, below %d, served before", pod, r.version, after))
			case r.version == after || !slices.Equal(r.nodes, want):
				waiting = append(waiting, fmt.Sprintf("%s: version %d, %v", pod, r.version, r.nodes))
			case version != 0 && r.version != version:
				return framework.Permanent(fmt.Errorf("pod %s serves %v at version %d, another pod at %d", pod, want, r.version, version))
			default:
				took[pod], version = time.Since(since).Round(100*time.Millisecond), r.version
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("waiting for %v", waiting)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return took, version
}

// serviceForwarder stands in, for the npm client on the host, for the DNS
// name of a headless Service's discovery port, which clients in the cluster
// connect to (memcached.<namespace>.svc:11212): it forwards each connection
// to a Ready endpoint of the Service's EndpointSlices on the port named
// discovery, as the cluster's DNS resolves the name to the Ready pods. It
// keeps one endpoint while that stays Ready, so that the client's polls
// reach one pod, which never serves an older version than it served.
type serviceForwarder struct {
	ln net.Listener
	mu sync.Mutex
	// ready are the Ready endpoints, IP:port, and current the one in use.
	ready   []string
	current string
	err     error
}

// forwardService starts a serviceForwarder of Service name's port discovery,
// and returns it once it knows a Ready endpoint; the test's end stops it.
func forwardService(t *testing.T, k framework.Kubectl, name string) *serviceForwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &serviceForwarder{ln: ln}
	ctx, cancel := context.WithCancel(context.Background())
	go f.refresh(ctx, k, name)
	go f.serve()
	t.Cleanup(func() {
		cancel()
		ln.Close()
	})
	err = framework.Eventually(context.Background(), readyTimeout, "a Ready endpoint of service "+name+"'s port discovery", func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.current == "" {
			return fmt.Errorf("none yet (%v)", f.err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// refresh reads the Service's Ready endpoints every 2 s until ctx ends.
func (f *serviceForwarder) refresh(ctx context.Context, k framework.Kubectl, name string) {
	for {
		var got framework.EndpointSlices
		err := k.GetJSON(ctx, &got, "endpointslices", "-l", "kubernetes.io/service-name="+name)
		var ready []string
		for _, s := range got.Items {
			port := 0
			for _, p := range s.Ports {
				if p.Name == "discovery" {
					port = p.Port
				}
			}
			if port == 0 {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
					ready = append(ready, net.JoinHostPort(e.Addresses[0], strconv.Itoa(port)))
				}
			}
		}
		slices.Sort(ready)
		f.mu.Lock()
		if err == nil {
			f.ready = ready
			if !slices.Contains(ready, f.current) {
				f.current = ""
				if len(ready) > 0 {
					f.current = ready[0]
				}
			}
		}
		f.err = err
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// addr is where the npm client connects.
func (f *serviceForwarder) addr() string { return f.ln.Addr().String() }

// serve forwards every connection to the current endpoint.
func (f *serviceForwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			f.mu.Lock()
			target := f.current
			f.mu.Unlock()
			if target == "" {
				return
			}
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			go func() {
				_, _ = io.Copy(up, c)
				_ = up.(*net.TCPConn).CloseWrite()
			}()
			_, _ = io.Copy(c, up)
		}()
	}
}

// TestDiscoveryWithTheNPMClient runs memcached-elasticache, a third-party npm
// client of ElastiCache's auto discovery (test/npm, pinned), against a
// Memcached with spec.discovery, given the Service's discovery port alone
// (through serviceForwarder, which stands in for the cluster's DNS on the
// host). It finds the pods, stores and reads keys, and follows a scale from 2
// to 4 to 2 pods and a deleted pod, without a restart: after each change,
// every pod serves the new membership at a higher version than before
// within the kubelet's sync of the pods (syncFrequency and half of it, read
// from the kubelet), the client lists it within its poll interval after that,
// and the keys on the pods that stayed read back through it.
func TestDiscoveryWithTheNPMClient(t *testing.T) {
	t.Parallel()
	const name = "discovery"
	sync, err := kubeletSyncFrequency(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Each pod's file is rewritten at the kubelet's next sync of the pod,
	// within syncFrequency and half of it in jitter; the rest is the
	// operator's and the sidecar's, seconds, and slack for a busy machine.
	propagation := sync*3/2 + 30*time.Second
	applyMemcachedSpec(t, admin, name, "size: 2\ndiscovery: {enabled: true}")
	o := waitServing(t, name, 2)
	nodes, endpoints := readyNodes(o)
	_, version := waitEveryPodServes(t, dialPlain, endpoints, nodes, 0, time.Now(), propagation)

	fwd := forwardService(t, admin, name)
	client, err := framework.StartNPMClient(t, paths, fwd.addr(), npmPoll)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the npm client printed:\n%s", client.Output())
		}
	}()
	// clientLists waits for the client to list want, within its poll
	// interval once every pod serves it, and slack for a busy machine.
	clientLists := func(want []string, since time.Time) time.Duration {
		t.Helper()
		var took time.Duration
		err := framework.Eventually(context.Background(), npmPoll+30*time.Second, fmt.Sprintf("the npm client to list %v", want), func(context.Context) error {
			got, at := client.Nodes()
			if !slices.Equal(got, want) {
				return fmt.Errorf("it lists %v", got)
			}
			took = at.Sub(since).Round(100 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return took
	}
	clientLists(nodes, time.Now())
	keys := framework.NewClientKeys(client)
	if err := keys.Write("two", 20, nodes); err != nil {
		t.Fatal(err)
	}
	t.Logf("the client found %v through the endpoint; 20 keys written: %v", nodes, keys.Holders())

	steps := []struct {
		name   string
		size   int
		stayed bool
		change func(o framework.Observed) error
	}{
		{name: "scaled to 4", size: 4, change: func(framework.Observed) error {
			_, err := admin.Run(context.Background(), "scale", "memcached/"+name, "--replicas=4")
			return err
		}},
		{name: "scaled back to 2", size: 2, stayed: true, change: func(framework.Observed) error {
			_, err := admin.Run(context.Background(), "scale", "memcached/"+name, "--replicas=2")
			return err
		}},
		{name: "a pod deleted", size: 2, change: func(o framework.Observed) error {
			_, err := admin.Run(context.Background(), "delete", "pod", o.Memcached.Status.Nodes[0], "--wait=false")
			return err
		}},
	}
	for _, s := range steps {
		if err := s.change(o); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		changed := time.Now()
		err := framework.Eventually(context.Background(), readyTimeout, fmt.Sprintf("%s: memcached %s to list %d new Ready pods", s.name, name, s.size), func(ctx context.Context) error {
			next, err := framework.Observe(ctx, admin, name)
			if err != nil {
				return err
			}
			if err := framework.Converged(next, s.size); err != nil {
				return err
			}
			if got, _ := readyNodes(next); slices.Equal(got, nodes) {
				return fmt.Errorf("the Ready pods are still %v", got)
			}
			o = next
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ready := time.Now()
		nodes, endpoints = readyNodes(o)
		// Each pod that becomes Ready or goes is a change of its own,
		// unless the operator sees several in one reconcile; the version
		// grows by one per change (TestDiscoveryFollowsTheMembership) and
		// never goes back (waitEveryPodServes).
		served, next := waitEveryPodServes(t, dialPlain, endpoints, nodes, version, ready, propagation)
		version = next
		took := clientLists(nodes, ready)
		t.Logf("%s: the status listed the new pods %v after the change; every pod served version %d %v after that (pods: %v); the npm client listed %v %v after that (poll interval %v)",
			s.name, ready.Sub(changed).Round(100*time.Millisecond), version, maxDuration(served), served, nodes, took, npmPoll)
		read, moved, err := keys.ReadBack(nodes, s.stayed)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if read == 0 {
			t.Fatalf("%s: no key read back through the client", s.name)
		}
		t.Logf("%s: %d keys on pods that stayed read back through the client, %d moved by its hash to a new pod", s.name, read, moved)
		if err := keys.Write(strings.ReplaceAll(s.name, " ", "-"), 5, nodes); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	t.Logf("the npm client printed:\n%s", client.Output())
}

// maxDuration is the longest of d's.
func maxDuration(d map[string]time.Duration) time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

// TestDiscoveryTLSAndAuth: with spec.tls (client certificates required) and
// spec.auth, the discovery endpoint of every pod speaks TLS only with the
// Secret's certificate, refuses a client without a certificate, answers
// nothing before memcached's ASCII login with a user of the auth Secret, and
// then serves the membership, which follows a scale from 2 to 3 within the
// kubelet's sync of the pods. The npm client speaks neither TLS nor
// memcached's ASCII login (the memcached module it builds on opens plain
// sockets and has no login), so this side is Go's.
func TestDiscoveryTLSAndAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, authSecret, tlsSecret = "discovery-tls", "discovery-users", "discovery-cert"
	const user, password = "app", "s3cret"
	sync, err := kubeletSyncFrequency(ctx)
	if err != nil {
		t.Fatal(err)
	}
	propagation := sync*3/2 + 30*time.Second
	ca := newTestCA(t)
	certPEM, keyPEM, pair := ca.issue(t, 7)
	applySecret(t, admin, authSecret, "Opaque", map[string][]byte{"passwords": []byte(user + ":" + password + "\n")})
	applySecret(t, admin, tlsSecret, "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.pem})
	applyMemcachedSpec(t, admin, name, `size: 2
discovery: {enabled: true}
tls: {secretName: `+tlsSecret+`, clientCertificates: Required}
auth: {secretName: `+authSecret+`}`)
	o := waitServing(t, name, 2)
	nodes, endpoints := readyNodes(o)
	login := func(ctx context.Context, addr string) (*mcConn, error) {
		c, peer, err := session(ctx, addr, ca, &pair, user, password)
		if err == nil && peer.SerialNumber.Int64() != 7 {
			c.Close()
			return nil, fmt.Errorf("the discovery endpoint presented serial %d, want the Secret's 7", peer.SerialNumber)
		}
		return c, err
	}
	_, version := waitEveryPodServes(t, login, endpoints, nodes, 0, time.Now(), propagation)

	for pod, addr := range endpoints {
		if c, _, err := dialTLS(ctx, addr, ca, nil); err == nil {
			// TLS 1.3 tells a refused client certificate at the first read.
			reply, err := c.do("version\r\n")
			c.Close()
			if err == nil {
				t.Errorf("pod %s: a client without a certificate got %q, want the handshake refused", pod, reply)
			}
		}
		c, _, err := dialTLS(ctx, addr, ca, &pair)
		if err != nil {
			t.Fatalf("pod %s: %v", pod, err)
		}
		for _, req := range []string{"config get cluster\r\n", "version\r\n"} {
			if reply, err := c.do(req); err != nil || reply != "CLIENT_ERROR unauthenticated" {
				t.Errorf("pod %s: %q before the login: got %q, %v, want CLIENT_ERROR unauthenticated", pod, strings.TrimSpace(req), reply, err)
			}
		}
		if reply, err := c.login(user, "wrong"); err != nil || reply != "CLIENT_ERROR authentication failure" {
			t.Errorf("pod %s: a wrong password: got %q, %v", pod, reply, err)
		}
		if reply, err := c.login(user, password); err != nil || reply != "STORED" {
			t.Fatalf("pod %s: login: got %q, %v", pod, reply, err)
		}
		if reply, err := c.do("version\r\n"); err != nil || !strings.HasPrefix(reply, "VERSION 1.") {
			t.Errorf("pod %s: version: got %q, %v, want memcached's", pod, reply, err)
		}
		if reply, err := c.do("get some-key\r\n"); err != nil || !strings.HasPrefix(reply, "CLIENT_ERROR this is the discovery endpoint") {
			t.Errorf("pod %s: get some-key: got %q, %v, want the refusal", pod, reply, err)
		}
		c.Close()
		plain, err := dialPlain(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := askDiscovery(plain); err == nil {
			t.Errorf("pod %s: served the membership in plaintext", pod)
		}
		plain.Close()
	}

	if _, err := admin.Run(ctx, "scale", "memcached/"+name, "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	o = waitServing(t, name, 3)
	ready := time.Now()
	nodes, endpoints = readyNodes(o)
	served, next := waitEveryPodServes(t, login, endpoints, nodes, version, ready, propagation)
	if next != version+1 {
		t.Errorf("version %d after %d, want one more", next, version)
	}
	t.Logf("scaled to 3: every pod served version %d, through TLS and the login, %v after the status listed the pods (pods: %v)", next, maxDuration(served), served)
}
