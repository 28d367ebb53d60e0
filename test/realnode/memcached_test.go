package realnode

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestMemcachedServes creates the guide's resource from deploy/cr.yaml, as its
// users do, and checks that every pod in status.nodes is a memcached that passed
// its readiness probe, answers a client, and keeps its cache inside the memory
// limit the kernel enforces on it.
func TestMemcachedServes(t *testing.T) {
	const name, size = "example-memcached", 3
	t.Parallel()
	if _, err := admin.Run(context.Background(), "create", "-f", paths.Deploy("cr.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Run(context.Background(), "delete", "-f", paths.Deploy("cr.yaml"), "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	dumpOnFailure(t, admin)
	o := waitServing(t, name, size)
	t.Logf("status.nodes = %v", o.Memcached.Status.Nodes)

	for _, podName := range o.Memcached.Status.Nodes {
		t.Run(podName, func(t *testing.T) {
			addr, err := podAddr(o, podName)
			if err != nil {
				t.Fatal(err)
			}
			if err := framework.MemcachedSetGet(addr, "greeting-"+podName, "hello from "+podName); err != nil {
				t.Fatal(err)
			}
			st, err := framework.MemcachedStats(addr)
			if err != nil {
				t.Fatal(err)
			}
			maxBytes, err := strconv.ParseInt(st["limit_maxbytes"], 10, 64)
			if err != nil {
				t.Fatalf("stats limit_maxbytes %q: %v", st["limit_maxbytes"], err)
			}
			var p framework.Pod
			for _, candidate := range o.Pods {
				if candidate.Metadata.Name == podName {
					p = candidate
				}
			}
			pid, err := containerProcess(context.Background(), p, "memcached")
			if err != nil {
				t.Fatal(err)
			}
			limit, err := memoryLimit(pid)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: memcached %s at %s, limit_maxbytes %d, cgroup memory limit %d", podName, st["version"], addr, maxBytes, limit)
			if maxBytes <= 0 || maxBytes >= limit {
				t.Errorf("memcached caches up to %d bytes, want a positive size below the container's memory limit %d", maxBytes, limit)
			}
			uid, _, err := procStatusIDs(pid)
			if err != nil {
				t.Fatal(err)
			}
			if uid != 11211 {
				t.Errorf("memcached runs as uid %d, want 11211", uid)
			}
		})
	}
}

// TestScaleRealPods scales up and down and checks that real pods follow, each one
// serving before status.nodes names it as converged.
func TestScaleRealPods(t *testing.T) {
	const name = "scaled"
	t.Parallel()
	createMemcached(t, admin, name, 1)
	waitServing(t, name, 1)
	for _, size := range []int{4, 2} {
		if _, err := admin.Run(context.Background(), "scale", "memcached/"+name, fmt.Sprintf("--replicas=%d", size)); err != nil {
			t.Fatal(err)
		}
		o := waitServing(t, name, size)
		for _, podName := range o.Memcached.Status.Nodes {
			addr, err := podAddr(o, podName)
			if err != nil {
				t.Fatal(err)
			}
			if err := framework.MemcachedSetGet(addr, "size", strconv.Itoa(size)); err != nil {
				t.Errorf("size %d: %v", size, err)
			}
		}
	}
}

// TestDeletedPodReplaced deletes one memcached pod and checks that a new, serving
// pod takes its place and status.nodes follows.
func TestDeletedPodReplaced(t *testing.T) {
	const name = "replaced"
	t.Parallel()
	createMemcached(t, admin, name, 2)
	before := waitServing(t, name, 2)
	victim := before.Memcached.Status.Nodes[0]
	if _, err := admin.Run(context.Background(), "delete", "pod", victim, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	err := framework.Eventually(context.Background(), readyTimeout, "a replacement for pod "+victim, func(ctx context.Context) error {
		o, err := framework.Observe(ctx, admin, name)
		if err != nil {
			return err
		}
		if slices.Contains(o.Memcached.Status.Nodes, victim) {
			return fmt.Errorf("status.nodes %v still names the deleted pod", o.Memcached.Status.Nodes)
		}
		return framework.Converged(o, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	after := waitServing(t, name, 2)
	for _, podName := range after.Memcached.Status.Nodes {
		addr, err := podAddr(after, podName)
		if err != nil {
			t.Fatal(err)
		}
		if err := framework.MemcachedSetGet(addr, "replaced", podName); err != nil {
			t.Error(err)
		}
	}
}
