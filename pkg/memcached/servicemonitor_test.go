package memcached_test

import (
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
