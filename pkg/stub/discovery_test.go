package stub

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// withDiscovery returns a copy of m with discovery on and version recorded
// in its status.
func withDiscovery(m *v1alpha1.Memcached, version int64) *v1alpha1.Memcached {
	m = m.DeepCopy()
	m.Spec.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true}
	m.Status.DiscoveryVersion = version
	return m
}

// readyPod is a Ready pod of m at ip.
func readyPod(m *v1alpha1.Memcached, name, ip string, ready bool) *corev1.Pod {
	p := memcachedtest.NewPod(m, name, corev1.PodRunning, ready)
	p.Status.PodIP = ip
	return p
}

// discoveryConfigMap is m's discovery ConfigMap holding text, as the
// operator creates it.
func discoveryConfigMap(m *v1alpha1.Memcached, text string) *corev1.ConfigMap {
	cm := memcached.NewDiscoveryConfigMap(m, sidecar.Cluster{})
	cm.UID = "uid-configmap"
	cm.Data[memcached.DiscoveryKey] = text
	return cm
}

// Two and three Ready pods' membership, at any version.
const (
	twoNodes   = "198.18.0.2|198.18.0.2|11211 198.18.0.10|198.18.0.10|11211\n"
	threeNodes = "198.18.0.2|198.18.0.2|11211 198.18.0.3|198.18.0.3|11211 198.18.0.10|198.18.0.10|11211\n"
)

// TestEnsuresTheDiscoveryConfigMap runs one reconcile of a Memcached with
// discovery and two Ready pods, 198.18.0.10 and 198.18.0.2 (and with three
// a third, 198.18.0.3), in each state its ConfigMap can be found in, and
// checks the ConfigMap's writes, what it then holds, and the version the
// status records: written only when the membership or the version it
// holds is not what it should be, always one above the highest version
// seen, never lower.
func TestEnsuresTheDiscoveryConfigMap(t *testing.T) {
	base := memcachedtest.NewMemcached("example", 2)
	foreign := func(m *v1alpha1.Memcached) *corev1.ConfigMap {
		cm := discoveryConfigMap(m, "someone else's")
		cm.OwnerReferences = nil
		return cm
	}
	tests := []struct {
		name     string
		recorded int64
		three    bool
		// existing returns the ConfigMap found, nil for none.
		existing func(m *v1alpha1.Memcached) *corev1.ConfigMap
		// wantActions are the ConfigMap's calls: the cache's reads (the
		// membership's, the step's and the status's), then the writes.
		wantActions []string
		wantData    string
		wantVersion int64
		wantEvent   string
		wantErr     string
	}{
		{
			name:        "created with the Ready pods sorted by IP, at version 1",
			wantActions: []string{"get configmap test/example", "get configmap test/example", "create configmap test/example", "get configmap test/example"},
			wantData:    "1\n" + twoNodes, wantVersion: 1, wantEvent: "Normal DiscoveryCreated",
		},
		{
			name: "left alone while it lists the Ready pods", recorded: 4,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "4\n"+twoNodes) },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "get configmap test/example"},
			wantData:    "4\n" + twoNodes, wantVersion: 4,
		},
		{
			name: "a new Ready pod is a new version", recorded: 4, three: true,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "4\n"+twoNodes) },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "patch configmap test/example", "get configmap test/example"},
			wantData:    "5\n" + threeNodes, wantVersion: 5, wantEvent: "Normal DiscoveryUpdated",
		},
		{
			name: "a pod gone is a new version", recorded: 5,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "5\n"+threeNodes) },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "patch configmap test/example", "get configmap test/example"},
			wantData:    "6\n" + twoNodes, wantVersion: 6, wantEvent: "Normal DiscoveryUpdated",
		},
		{
			name: "a status behind goes on from the ConfigMap, read back", recorded: 2, three: true,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "9\n"+twoNodes) },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "patch configmap test/example", "get configmap test/example"},
			wantData:    "10\n" + threeNodes, wantVersion: 10, wantEvent: "Normal DiscoveryUpdated",
		},
		{
			name: "deleted by hand, created again above the status's version", recorded: 7,
			wantActions: []string{"get configmap test/example", "get configmap test/example", "create configmap test/example", "get configmap test/example"},
			wantData:    "8\n" + twoNodes, wantVersion: 8, wantEvent: "Normal DiscoveryCreated",
		},
		{
			name: "edited to a lower version, put back above the status's", recorded: 7,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "1\n"+twoNodes) },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "patch configmap test/example", "get configmap test/example"},
			wantData:    "8\n" + twoNodes, wantVersion: 8, wantEvent: "Normal DiscoveryUpdated",
		},
		{
			name: "edited into what no client reads, put back above the status's", recorded: 3,
			existing:    func(m *v1alpha1.Memcached) *corev1.ConfigMap { return discoveryConfigMap(m, "3\nnot|a|node\n") },
			wantActions: []string{"get configmap test/example", "get configmap test/example", "patch configmap test/example", "get configmap test/example"},
			wantData:    "4\n" + twoNodes, wantVersion: 4, wantEvent: "Normal DiscoveryUpdated",
		},
		{
			name: "someone else's is left alone", recorded: 3,
			existing:    foreign,
			wantActions: []string{"get configmap test/example", "get configmap test/example", "read configmap test/example", "get configmap test/example"},
			wantData:    "someone else's", wantVersion: 3, wantEvent: "Warning ConfigMapNotOwned",
			wantErr: "configmap test/example already exists and is not controlled by memcached example",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := withDiscovery(base, tt.recorded)
			objs := inSync(m, 2,
				readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true),
				readyPod(m, "example-c", "198.18.0.3", tt.three))
			if tt.existing != nil {
				objs = append(objs, tt.existing(m))
			}
			f := newFixture(t, objs...)

			err := f.handle(m, false)

			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("Handle: got %v, want %q", err, tt.wantErr)
			}
			var actions []string
			for _, a := range f.client.actions {
				if strings.Contains(a, "configmap") {
					actions = append(actions, a)
				}
			}
			checkActions(t, actions, tt.wantActions)
			cm := f.client.configMaps["test/example"]
			if cm == nil || cm.Data[memcached.DiscoveryKey] != tt.wantData {
				t.Fatalf("configmap: got %v, want data %q", cm, tt.wantData)
			}
			if tt.wantErr == "" && !metav1.IsControlledBy(cm, m) {
				t.Errorf("configmap controlled by %v, want the Memcached", metav1.GetControllerOf(cm))
			}
			if len(f.client.statuses) == 0 {
				t.Fatal("no status written")
			}
			if got := f.client.statuses[len(f.client.statuses)-1].DiscoveryVersion; got != tt.wantVersion {
				t.Errorf("status.discoveryVersion: got %d, want %d", got, tt.wantVersion)
			}
			var events []string
			for _, e := range f.events() {
				if strings.Contains(e, "onfigMap") || strings.Contains(e, "Discovery") {
					events = append(events, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
				}
			}
			if strings.Join(events, ",") != tt.wantEvent {
				t.Errorf("events: got %q, want %q", events, tt.wantEvent)
			}
		})
	}
}

// TestDiscoveryFollowsTheMembership runs the reconciles of a scale from
// two to three Ready pods and back, with a reconcile between that finds
// nothing changed: the version grows by one per change of membership, and
// nothing is written in between.
func TestDiscoveryFollowsTheMembership(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 0)
	f := newFixture(t, inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true),
		readyPod(m, "example-c", "198.18.0.3", false))...)
	c := f.client.pods[2]
	steps := []struct {
		name      string
		cReady    bool
		wantData  string
		wantWrite bool
	}{
		{name: "two pods", wantData: "1\n" + twoNodes, wantWrite: true},
		{name: "nothing changed", wantData: "1\n" + twoNodes},
		{name: "a third Ready", cReady: true, wantData: "2\n" + threeNodes, wantWrite: true},
		{name: "nothing changed again", cReady: true, wantData: "2\n" + threeNodes},
		{name: "the third gone NotReady", wantData: "3\n" + twoNodes, wantWrite: true},
	}
	for _, s := range steps {
		c.Status.Conditions[0].Status = corev1.ConditionFalse
		if s.cReady {
			c.Status.Conditions[0].Status = corev1.ConditionTrue
		}
		f.client.actions = nil
		m = f.client.memcacheds["test/example"].DeepCopy()
		if err := f.handle(m, false); err != nil {
			t.Fatalf("%s: Handle: %v", s.name, err)
		}
		wrote := false
		for _, a := range f.client.actions {
			wrote = wrote || strings.HasPrefix(a, "create configmap") || strings.HasPrefix(a, "patch configmap")
		}
		if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != s.wantData || wrote != s.wantWrite {
			t.Errorf("%s: got %q, written %t, want %q, written %t", s.name, got, wrote, s.wantData, s.wantWrite)
		}
	}
}

// TestDiscoveryIsOffByDefault: without spec.discovery, or with it
// disabled, a Memcached gets no ConfigMap, costs no ConfigMap read unless
// its status records a version (then the status's cache read), and
// its Service and pods have no discovery port; once discovery is turned
// off, its own ConfigMap is deleted, and someone else's is left alone.
func TestDiscoveryIsOffByDefault(t *testing.T) {
	base := memcachedtest.NewMemcached("example", 2)
	off := withDiscovery(base, 3)
	off.Spec.Discovery.Enabled = false
	foreign := discoveryConfigMap(off, "3\n"+twoNodes)
	foreign.OwnerReferences = nil
	tests := []struct {
		name        string
		m           *v1alpha1.Memcached
		existing    *corev1.ConfigMap
		wantActions []string
		wantLeft    bool
		wantEvent   string
	}{
		{name: "never on", m: base},
		{name: "disabled, never on", m: withDiscovery(base, 0).DeepCopy(), wantActions: nil},
		{
			name: "turned off", m: off, existing: discoveryConfigMap(off, "3\n"+twoNodes),
			wantActions: []string{"get configmap test/example", "delete configmap test/example", "get configmap test/example"}, wantEvent: "Normal DiscoveryDeleted",
		},
		{name: "turned off, already gone", m: off, wantActions: []string{"get configmap test/example", "get configmap test/example"}},
		{name: "turned off, someone else's", m: off, existing: foreign, wantActions: []string{"get configmap test/example", "get configmap test/example"}, wantLeft: true},
	}
	tests[1].m.Spec.Discovery.Enabled = false
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := inSync(tt.m, 2, readyPod(tt.m, "example-a", "198.18.0.10", true), readyPod(tt.m, "example-b", "198.18.0.2", true))
			if tt.existing != nil {
				objs = append(objs, tt.existing)
			}
			f := newFixture(t, objs...)

			if err := f.handle(tt.m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}

			var actions []string
			for _, a := range f.client.actions {
				if strings.Contains(a, "configmap") {
					actions = append(actions, a)
				}
			}
			checkActions(t, actions, tt.wantActions)
			if _, left := f.client.configMaps["test/example"]; left != tt.wantLeft {
				t.Errorf("configmap left: got %t, want %t", left, tt.wantLeft)
			}
			for _, p := range f.client.services["test/example"].Spec.Ports {
				if p.Name == "discovery" {
					t.Errorf("service has the discovery port: %+v", p)
				}
			}
			for _, v := range memcached.NewDeployment(tt.m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil {
					t.Errorf("pods mount a ConfigMap: %+v", v)
				}
			}
			var events []string
			for _, e := range f.events() {
				if strings.Contains(e, "Discovery") {
					events = append(events, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
				}
			}
			if strings.Join(events, ",") != tt.wantEvent {
				t.Errorf("events: got %q, want %q", events, tt.wantEvent)
			}
			if got := f.client.statuses[len(f.client.statuses)-1].DiscoveryVersion; got != tt.m.Status.DiscoveryVersion {
				t.Errorf("status.discoveryVersion: got %d, want %d kept", got, tt.m.Status.DiscoveryVersion)
			}
		})
	}
}

// TestRestoresTheLabelsOfTheDiscoveryConfigMap: without its app label
// the ConfigMap would drop out of the operator's cache.
func TestRestoresTheLabelsOfTheDiscoveryConfigMap(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 1)
	cm := discoveryConfigMap(m, "1\n"+twoNodes)
	cm.Labels = map[string]string{"team": "cache"}
	f := newFixture(t, append(inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true)), runtime.Object(cm))...)

	if err := f.handle(m, false); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	got := f.client.configMaps["test/example"]
	if got.Labels[memcached.AppLabel] != memcached.AppLabelValue || got.Labels[memcached.CRLabel] != "example" || got.Labels["team"] != "cache" {
		t.Errorf("labels: got %v, want the operator's back beside team=cache", got.Labels)
	}
	if got.Data[memcached.DiscoveryKey] != "1\n"+twoNodes {
		t.Errorf("data: got %q, want it unchanged", got.Data[memcached.DiscoveryKey])
	}
}

// TestDiscoveryGoesOnFromItsOwnWrite: a reconcile that comes before the
// cache shows the operator's own last write, and finds the pods changed
// again, goes one version above that write instead of reusing its version
// for another membership, which clients that keep the highest version
// would ignore.
func TestDiscoveryGoesOnFromItsOwnWrite(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 0)
	f := newFixture(t, inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true),
		readyPod(m, "example-c", "198.18.0.3", false))...)
	if err := f.handle(m, false); err != nil {
		t.Fatal(err)
	}
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "1\n"+twoNodes {
		t.Fatalf("first write: got %q", got)
	}
	// The cache has not seen the write yet, nor the status that records it.
	delete(f.client.configMaps, "test/example")
	f.client.pods[2].Status.Conditions[0].Status = corev1.ConditionTrue
	if err := f.handle(m, false); err != nil {
		t.Fatal(err)
	}
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "2\n"+threeNodes {
		t.Errorf("second write: got %q, want version 2 with the third pod", got)
	}
}

// TestDiscoveryGoesOnAboveAnEarlierMemcachedOfTheName: a Memcached
// deleted and created again while its ConfigMap is left, which the new
// pods may mount until the garbage collector removes it: the status
// records the old ConfigMap's version, and the new ConfigMap goes on above
// it, also from a fresh operator that never saw the old one.
func TestDiscoveryGoesOnAboveAnEarlierMemcachedOfTheName(t *testing.T) {
	earlier := withDiscovery(memcachedtest.NewMemcached("example", 2), 57)
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 0)
	m.UID = "uid-example-again"
	left := discoveryConfigMap(earlier, "57\n198.18.0.7|198.18.0.7|11211\n")
	f := newFixture(t, append(inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true)), runtime.Object(left))...)

	if err := f.handle(m, false); err == nil {
		t.Fatalf("Handle: got nil, want the earlier ConfigMap reported as not m's")
	}
	if got := f.client.statuses[len(f.client.statuses)-1].DiscoveryVersion; got != 57 {
		t.Fatalf("status.discoveryVersion: got %d, want 57, the earlier ConfigMap's", got)
	}

	// The garbage collector removes the earlier ConfigMap; the operator
	// restarts and knows only the cluster.
	delete(f.client.configMaps, "test/example")
	f.restart(memcachedtest.Image)
	f.reconcileKeys("test/example")
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "58\n"+twoNodes {
		t.Errorf("configmap: got %q, want version 58, above the earlier one", got)
	}
}

// TestDiscoveryWritesOnlyOverWhatTheCacheShowed: a write of the
// membership carries the resourceVersion of the ConfigMap that the cache
// showed; a cache behind a write of another leader's, which computed a
// version that clients have seen already, writes nothing, and the next
// reconcile, from the cache that caught up, goes on above that write.
func TestDiscoveryWritesOnlyOverWhatTheCacheShowed(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 4)
	stale := discoveryConfigMap(m, "4\n"+threeNodes)
	stale.ResourceVersion = "11"
	current := discoveryConfigMap(m, "5\n"+threeNodes)
	current.ResourceVersion = "12"
	f := newFixture(t, append(inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true)), runtime.Object(current))...)
	f.client.cached["configmap test/example"] = stale

	err := f.handle(m, false)

	if !IsStale(err) {
		t.Fatalf("Handle: got %v, want a stale write, retried", err)
	}
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "5\n"+threeNodes {
		t.Fatalf("configmap: got %q, want the other leader's write left alone", got)
	}

	delete(f.client.cached, "configmap test/example")
	f.reconcileKeys("test/example")
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "6\n"+twoNodes {
		t.Errorf("configmap: got %q, want version 6", got)
	}
}

// TestDiscoveryConfigMapDeletedByHandComesBackAbove: a ConfigMap deleted
// by hand is written again above the version it held, which its clients
// have seen, not at it, even by the operator that wrote it and remembers
// the write.
func TestDiscoveryConfigMapDeletedByHandComesBackAbove(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 0)
	f := newFixture(t, inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true))...)
	if err := f.handle(m, false); err != nil {
		t.Fatal(err)
	}
	delete(f.client.configMaps, "test/example")

	f.reconcileKeys("test/example")

	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "2\n"+twoNodes {
		t.Errorf("configmap: got %q, want version 2, above the deleted one", got)
	}
	if got := f.client.statuses[len(f.client.statuses)-1].DiscoveryVersion; got != 2 {
		t.Errorf("status.discoveryVersion: got %d, want 2", got)
	}
}

// TestDiscoveryOffAndOnAcrossARestartGoesOn: a version written in a
// reconcile whose status write failed, then discovery turned off, and on
// again by a fresh operator: the status recorded the written version when
// discovery went off, and the new ConfigMap goes on above it.
func TestDiscoveryOffAndOnAcrossARestartGoesOn(t *testing.T) {
	m := withDiscovery(memcachedtest.NewMemcached("example", 2), 3)
	f := newFixture(t, append(inSync(m, 2, readyPod(m, "example-a", "198.18.0.10", true), readyPod(m, "example-b", "198.18.0.2", true),
		readyPod(m, "example-c", "198.18.0.3", true)), runtime.Object(discoveryConfigMap(m, "3\n"+twoNodes)))...)
	f.client.failOn["update memcached/status"] = fmt.Errorf("etcd is away")
	if err := f.handle(m, false); err == nil {
		t.Fatal("Handle: got nil, want the status write's error")
	}
	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "4\n"+threeNodes {
		t.Fatalf("configmap: got %q, want version 4", got)
	}
	delete(f.client.failOn, "update memcached/status")
	f.edited(m, func(m *v1alpha1.Memcached) { m.Spec.Discovery.Enabled = false })
	f.reconcileKeys("test/example")
	if _, left := f.client.configMaps["test/example"]; left {
		t.Fatal("configmap left after discovery went off")
	}

	f.restart(memcachedtest.Image)
	f.client.pods[2].Status.Conditions[0].Status = corev1.ConditionFalse
	f.edited(f.client.memcacheds["test/example"], func(m *v1alpha1.Memcached) { m.Spec.Discovery.Enabled = true })
	f.reconcileKeys("test/example")

	if got := f.client.configMaps["test/example"].Data[memcached.DiscoveryKey]; got != "5\n"+twoNodes {
		t.Errorf("configmap: got %q, want version 5: 4 was served with three pods", got)
	}
}
