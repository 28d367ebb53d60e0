package stub

import (
	"maps"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// monitoringLabels are the spec.monitoring.labels of the tests' Memcacheds,
// as a kube-prometheus-stack release selects on.
var monitoringLabels = map[string]string{"release": "kube-prometheus-stack"}

// withAlerts returns a copy of m with monitoring, monitoringLabels and,
// when rule, spec.monitoring.prometheusRule.
func withAlerts(m *v1alpha1.Memcached, rule bool) *v1alpha1.Memcached {
	m = memcachedtest.WithMonitoring(m, true)
	m.Spec.Monitoring.PrometheusRule = rule
	m.Spec.Monitoring.Labels = maps.Clone(monitoringLabels)
	return m
}

// ownedPrometheusRule is m's PrometheusRule as the operator creates it,
// changed by edit.
func ownedPrometheusRule(m *v1alpha1.Memcached, edit func(r *unstructured.Unstructured)) *unstructured.Unstructured {
	r, err := memcached.NewPrometheusRule(m)
	if err != nil {
		panic(err)
	}
	r.SetUID("uid-prometheusrule")
	if edit != nil {
		edit(r)
	}
	return r
}

// firstRule returns the first rule of a PrometheusRule's first group.
func firstRule(r *unstructured.Unstructured) map[string]interface{} {
	groups := r.Object["spec"].(map[string]interface{})["groups"].([]interface{})
	return groups[0].(map[string]interface{})["rules"].([]interface{})[0].(map[string]interface{})
}

func TestEnsuresThePrometheusRule(t *testing.T) {
	base := memcachedtest.NewMemcached("example", 1)
	on, ruleOff, off := withAlerts(base, true), withAlerts(base, false), memcachedtest.WithMonitoring(base, false)
	foreign := ownedPrometheusRule(on, nil)
	foreign.SetOwnerReferences(nil)
	// A field the API server or a newer CRD defaults is no edit.
	defaulted := ownedPrometheusRule(on, func(r *unstructured.Unstructured) { firstRule(r)["keep_firing_for"] = "0s" })
	edited := ownedPrometheusRule(on, func(r *unstructured.Unstructured) { firstRule(r)["expr"] = "vector(0)" })
	unlabelled := ownedPrometheusRule(on, func(r *unstructured.Unstructured) { r.SetLabels(memcached.Labels("example")) })
	prometheusRuleKind.run(t, []monitoringChildCase{
		{
			name: "created when asked for and served", m: on, served: true, metricsPort: true,
			wantActions:  []string{"read prometheusrule test/example", "create prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Normal " + ReasonPrometheusRuleCreated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: ownedPrometheusRule(on, nil),
		},
		{
			name: "nothing and no error when the API is not served", m: on, metricsPort: true,
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "not created without prometheusRule", m: ruleOff, served: true, metricsPort: true,
			wantActions:  []string{"read prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "in sync costs one read", m: on, served: true, metricsPort: true, child: defaulted,
			wantActions:  []string{"read prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: defaulted,
		},
		{
			name: "restored when a rule is edited", m: on, served: true, metricsPort: true, child: edited,
			wantActions:  []string{"read prometheusrule test/example", "patch prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Normal " + ReasonPrometheusRuleUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: ownedPrometheusRule(on, nil),
		},
		{
			name: "a removed label is put back", m: on, served: true, metricsPort: true, child: unlabelled,
			wantActions:  []string{"read prometheusrule test/example", "patch prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Normal " + ReasonPrometheusRuleUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: ownedPrometheusRule(on, nil),
		},
		{
			name: "someone else's is left alone", m: on, served: true, metricsPort: true, child: foreign,
			// ensureExists confirms a foreign object with a second read.
			wantActions:  []string{"read prometheusrule test/example", "read prometheusrule test/example"},
			wantErr:      "prometheusrule test/example already exists and is not controlled by memcached example",
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Warning " + memcached.ReasonPrometheusRuleNotOwned},
			wantDegraded: memcached.ReasonPrometheusRuleNotOwned, wantChild: foreign,
		},
		{
			name: "create refused", m: on, served: true, metricsPort: true, failOn: "create prometheusrule",
			wantActions:  []string{"read prometheusrule test/example", "create prometheusrule test/example"},
			wantErr:      "failed to create prometheusrule test/example",
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Warning " + memcached.ReasonPrometheusRuleCreateFailed},
			wantDegraded: memcached.ReasonPrometheusRuleCreateFailed,
		},
		{
			name: "deleted when prometheusRule is turned off", m: ruleOff, served: true, metricsPort: true, child: ownedPrometheusRule(on, nil),
			wantActions:  []string{"read prometheusrule test/example", "delete prometheusrule test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated, "Normal " + ReasonPrometheusRuleDeleted},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "deleted when monitoring is turned off, before the metrics port", m: off, served: true, metricsPort: true, child: ownedPrometheusRule(on, nil),
			wantActions:  []string{"read prometheusrule test/example", "delete prometheusrule test/example", "patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonPrometheusRuleDeleted, "Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "a refused delete keeps the metrics port, which brings the retry", m: off, served: true, metricsPort: true, child: ownedPrometheusRule(on, nil), failOn: "delete prometheusrule",
			wantActions:  []string{"read prometheusrule test/example", "delete prometheusrule test/example"},
			wantErr:      "failed to delete prometheusrule test/example",
			wantEvents:   []string{"Warning " + memcached.ReasonPrometheusRuleDeleteFailed},
			wantDegraded: memcached.ReasonPrometheusRuleDeleteFailed, wantChild: ownedPrometheusRule(on, nil),
		},
		{
			name: "a memcached without monitoring costs no request", m: off, served: true,
			wantDegraded: memcached.ReasonAsExpected,
		},
	})
}

// TestMonitoringLabelsReachBothChildren checks that spec.monitoring.labels
// are on the ServiceMonitor and the PrometheusRule the operator creates,
// beside its own, and listed in memcached.SetLabelsAnnotation; that they are
// put back on both when someone removes them; that a label taken out of
// the spec is taken off both; and that labels others added stay.
func TestMonitoringLabelsReachBothChildren(t *testing.T) {
	m := withAlerts(memcachedtest.NewMemcached("example", 1), true)
	want := maps.Clone(monitoringLabels)
	maps.Copy(want, memcached.Labels(m.Name))
	stripped := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		o.SetLabels(map[string]string{"app": "memcached", "memcached_cr": "example", "team": "cache"})
		return o
	}
	withTeam := maps.Clone(want)
	withTeam["team"] = "cache"
	// The children as an earlier spec, with labels release and env, left
	// them, and team, which someone else added; the spec now has release
	// alone.
	earlier := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		o.SetLabels(map[string]string{"app": "memcached", "memcached_cr": "example", "release": "kube-prometheus-stack", "env": "prod", "team": "cache"})
		o.SetAnnotations(map[string]string{memcached.SetLabelsAnnotation: "env,release", "note": "kept"})
		return o
	}
	// Children of an operator that set no annotation.
	unannotated := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		return o
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		want    map[string]string
		// wantAnnotations are the children's annotations afterwards.
		wantAnnotations map[string]string
	}{
		{name: "created with them", want: want, wantAnnotations: map[string]string{memcached.SetLabelsAnnotation: "release"}},
		{
			name:            "put back when removed",
			objects:         []runtime.Object{stripped(ownedServiceMonitor(m, nil)), stripped(ownedPrometheusRule(m, nil))},
			want:            withTeam,
			wantAnnotations: map[string]string{memcached.SetLabelsAnnotation: "release"},
		},
		{
			name:            "taken off when the spec drops them, others' staying",
			objects:         []runtime.Object{earlier(ownedServiceMonitor(m, nil)), earlier(ownedPrometheusRule(m, nil))},
			want:            withTeam,
			wantAnnotations: map[string]string{memcached.SetLabelsAnnotation: "release", "note": "kept"},
		},
		{
			name:            "annotated when an earlier operator did not",
			objects:         []runtime.Object{unannotated(ownedServiceMonitor(m, nil)), unannotated(ownedPrometheusRule(m, nil))},
			want:            want,
			wantAnnotations: map[string]string{memcached.SetLabelsAnnotation: "release"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]runtime.Object{
				m, memcachedtest.OwnedDeployment(m, 1), memcachedtest.OwnedService(m),
				memcachedtest.NewPod(m, "example-a", corev1.PodRunning, true),
			}, tt.objects...)
			f := newFixture(t, objs...)
			f.client.monitoringServed = true

			if err := f.handle(m, false); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			for kind, got := range map[string]*unstructured.Unstructured{
				"servicemonitor": f.client.serviceMonitors["test/example"],
				"prometheusrule": f.client.prometheusRules["test/example"],
			} {
				if got == nil {
					t.Errorf("no %s", kind)
				} else {
					if !maps.Equal(got.GetLabels(), tt.want) {
						t.Errorf("%s labels: got %v, want %v", kind, got.GetLabels(), tt.want)
					}
					if !maps.Equal(got.GetAnnotations(), tt.wantAnnotations) {
						t.Errorf("%s annotations: got %v, want %v", kind, got.GetAnnotations(), tt.wantAnnotations)
					}
				}
			}
		})
	}
}
