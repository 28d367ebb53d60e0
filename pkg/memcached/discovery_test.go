package memcached_test

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is the discovery entry of a pod of IP ip.
func node(ip string) sidecar.Node {
	a := netip.MustParseAddr(ip)
	return sidecar.Node{Host: ip, IP: a, Port: 11211}
}

func TestReadyNodes(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	pod := func(name, ip string, ready bool) *corev1.Pod {
		p := memcachedtest.NewPod(m, name, corev1.PodRunning, ready)
		p.Status.PodIP = ip
		return p
	}
	deleting := pod("deleting", "198.18.0.4", true)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	tests := []struct {
		name string
		pods []*corev1.Pod
		want []sidecar.Node
	}{
		{name: "none"},
		{
			name: "sorted by IP as numbers, not as text",
			pods: []*corev1.Pod{pod("a", "198.18.0.10", true), pod("b", "198.18.0.9", true), pod("c", "198.18.0.100", true)},
			want: []sidecar.Node{node("198.18.0.9"), node("198.18.0.10"), node("198.18.0.100")},
		},
		{
			name: "Ready pods alone",
			pods: []*corev1.Pod{pod("a", "198.18.0.2", false), pod("b", "198.18.0.3", true)},
			want: []sidecar.Node{node("198.18.0.3")},
		},
		{
			name: "without those being deleted or without an IP",
			pods: []*corev1.Pod{deleting, pod("no-ip", "", true), pod("b", "198.18.0.3", true)},
			want: []sidecar.Node{node("198.18.0.3")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.ReadyNodes(tt.pods); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNextCluster(t *testing.T) {
	two := []sidecar.Node{node("198.18.0.2"), node("198.18.0.3")}
	three := append(slices.Clone(two), node("198.18.0.4"))
	tests := []struct {
		name     string
		recorded int64
		stored   *sidecar.Cluster
		nodes    []sidecar.Node
		want     sidecar.Cluster
	}{
		{name: "first", nodes: two, want: sidecar.Cluster{Version: 1, Nodes: two}},
		{name: "unchanged", recorded: 4, stored: &sidecar.Cluster{Version: 4, Nodes: two}, nodes: two, want: sidecar.Cluster{Version: 4, Nodes: two}},
		{name: "unchanged, the status behind", recorded: 3, stored: &sidecar.Cluster{Version: 4, Nodes: two}, nodes: two, want: sidecar.Cluster{Version: 4, Nodes: two}},
		{name: "a pod more", recorded: 4, stored: &sidecar.Cluster{Version: 4, Nodes: two}, nodes: three, want: sidecar.Cluster{Version: 5, Nodes: three}},
		{name: "a pod less", recorded: 5, stored: &sidecar.Cluster{Version: 5, Nodes: three}, nodes: two, want: sidecar.Cluster{Version: 6, Nodes: two}},
		{name: "no pod left", recorded: 6, stored: &sidecar.Cluster{Version: 6, Nodes: two}, want: sidecar.Cluster{Version: 7}},
		{name: "changed with the status behind goes on from the ConfigMap", recorded: 2, stored: &sidecar.Cluster{Version: 9, Nodes: two}, nodes: three, want: sidecar.Cluster{Version: 10, Nodes: three}},
		{name: "deleted goes on from the status", recorded: 7, nodes: two, want: sidecar.Cluster{Version: 8, Nodes: two}},
		{name: "edited to a lower version goes on from the status", recorded: 7, stored: &sidecar.Cluster{Version: 1, Nodes: two}, nodes: two, want: sidecar.Cluster{Version: 8, Nodes: two}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stored sidecar.Cluster
			if tt.stored != nil {
				stored = *tt.stored
			}
			if got := memcached.NextCluster(tt.recorded, stored, tt.stored != nil, tt.nodes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDiscoveryConfigMap(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	c := sidecar.Cluster{Version: 3, Nodes: []sidecar.Node{node("198.18.0.2"), node("198.18.0.3")}}
	cm := memcached.NewDiscoveryConfigMap(m, c)
	if !metav1.IsControlledBy(cm, m) || cm.Name != "example" || cm.Namespace != "test" {
		t.Errorf("got %s/%s controlled by %v, want test/example controlled by the Memcached", cm.Namespace, cm.Name, metav1.GetControllerOf(cm))
	}
	if !reflect.DeepEqual(cm.Labels, memcached.Labels("example")) {
		t.Errorf("labels: got %v, want %v", cm.Labels, memcached.Labels("example"))
	}
	want := "3\n198.18.0.2|198.18.0.2|11211 198.18.0.3|198.18.0.3|11211\n"
	if got := cm.Data[memcached.DiscoveryKey]; got != want {
		t.Errorf("data: got %q, want %q", got, want)
	}
	if got, ok := memcached.DiscoveryCluster(cm); !ok || !reflect.DeepEqual(got, c) {
		t.Errorf("read back: got %+v, %t, want %+v", got, ok, c)
	}
	cm.Data[memcached.DiscoveryKey] = "not a cluster"
	if _, ok := memcached.DiscoveryCluster(cm); ok {
		t.Error("read back an edited ConfigMap as a cluster")
	}
}

// TestPodOfDiscovery: with discovery the sidecar runs, mounts the
// ConfigMap alone (memcached does not), serves on the port discovery with
// the TLS and auth files it already has, and the Service exposes the port;
// without it none of that is in the pod or the Service.
func TestPodOfDiscovery(t *testing.T) {
	tests := []struct {
		name     string
		spec     v1alpha1.MemcachedSpec
		wantArgs []string
	}{
		{
			name:     "discovery alone",
			spec:     v1alpha1.MemcachedSpec{Size: 2, Discovery: &v1alpha1.MemcachedDiscovery{Enabled: true}},
			wantArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--status-addr=:9150", "--discovery-addr=:11212", "--discovery-file=/etc/memcached/discovery/cluster"},
		},
		{
			name: "with TLS, client certificates and auth",
			spec: v1alpha1.MemcachedSpec{Size: 2, Discovery: &v1alpha1.MemcachedDiscovery{Enabled: true},
				TLS:  &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: v1alpha1.ClientCertificatesRequired},
				Auth: &v1alpha1.MemcachedAuth{SecretName: "users"}},
			wantArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--tls-dir=/etc/memcached/tls", "--client-cert", "--auth-file=/etc/memcached/auth/passwords", "--status-addr=:9150", "--discovery-addr=:11212", "--discovery-file=/etc/memcached/discovery/cluster"},
		},
		{name: "off by default", spec: v1alpha1.MemcachedSpec{Size: 2}},
		{name: "off", spec: v1alpha1.MemcachedSpec{Size: 2, Discovery: &v1alpha1.MemcachedDiscovery{}, Monitoring: &v1alpha1.MemcachedMonitoring{Enabled: true}},
			wantArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--metrics-addr=:9150"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			m.Spec = tt.spec
			spec := memcached.PodSpec(m, memcachedtest.Image, memcachedtest.SidecarImage)
			on := tt.spec.Discovery != nil && tt.spec.Discovery.Enabled
			var sidecarArgs []string
			var discoveryMounts, discoveryPorts int
			for _, c := range spec.Containers {
				if c.Name == memcached.SidecarName {
					sidecarArgs = c.Args
				}
				for _, vm := range c.VolumeMounts {
					if vm.Name == "discovery" {
						if c.Name != memcached.SidecarName || vm.MountPath != "/etc/memcached/discovery" || !vm.ReadOnly {
							t.Errorf("container %s mounts discovery as %+v, want the sidecar alone, read-only at /etc/memcached/discovery", c.Name, vm)
						}
						discoveryMounts++
					}
				}
				for _, p := range c.Ports {
					if p.Name == "discovery" {
						if c.Name != memcached.SidecarName || p.ContainerPort != 11212 {
							t.Errorf("container %s has port %+v, want the sidecar's 11212", c.Name, p)
						}
						discoveryPorts++
					}
				}
			}
			if !reflect.DeepEqual(sidecarArgs, tt.wantArgs) {
				t.Errorf("sidecar args: got %q, want %q", sidecarArgs, tt.wantArgs)
			}
			var volume *corev1.Volume
			for i, v := range spec.Volumes {
				if v.Name == "discovery" {
					volume = &spec.Volumes[i]
				}
			}
			want := 0
			if on {
				want = 1
				if volume == nil || volume.ConfigMap == nil || volume.ConfigMap.Name != "example" || *volume.ConfigMap.Optional ||
					!reflect.DeepEqual(volume.ConfigMap.Items, []corev1.KeyToPath{{Key: "cluster", Path: "cluster"}}) {
					t.Errorf("volume: got %+v, want the ConfigMap example's key cluster, not optional", volume)
				}
			} else if volume != nil {
				t.Errorf("volume without discovery: %+v", volume)
			}
			if on && (spec.SecurityContext.FSGroup == nil || *spec.SecurityContext.FSGroup != 11211) {
				t.Errorf("fsGroup: got %v, want 11211, the group that may read the ConfigMap's file", spec.SecurityContext.FSGroup)
			}
			if discoveryMounts != want || discoveryPorts != want {
				t.Errorf("got %d mounts and %d ports of discovery, want %d", discoveryMounts, discoveryPorts, want)
			}
			var servicePorts []string
			for _, p := range memcached.NewService(m).Spec.Ports {
				servicePorts = append(servicePorts, p.Name+":"+p.TargetPort.String())
			}
			if got := slices.Contains(servicePorts, "discovery:discovery"); got != on {
				t.Errorf("service ports: got %q, want discovery:discovery %t", servicePorts, on)
			}
		})
	}
}
