package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// benchResources and benchSize are the guide-sized load of BenchmarkConverge:
	// 50 Memcached resources of 2 pods each.
	benchResources = 50
	benchSize      = 2
)

// BenchmarkConverge measures how long the operator takes to bring
// benchResources new Memcached resources to Ready with status.nodes filled,
// side by side with its reconcile client at client-go 1.11's default limits
// (5 requests/s, burst 10: what every call through the v0.0.7 SDK gets) and
// at the operator's defaults. Run it with `make bench`.
func BenchmarkConverge(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{name: "qps=5,burst=10", args: []string{"--kube-api-qps=5", "--kube-api-burst=10"}},
		{name: "qps=50,burst=100", args: nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ns := newNamespace(b, "bench")
				ns.startOperator(c.args...)
				var manifest strings.Builder
				for j := range benchResources {
					fmt.Fprintf(&manifest, "---\napiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: cache-%d\nspec:\n  size: %d\n", j, benchSize)
				}
				b.StartTimer()
				start := time.Now()
				ns.apply(manifest.String())
				err := framework.EventuallyEvery(context.Background(), 5*time.Minute, 200*time.Millisecond,
					fmt.Sprintf("%d memcacheds of size %d to be ready", benchResources, benchSize),
					func(ctx context.Context) error { return allReady(ctx, ns, benchSize) })
				total += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/converge")
		})
	}
}

// allReady succeeds when every Memcached in ns reports size ready pods, lists
// size nodes and has observed its latest generation.
func allReady(ctx context.Context, ns *namespace, size int) error {
	var list struct {
		Items []framework.Memcached `json:"items"`
	}
	if err := ns.kubectl.GetJSON(ctx, &list, "memcacheds"); err != nil {
		return err
	}
	pending := 0
	for _, m := range list.Items {
		if m.Status.ReadyReplicas != size || len(m.Status.Nodes) != size || m.Status.ObservedGeneration != m.Metadata.Generation {
			pending++
		}
	}
	if pending > 0 || len(list.Items) != benchResources {
		return fmt.Errorf("%d of %d memcacheds not ready yet", pending, len(list.Items))
	}
	return nil
}
