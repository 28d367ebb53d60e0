package memcached_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// specEdits are edits of a spec, each naming the fields it covers, by
// their JSON path in the spec.
var specEdits = []struct {
	name   string
	fields []string
	from   func(m *v1alpha1.Memcached)
	edit   func(m *v1alpha1.Memcached)
}{
	{name: "a scale", fields: []string{"size"}, edit: func(m *v1alpha1.Memcached) { m.Spec.Size = 5 }},
	{name: "an image", fields: []string{"image"}, edit: func(m *v1alpha1.Memcached) { m.Spec.Image = "registry.example.com/cache/memcached:1.6" }},
	{name: "resources", fields: []string{"resources"}, edit: func(m *v1alpha1.Memcached) {
		m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	}},
	{name: "the default resources written out", edit: func(m *v1alpha1.Memcached) {
		m.Spec.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("96Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("128Mi")},
		}
	}},
	{name: "memoryMB", fields: []string{"memoryMB"}, edit: func(m *v1alpha1.Memcached) { m.Spec.MemoryMB = memcachedtest.Int32p(32) }},
	{name: "the derived memoryMB written out", edit: func(m *v1alpha1.Memcached) { m.Spec.MemoryMB = memcachedtest.Int32p(64) }},
	{name: "extraArgs", fields: []string{"extraArgs"}, edit: func(m *v1alpha1.Memcached) { m.Spec.ExtraArgs = []string{"--threads=2"} }},
	{name: "a node selector", fields: []string{"nodeSelector"}, edit: func(m *v1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"pool": "cache"} }},
	{name: "tolerations", fields: []string{"tolerations"}, edit: func(m *v1alpha1.Memcached) {
		m.Spec.Tolerations = []corev1.Toleration{{Key: "cache", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}},
	{name: "a priority class", fields: []string{"priorityClassName"}, edit: func(m *v1alpha1.Memcached) { m.Spec.PriorityClassName = "cache-high" }},
	{name: "TLS", fields: []string{"tls.secretName"}, edit: func(m *v1alpha1.Memcached) { m.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "tls"} }},
	{name: "client certificates required", fields: []string{"tls.clientCertificates"},
		from: func(m *v1alpha1.Memcached) { m.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "tls"} },
		edit: func(m *v1alpha1.Memcached) { m.Spec.TLS.ClientCertificates = v1alpha1.ClientCertificatesRequired }},
	{name: "client certificates None written out",
		from: func(m *v1alpha1.Memcached) { m.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "tls"} },
		edit: func(m *v1alpha1.Memcached) { m.Spec.TLS.ClientCertificates = v1alpha1.ClientCertificatesNone }},
	{name: "auth", fields: []string{"auth.secretName"}, edit: func(m *v1alpha1.Memcached) { m.Spec.Auth = &v1alpha1.MemcachedAuth{SecretName: "passwords"} }},
	{name: "monitoring", fields: []string{"monitoring.enabled"}, edit: func(m *v1alpha1.Memcached) {
		m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	}},
	{name: "monitoring labels", fields: []string{"monitoring.labels"},
		from: func(m *v1alpha1.Memcached) { m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true} },
		edit: func(m *v1alpha1.Memcached) { m.Spec.Monitoring.Labels = map[string]string{"release": "prom"} }},
	{name: "a PrometheusRule", fields: []string{"monitoring.prometheusRule"},
		from: func(m *v1alpha1.Memcached) { m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true} },
		edit: func(m *v1alpha1.Memcached) { m.Spec.Monitoring.PrometheusRule = true }},
	{name: "monitoring off, written out with labels", edit: func(m *v1alpha1.Memcached) {
		m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Labels: map[string]string{"release": "prom"}}
	}},
	{name: "a maintenance window", fields: []string{"maintenanceWindow.day", "maintenanceWindow.start", "maintenanceWindow.duration"}, edit: func(m *v1alpha1.Memcached) {
		m.Spec.MaintenanceWindow = &v1alpha1.MaintenanceWindow{Day: "Tuesday", Start: "03:00", Duration: metav1.Duration{Duration: 2 * time.Hour}}
	}},
	{name: "discovery", fields: []string{"discovery.enabled"}, edit: func(m *v1alpha1.Memcached) { m.Spec.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true} }},
	{name: "discovery off, written out", edit: func(m *v1alpha1.Memcached) { m.Spec.Discovery = &v1alpha1.MemcachedDiscovery{} }},
	{name: "a network policy", fields: []string{"networkPolicy.enabled", "networkPolicy.from", "networkPolicy.monitoringFrom"}, edit: func(m *v1alpha1.Memcached) {
		m.Spec.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{
			Enabled:        true,
			From:           []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}},
			MonitoringFrom: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}},
		}
	}},
	{name: "a network policy turned off", from: func(m *v1alpha1.Memcached) {
		m.Spec.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{Enabled: true}
		m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	}, edit: func(m *v1alpha1.Memcached) { m.Spec.NetworkPolicy.Enabled = false }},
}

// TestSpecHashFollowsThePodTemplate: an edit changes SpecHash exactly when
// it changes the pod template, with the operator's images held fixed.
// Otherwise the record on the template goes stale at an edit that writes
// nothing, and the operator's next change looks like the user's; or an
// edit of the user's that rolls looks like the operator's, and waits.
func TestSpecHashFollowsThePodTemplate(t *testing.T) {
	for _, tt := range specEdits {
		t.Run(tt.name, func(t *testing.T) {
			from := memcachedtest.NewMemcached("example", 2)
			if tt.from != nil {
				tt.from(from)
			}
			to := from.DeepCopy()
			tt.edit(to)
			templateChanged := memcachedtest.ManifestHash(t, from, memcachedtest.Image) != memcachedtest.ManifestHash(t, to, memcachedtest.Image)
			specChanged := memcachedtest.MustSpecHash(from) != memcachedtest.MustSpecHash(to)
			if specChanged != templateChanged {
				t.Errorf("spec hash changed: %v, want %v, as the pod template", specChanged, templateChanged)
			}
		})
	}
}

// TestEverySpecFieldIsJudged: every field of the spec has an edit in
// specEdits, so that a new field is judged for whether it reaches the pod
// template (see memcached.SpecHash) before it ships.
func TestEverySpecFieldIsJudged(t *testing.T) {
	covered := map[string]bool{}
	for _, e := range specEdits {
		for _, f := range e.fields {
			covered[f] = true
		}
	}
	var missing []string
	for _, f := range specFields(reflect.TypeOf(v1alpha1.MemcachedSpec{}), "") {
		if !covered[f] {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("spec fields without an edit in specEdits: %v", missing)
	}
}

// specFields returns the JSON paths of typ's fields, into the structs of
// the API package.
func specFields(typ reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		ft := f.Type
		if ft.Kind() == reflect.Ptr {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
			out = append(out, specFields(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func TestOperatorChangedAcrossTemplateNeutralEdits(t *testing.T) {
	monitored := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 2), true)
	monitored.Status.ObservedGeneration = 1
	labelled := monitored.DeepCopy()
	labelled.Generation = 2
	labelled.Spec.Monitoring.Labels = map[string]string{"release": "prom"}
	relabelled := labelled.DeepCopy()
	relabelled.Generation = 3
	relabelled.Spec.Monitoring.Labels = map[string]string{"release": "kube-prometheus"}
	changed := labelled.DeepCopy()
	changed.Generation = 3
	changed.Spec.ExtraArgs = []string{"--threads=2"}
	fenced := labelled.DeepCopy()
	fenced.Generation = 3
	fenced.Spec.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{Enabled: true}
	recorded := func(hash string) *appsv1.Deployment {
		d := memcachedtest.OwnedDeployment(monitored, 2)
		d.Spec.Template.Annotations[memcached.TemplateHashAnnotation] = "an-older-template"
		d.Spec.Template.Annotations[memcached.SpecHashAnnotation] = hash
		return d
	}
	legacy := func(m *v1alpha1.Memcached) string {
		h, err := memcached.LegacySpecHash(m)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tests := []struct {
		name string
		m    *v1alpha1.Memcached
		d    *appsv1.Deployment
		want bool
	}{
		{name: "recorded before labels were added", m: labelled, d: recorded(memcachedtest.MustSpecHash(monitored)), want: true},
		{name: "recorded with other labels", m: relabelled, d: recorded(memcachedtest.MustSpecHash(labelled)), want: true},
		{name: "a change of the template after labels", m: changed, d: recorded(memcachedtest.MustSpecHash(labelled)), want: false},
		{name: "the record of an earlier version, of the same spec", m: labelled, d: recorded(legacy(labelled)), want: true},
		{name: "the record of an earlier version, without the labels", m: relabelled, d: recorded(legacy(monitored)), want: true},
		{name: "the record of an earlier version, of another template", m: changed, d: recorded(legacy(labelled)), want: false},
		{name: "recorded before a network policy was enabled", m: fenced, d: recorded(memcachedtest.MustSpecHash(labelled)), want: true},
		// Earlier versions did not know spec.networkPolicy and so never hashed it.
		{name: "the record of an earlier version, before a network policy was enabled", m: fenced, d: recorded(legacy(labelled)), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.OperatorChanged(tt.m, tt.d); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
