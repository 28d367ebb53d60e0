package memcached_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/ghodss/yaml"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// rulesOf returns p's ingress rules, one line each: the ports, then the
// peers as JSON.
func rulesOf(p *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, r := range p.Spec.Ingress {
		var ports []string
		for _, port := range r.Ports {
			ports = append(ports, fmt.Sprintf("%s/%s", port.Port.String(), *port.Protocol))
		}
		peers, _ := json.Marshal(r.From)
		out = append(out, strings.Join(ports, ",")+" from "+string(peers))
	}
	return out
}

func TestNewNetworkPolicy(t *testing.T) {
	const (
		own      = `[{"podSelector":{}}]`
		operator = `{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"memcached-operator"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"operators"}}}`
		scrapers = `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}`
		web      = `{"podSelector":{"matchLabels":{"role":"web"}}}`
		office   = `{"ipBlock":{"cidr":"192.0.2.0/24"}}`
	)
	defaults := memcached.NetworkPolicyOptions{
		MonitoringNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{memcached.NamespaceNameLabel: "monitoring"}},
		OperatorNamespace:    "operators",
	}
	webPeers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}}
	officePeers := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}
	tests := []struct {
		name string
		spec v1alpha1.MemcachedSpec
		opts memcached.NetworkPolicyOptions
		want []string
	}{
		{name: "plain: memcached from its namespace", spec: v1alpha1.MemcachedSpec{}, opts: defaults,
			want: []string{"11211/TCP from " + own}},
		{name: "discovery: its port too", spec: v1alpha1.MemcachedSpec{Discovery: &v1alpha1.MemcachedDiscovery{Enabled: true}}, opts: defaults,
			want: []string{"11211/TCP,11212/TCP from " + own, "9150/TCP from [" + operator + "]"}},
		{name: "from: its peers alone", spec: v1alpha1.MemcachedSpec{NetworkPolicy: &v1alpha1.MemcachedNetworkPolicy{From: webPeers}}, opts: defaults,
			want: []string{"11211/TCP from [" + web + "]"}},
		{name: "TLS: the sidecar's report to the operator alone", spec: v1alpha1.MemcachedSpec{TLS: &v1alpha1.MemcachedTLS{SecretName: "tls"}}, opts: defaults,
			want: []string{"11211/TCP from " + own, "9150/TCP from [" + operator + "]"}},
		{name: "auth without monitoring: monitoringFrom admits nobody", spec: v1alpha1.MemcachedSpec{Auth: &v1alpha1.MemcachedAuth{SecretName: "users"},
			NetworkPolicy: &v1alpha1.MemcachedNetworkPolicy{MonitoringFrom: officePeers}}, opts: defaults,
			want: []string{"11211/TCP from " + own, "9150/TCP from [" + operator + "]"}},
		{name: "monitoring: the operator and the monitoring namespaces", spec: v1alpha1.MemcachedSpec{Monitoring: &v1alpha1.MemcachedMonitoring{Enabled: true}}, opts: defaults,
			want: []string{"11211/TCP from " + own, "9150/TCP from [" + operator + "," + scrapers + "]"}},
		{name: "monitoringFrom replaces the monitoring namespaces", spec: v1alpha1.MemcachedSpec{Monitoring: &v1alpha1.MemcachedMonitoring{Enabled: true},
			NetworkPolicy: &v1alpha1.MemcachedNetworkPolicy{MonitoringFrom: officePeers}}, opts: defaults,
			want: []string{"11211/TCP from " + own, "9150/TCP from [" + operator + "," + office + "]"}},
		{name: "monitoring without a selector: the operator alone", spec: v1alpha1.MemcachedSpec{Monitoring: &v1alpha1.MemcachedMonitoring{Enabled: true}},
			opts: memcached.NetworkPolicyOptions{OperatorNamespace: "operators"},
			want: []string{"11211/TCP from " + own, "9150/TCP from [" + operator + "]"}},
		{name: "an operator out of a cluster: no peer, no rule, never one that admits all", spec: v1alpha1.MemcachedSpec{TLS: &v1alpha1.MemcachedTLS{SecretName: "tls"}},
			opts: memcached.NetworkPolicyOptions{},
			want: []string{"11211/TCP from " + own}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 2)
			m.Spec = tt.spec
			p := memcached.NewNetworkPolicy(m, tt.opts)
			if got := rulesOf(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("rules:\n got %q\nwant %q", got, tt.want)
			}
			for _, r := range p.Spec.Ingress {
				if len(r.From) == 0 {
					t.Errorf("rule %+v admits everyone", r)
				}
			}
			if got, want := p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}; !reflect.DeepEqual(got, want) {
				t.Errorf("policyTypes: got %v, want %v", got, want)
			}
			d := memcached.NewDeployment(m, memcachedtest.Image, memcached.DefaultSidecarImage)
			if !reflect.DeepEqual(p.Spec.PodSelector, *d.Spec.Selector) {
				t.Errorf("podSelector: got %v, want the Deployment's %v", p.Spec.PodSelector, *d.Spec.Selector)
			}
			if p.Name != m.Name || p.Namespace != m.Namespace || !metav1.IsControlledBy(p, m) || !reflect.DeepEqual(p.Labels, memcached.Labels(m.Name)) {
				t.Errorf("metadata: got %+v, want the name, namespace and labels of %s/%s and its controller reference", p.ObjectMeta, m.Namespace, m.Name)
			}
			if p.APIVersion != "networking.k8s.io/v1" || p.Kind != "NetworkPolicy" {
				t.Errorf("TypeMeta: got %s %s, want networking.k8s.io/v1 NetworkPolicy", p.APIVersion, p.Kind)
			}
		})
	}
}

// TestSidecarPortIsTheMetricsPort: the policy's rule for the sidecar
// admits to the port its container serves, whatever that port is named.
func TestSidecarPortIsTheMetricsPort(t *testing.T) {
	m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 1), true)
	p := memcached.NewNetworkPolicy(m, memcached.NetworkPolicyOptions{OperatorNamespace: "operators"})
	served := map[int32]bool{}
	for _, c := range memcached.NewDeployment(m, memcachedtest.Image, memcached.DefaultSidecarImage).Spec.Template.Spec.Containers {
		for _, port := range c.Ports {
			served[port.ContainerPort] = true
		}
	}
	for _, r := range p.Spec.Ingress {
		for _, port := range r.Ports {
			if !served[int32(port.Port.IntValue())] {
				t.Errorf("port %s: the pods serve %v", port.Port.String(), served)
			}
		}
	}
}

// TestOperatorPodLabelsAreDeploys: OperatorPodLabels select the pods of
// deploy/operator.yaml, and deploy/networkpolicy.yaml, the operator's own
// policy, selects them too and admits its metrics port alone.
func TestOperatorPodLabelsAreDeploys(t *testing.T) {
	var d appsv1.Deployment
	readYAML(t, "operator.yaml", &d)
	if !labels.SelectorFromSet(memcached.OperatorPodLabels()).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("OperatorPodLabels %v do not select deploy/operator.yaml's pods, labelled %v", memcached.OperatorPodLabels(), d.Spec.Template.Labels)
	}
	var p networkingv1.NetworkPolicy
	readYAML(t, "networkpolicy.yaml", &p)
	selector, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil || selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("deploy/networkpolicy.yaml's podSelector %v does not select deploy/operator.yaml's pods (%v)", p.Spec.PodSelector, err)
	}
	if got, want := p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}; !reflect.DeepEqual(got, want) {
		t.Errorf("policyTypes: got %v, want %v", got, want)
	}
	ports := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, port := range c.Ports {
			ports[port.Name] = true
		}
	}
	for _, r := range p.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("rule %+v admits everyone", r)
		}
		if len(r.Ports) == 0 {
			t.Errorf("rule %+v admits every port", r)
		}
		for _, port := range r.Ports {
			if port.Port == nil || !ports[port.Port.String()] {
				t.Errorf("port %v is not one that deploy/operator.yaml's pods name (%v)", port.Port, ports)
			}
		}
	}
}

// readYAML decodes deploy/name into obj.
func readYAML(t *testing.T, name string, obj interface{}) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, obj); err != nil {
		t.Fatalf("deploy/%s: %v", name, err)
	}
}
