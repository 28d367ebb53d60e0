package stub

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testNetworkPolicyOptions are the operator's settings in the tests of
// the NetworkPolicy.
var testNetworkPolicyOptions = memcached.NetworkPolicyOptions{
	MonitoringNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{memcached.NamespaceNameLabel: "monitoring"}},
	OperatorNamespace:    "operators",
}

// withNetworkPolicy returns a copy of m with spec.networkPolicy enabled or
// not.
func withNetworkPolicy(m *v1alpha1.Memcached, enabled bool) *v1alpha1.Memcached {
	m = m.DeepCopy()
	m.Spec.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{Enabled: enabled}
	return m
}

// ownedNetworkPolicy is m's NetworkPolicy as the operator creates it.
func ownedNetworkPolicy(m *v1alpha1.Memcached) *networkingv1.NetworkPolicy {
	p := memcached.NewNetworkPolicy(m, testNetworkPolicyOptions)
	p.UID = "uid-networkpolicy"
	return p
}

// writes returns the actions among actions that write, but the status.
func writes(actions []string) []string {
	var out []string
	for _, a := range actions {
		if !strings.HasPrefix(a, "get ") && !strings.HasPrefix(a, "read ") && !strings.HasPrefix(a, "list ") && !strings.HasPrefix(a, "update memcached/status") {
			out = append(out, a)
		}
	}
	return out
}

func TestEnsuresTheNetworkPolicy(t *testing.T) {
	plain := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 1), true)
	on := withNetworkPolicy(plain, true)
	off := withNetworkPolicy(plain, false)
	foreign := func(m *v1alpha1.Memcached) *networkingv1.NetworkPolicy {
		p := ownedNetworkPolicy(m)
		p.OwnerReferences = nil
		return p
	}
	opened := ownedNetworkPolicy(on)
	opened.Spec.Ingress[0].From = append(opened.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
	tests := []struct {
		name string
		m    *v1alpha1.Memcached
		// policy is the stored NetworkPolicy: nil for none.
		policy *networkingv1.NetworkPolicy
		// content, if set, changes the stored policy's JSON content as
		// the API server would send it.
		content      func(spec map[string]interface{})
		wantWrites   []string
		wantErr      string
		wantEvents   []string
		wantDegraded string
		// wantPolicy is the stored NetworkPolicy's spec afterwards: nil
		// for none.
		wantPolicy *networkingv1.NetworkPolicy
	}{
		{name: "created when on", m: on, wantWrites: []string{"create networkpolicy test/example"},
			wantEvents: []string{"Normal " + ReasonNetworkPolicyCreated}, wantDegraded: memcached.ReasonAsExpected, wantPolicy: ownedNetworkPolicy(on)},
		{name: "left alone when in place", m: on, policy: ownedNetworkPolicy(on), wantDegraded: memcached.ReasonAsExpected, wantPolicy: ownedNetworkPolicy(on)},
		{name: "a hand edit put back", m: on, policy: opened, wantWrites: []string{"patch networkpolicy test/example"},
			wantEvents: []string{"Normal " + ReasonNetworkPolicyUpdated}, wantDegraded: memcached.ReasonAsExpected, wantPolicy: ownedNetworkPolicy(on)},
		{name: "another owner's reported", m: on, policy: foreign(on), wantErr: "networkpolicy test/example already exists and is not controlled by memcached example",
			wantEvents: []string{"Warning " + memcached.ReasonNetworkPolicyNotOwned}, wantDegraded: memcached.ReasonNetworkPolicyNotOwned, wantPolicy: foreign(on)},
		{name: "deleted when off", m: off, policy: ownedNetworkPolicy(on), wantWrites: []string{"delete networkpolicy test/example"},
			wantEvents: []string{"Normal " + ReasonNetworkPolicyDeleted}, wantDegraded: memcached.ReasonAsExpected},
		{name: "deleted when the block is gone", m: plain, policy: ownedNetworkPolicy(on), wantWrites: []string{"delete networkpolicy test/example"},
			wantEvents: []string{"Normal " + ReasonNetworkPolicyDeleted}, wantDegraded: memcached.ReasonAsExpected},
		{name: "another owner's left alone when off", m: off, policy: foreign(on), wantDegraded: memcached.ReasonAsExpected, wantPolicy: foreign(on)},
		{name: "none when off", m: off, wantDegraded: memcached.ReasonAsExpected},
		{name: "the monitoring namespaces follow spec.monitoring", m: withNetworkPolicy(memcachedtest.WithMonitoring(plain, false), true), policy: ownedNetworkPolicy(on),
			wantWrites: []string{"patch service test/example", "patch networkpolicy test/example"}, wantEvents: []string{"Normal " + ReasonServiceUpdated, "Normal " + ReasonNetworkPolicyUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantPolicy: ownedNetworkPolicy(withNetworkPolicy(memcachedtest.WithMonitoring(plain, false), true))},
		// A port widened to a range: client-go 1.11's type cannot hold
		// endPort, but the digest of the live JSON tells it.
		{name: "a field the operator's types lack put back", m: on, policy: ownedNetworkPolicy(on), content: func(spec map[string]interface{}) {
			rules := spec["ingress"].([]interface{})
			port := rules[0].(map[string]interface{})["ports"].([]interface{})[0].(map[string]interface{})
			port["endPort"] = int64(65535)
		}, wantWrites: []string{"patch networkpolicy test/example"},
			wantEvents: []string{"Normal " + ReasonNetworkPolicyUpdated}, wantDegraded: memcached.ReasonAsExpected, wantPolicy: ownedNetworkPolicy(on)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{
				tt.m, memcachedtest.OwnedDeployment(tt.m, 1), memcachedtest.OwnedService(memcachedtest.WithMonitoring(tt.m, true)),
				memcachedtest.NewPod(tt.m, "example-a", corev1.PodRunning, true),
			}
			if tt.policy != nil {
				objs = append(objs, tt.policy)
			}
			f := newFixture(t, objs...)
			f.handler.AdmitToNetworkPolicies(testNetworkPolicyOptions)
			if tt.content != nil {
				f.client.stores[memcached.NetworkPolicyResource] = editedStore{f.client.stores[memcached.NetworkPolicyResource].(observedStore[*networkingv1.NetworkPolicy]), tt.content}
			}
			before := memcached.TemplateOf(f.client.deployments["test/example"])

			err := f.handle(tt.m, false)

			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("Handle: got %v, want %q", err, tt.wantErr)
			}
			checkActions(t, writes(f.client.actions), tt.wantWrites)
			var events []string
			for _, e := range f.events() {
				// An Event reads "Type Reason message".
				events = append(events, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
			}
			if strings.Join(events, ",") != strings.Join(tt.wantEvents, ",") {
				t.Errorf("events: got %q, want %q", events, tt.wantEvents)
			}
			status := f.client.statuses[len(f.client.statuses)-1]
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Reason != tt.wantDegraded {
				t.Errorf("Degraded: got %+v, want reason %s", c, tt.wantDegraded)
			}
			got := f.client.networkPolicies["test/example"]
			switch {
			case tt.wantPolicy == nil && got != nil:
				t.Errorf("networkpolicy: got %+v, want none", got)
			case tt.wantPolicy != nil && got == nil:
				t.Errorf("networkpolicy: got none, want %+v", tt.wantPolicy.Spec)
			case tt.wantPolicy != nil && (!reflect.DeepEqual(got.Spec, tt.wantPolicy.Spec) || !reflect.DeepEqual(got.OwnerReferences, tt.wantPolicy.OwnerReferences)):
				t.Errorf("networkpolicy:\n got %+v %+v\nwant %+v %+v", got.OwnerReferences, got.Spec, tt.wantPolicy.OwnerReferences, tt.wantPolicy.Spec)
			}
			if after := memcached.TemplateOf(f.client.deployments["test/example"]); after != before {
				t.Errorf("pod template: got %s, want %s: a NetworkPolicy rolls no pod", after, before)
			}
		})
	}
}

// editedStore is the fake's store of NetworkPolicies whose stored policy
// the API server sends with content's change, until the operator patches
// it: a field that client-go 1.11's type cannot hold.
type editedStore struct {
	observedStore[*networkingv1.NetworkPolicy]
	content func(spec map[string]interface{})
}

func (s editedStore) get(f *fakeClient, namespace, name string) (kube.Object, error) {
	o, err := s.typedStore.get(f, namespace, name)
	if err != nil || f.patches["patch networkpolicy "+key(namespace, name)] != "" {
		return s.observe(o, err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	s.content(content["spec"].(map[string]interface{}))
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	if err := s.kind.Observe(raw, nil, o); err != nil {
		return nil, err
	}
	s.kind.Trim(o)
	return o, nil
}

// TestTogglingTheNetworkPolicyRollsNoPod: turning spec.networkPolicy on
// and off creates and deletes the policy, and writes nothing else: the
// Deployment keeps its pod template, and the spec hash on it stays good,
// so that the operator's next change is still told from the user's.
func TestTogglingTheNetworkPolicyRollsNoPod(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "tls"}
	d := memcachedtest.OwnedDeployment(m, 2)
	on := withNetworkPolicy(m, true)
	on.Generation = 2
	f := newFixture(t, on, d, memcachedtest.OwnedService(m), memcachedtest.OwnedBudget(m))
	f.handler.AdmitToNetworkPolicies(testNetworkPolicyOptions)

	if err := f.handle(on, false); err != nil {
		t.Fatalf("Handle on: %v", err)
	}
	checkActions(t, writes(f.client.actions), []string{"create networkpolicy test/example"})
	if memcachedtest.MustSpecHash(on) != memcachedtest.MustSpecHash(m) {
		t.Errorf("spec hash: %s on, %s off, want the same", memcachedtest.MustSpecHash(on), memcachedtest.MustSpecHash(m))
	}
	p := f.client.networkPolicies["test/example"]
	if p == nil {
		t.Fatal("no networkpolicy")
	}
	// The sidecar of spec.tls serves its report to the operator alone.
	if got := p.Spec.Ingress; len(got) != 2 || len(got[1].From) != 1 || *got[1].Ports[0].Port != intstr.FromInt(9150) {
		t.Errorf("ingress: got %+v, want memcached's rule and the sidecar's, for the operator alone", got)
	}

	off := withNetworkPolicy(on, false)
	off.Generation = 3
	f.client.actions = nil
	f.client.memcacheds["test/example"] = off
	if err := f.handle(off, false); err != nil {
		t.Fatalf("Handle off: %v", err)
	}
	checkActions(t, writes(f.client.actions), []string{"delete networkpolicy test/example"})
	if got, want := memcached.TemplateOf(f.client.deployments["test/example"]), memcached.TemplateOf(d); got != want {
		t.Errorf("pod template: got %s, want %s", got, want)
	}
}
