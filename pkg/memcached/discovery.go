package memcached

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// discoveryPort is where the sidecar answers ElastiCache's
	// "config get cluster": the port after memcached's, since ElastiCache's
	// own configuration endpoint, memcached's port, is taken here by
	// memcached, which knows no such command.
	discoveryPort = 11212
	// discoveryPortName names the discovery port in the pods and the Service.
	discoveryPortName = "discovery"
	// discoveryVolume names the ConfigMap volume that holds the membership,
	// mounted at discoveryDir in the sidecar alone.
	discoveryVolume = "discovery"
	discoveryDir    = "/etc/memcached/discovery"
	// DiscoveryKey is the key of the discovery ConfigMap, and the file
	// the sidecar reads, that holds the membership as the text of a
	// sidecar.Cluster.
	DiscoveryKey = "cluster"
	// discoveryMode lets the file's owner, root, and the pod's fsGroup,
	// which the sidecar runs in, read it, as the Secrets' files.
	discoveryMode = 0o440
)

// ConfigMapResource is the resource of the discovery ConfigMap, for its
// REST path and the errors that name it.
var ConfigMapResource = schema.GroupResource{Resource: "configmaps"}

// Discovered reports whether m asks for the discovery endpoint.
func Discovered(m *v1alpha1.Memcached) bool {
	return m.Spec.Discovery != nil && m.Spec.Discovery.Enabled
}

// ReadyNodes returns the nodes that the discovery endpoint lists for pods,
// m's own (see OwnPods): those whose Ready condition is True, that have an
// IP and are not being deleted, sorted by IP, so that the list changes only
// when the membership does, whatever order the cache gives. A pod that is
// being deleted leaves the list at once, as it leaves the Service's ready
// endpoints, while it still serves its preStop pause. The host is the
// pod's IP: a Deployment's pods have no DNS name of their own (the
// headless Service's per-pod records, where a cluster's DNS makes them,
// are named after the IP and the cluster's domain, which only clients
// inside the cluster resolve), and clients such as memcached-elasticache
// connect to the host, not to the IP.
func ReadyNodes(pods []*corev1.Pod) []sidecar.Node {
	var nodes []sidecar.Node
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			continue
		}
		nodes = append(nodes, sidecar.Node{Host: ip.String(), IP: ip, Port: memcachedPort})
	}
	slices.SortFunc(nodes, func(a, b sidecar.Node) int { return a.IP.Compare(b.IP) })
	return nodes
}

// podReady reports whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NewDiscoveryConfigMap returns m's discovery ConfigMap holding c, which the
// pods mount and the sidecar serves (see DiscoveryCluster).
func NewDiscoveryConfigMap(m *v1alpha1.Memcached, c sidecar.Cluster) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(m),
		Data:       map[string]string{DiscoveryKey: c.Text()},
	}
}

// DiscoveryCluster returns the membership that the ConfigMap cm holds, and
// whether it holds one that the sidecar serves.
func DiscoveryCluster(cm *corev1.ConfigMap) (sidecar.Cluster, bool) {
	c, err := sidecar.ParseCluster(cm.Data[DiscoveryKey])
	return c, err == nil
}

// NextCluster returns the membership m's discovery ConfigMap should hold
// for the Ready nodes, given what it holds now (stored, ok false when it
// holds nothing the sidecar serves, or does not exist) and floor, the
// highest version known to be served or recorded besides: m's status,
// the operator's own last write, a ConfigMap of an earlier Memcached of
// m's name. It returns stored itself while that lists the nodes at a
// version no lower than floor, so that the ConfigMap is written only when
// the membership changes. Otherwise the version is one above the highest
// of the two: it never goes back, across an operator restart, a new
// leader, a Memcached deleted and created again, or a ConfigMap deleted or
// edited by hand, since each is read back from the cluster.
func NextCluster(floor int64, stored sidecar.Cluster, ok bool, nodes []sidecar.Node) sidecar.Cluster {
	if ok && stored.Version >= floor && sidecar.SameNodes(stored.Nodes, nodes) {
		return stored
	}
	if ok && stored.Version > floor {
		floor = stored.Version
	}
	return sidecar.Cluster{Version: floor + 1, Nodes: nodes}
}

// FormerChild reports whether o is the child of an earlier Memcached of
// m's name, which was deleted and then m created, as by kubectl replace
// --force or a GitOps re-sync: its controller is a Memcached of this API
// group of m's name but not m's UID. The garbage collector removes it, but
// until then m's new pods may mount it; what it holds tells how far its
// clients have come.
func FormerChild(o metav1.Object, m *v1alpha1.Memcached) bool {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != v1alpha1.Kind || ref.Name != m.Name || ref.UID == m.UID {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == v1alpha1.GroupName
}

// discoveryVolumes are the pod's volume of m's discovery ConfigMap, and
// the sidecar's mount of it, with discovery. The volume is not optional:
// the operator creates the ConfigMap in the reconcile that creates the
// Deployment, and a pod that starts before the kubelet sees it waits for
// it rather than serving nothing. The kubelet updates the file in place
// (no subPath) at its sync of the pod, which is how a membership change
// reaches the sidecar.
func discoveryVolumes(m *v1alpha1.Memcached) ([]corev1.Volume, []corev1.VolumeMount) {
	if !Discovered(m) {
		return nil, nil
	}
	mode := int32(discoveryMode)
	required := false
	return []corev1.Volume{{Name: discoveryVolume, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: m.Name},
				Items:                []corev1.KeyToPath{{Key: DiscoveryKey, Path: DiscoveryKey}},
				DefaultMode:          &mode,
				Optional:             &required,
			},
		}}},
		[]corev1.VolumeMount{{Name: discoveryVolume, MountPath: discoveryDir, ReadOnly: true}}
}

// discoveryArgs are the sidecar's options of the discovery endpoint.
func discoveryArgs() []string {
	return []string{
		"--discovery-addr=:" + strconv.Itoa(discoveryPort),
		"--discovery-file=" + discoveryDir + "/" + DiscoveryKey,
	}
}

// The reasons below name the failed steps of the Memcached's discovery
// ConfigMap, as those of reasons.go name the Deployment's.
const (
	ReasonConfigMapCreateFailed = "ConfigMapCreateFailed"
	ReasonConfigMapReadFailed   = "ConfigMapReadFailed"
	ReasonConfigMapUpdateFailed = "ConfigMapUpdateFailed"
	ReasonConfigMapDeleteFailed = "ConfigMapDeleteFailed"
	// ReasonConfigMapNotOwned means a ConfigMap with the Memcached's name
	// exists but another owner controls it; the operator leaves it alone,
	// and the pods, which mount it, serve what it holds, if anything.
	ReasonConfigMapNotOwned = "ConfigMapNotOwned"
)
