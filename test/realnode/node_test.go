package realnode

import (
	"context"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
)

// TestRealNodeIsAKubelet checks that the cluster's only node is the kubelet that
// node.sh runs, with containerd as its runtime, and that kwok-controller, which
// fakes the nodes of the other clusters, leaves it alone.
func TestRealNodeIsAKubelet(t *testing.T) {
	t.Parallel()
	var nodes struct {
		Items []struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Status struct {
				NodeInfo struct {
					KubeletVersion          string `json:"kubeletVersion"`
					ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
				} `json:"nodeInfo"`
				Addresses []struct {
					Type    string `json:"type"`
					Address string `json:"address"`
				} `json:"addresses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := cluster.Kubectl().GetJSON(context.Background(), &nodes, "nodes"); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Metadata.Name != framework.RealNodeName {
		t.Fatalf("cluster has %d nodes, want only %s", len(nodes.Items), framework.RealNodeName)
	}
	n := nodes.Items[0]
	t.Logf("node %s: kubelet %s, runtime %s, addresses %+v", n.Metadata.Name,
		n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.Addresses)
	if n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("kubeletVersion = %q, want v1.37.2", n.Status.NodeInfo.KubeletVersion)
	}
	if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("containerRuntimeVersion = %q, want containerd", n.Status.NodeInfo.ContainerRuntimeVersion)
	}
	for k := range n.Metadata.Annotations {
		if strings.HasPrefix(k, "kwok.x-k8s.io/") {
			t.Errorf("node has kwok annotation %s: kwok-controller may manage it", k)
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == "InternalIP" && a.Address != "198.18.0.1" {
			t.Errorf("InternalIP %s, want the bridge's 198.18.0.1 (a test range)", a.Address)
		}
	}
}
