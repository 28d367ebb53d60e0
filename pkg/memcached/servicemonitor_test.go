package memcached_test

import (
	"reflect"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

func TestServiceMonitorSelectsTheMetricsPortOfTheService(t *testing.T) {
	m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 2), true)
	svc := memcached.NewService(m)
	sm, err := memcached.NewServiceMonitor(m)
	if err != nil {
		t.Fatal(err)
	}

	matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("selector %v does not select the service's labels %v", matchLabels, svc.Labels)
	}
	port := memcachedtest.FirstEndpoint(sm.Object["spec"].(map[string]interface{}))["port"]
	if !memcached.HasMetricsPort(svc) || port != memcached.MetricsPortName {
		t.Errorf("endpoint port %v, service ports %+v: want the service's port named %s", port, svc.Spec.Ports, memcached.MetricsPortName)
	}
	if !metav1.IsControlledBy(sm, m) || len(sm.GetOwnerReferences()) != 1 || !*sm.GetOwnerReferences()[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the memcached as controller, blocking its deletion", sm.GetOwnerReferences())
	}
	if sm.GetNamespace() != m.Namespace || sm.GetName() != m.Name || sm.GetKind() != "ServiceMonitor" || sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("got %s %s %s/%s, want monitoring.coreos.com/v1 ServiceMonitor test/example", sm.GetAPIVersion(), sm.GetKind(), sm.GetNamespace(), sm.GetName())
	}
}

// TestServiceMonitorLabelsTheSeriesWithTheMemcached checks that the
// ServiceMonitor's one relabeling copies the memcached_cr label of the pod
// behind each endpoint to the series' label memcached, which PodMatchers
// selects, as deploy/monitoring/prometheus.yaml's scrape does.
func TestServiceMonitorLabelsTheSeriesWithTheMemcached(t *testing.T) {
	sm, err := memcached.NewServiceMonitor(memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 2), true))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := memcachedtest.FirstEndpoint(sm.Object["spec"].(map[string]interface{}))["relabelings"].([]interface{})
	want := []interface{}{map[string]interface{}{
		"action":       "replace",
		"sourceLabels": []interface{}{"__meta_kubernetes_pod_label_memcached_cr"},
		"targetLabel":  "memcached",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got relabelings %v, want %v", got, want)
	}
	if memcached.CRLabel != "memcached_cr" || memcached.MemcachedSeriesLabel != "memcached" {
		t.Errorf("labels %s and %s, want memcached_cr and memcached, which prometheus.yaml, the dashboards and the console name", memcached.CRLabel, memcached.MemcachedSeriesLabel)
	}
}
