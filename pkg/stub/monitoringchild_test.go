package stub

import (
	"maps"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// monitoringChildCase is one case of the step that ensures a Prometheus
// Operator child, the ServiceMonitor or the PrometheusRule: one event on
// the stored objects, then the child's calls, the Events, the Degraded
// reason, the child and the Service's metrics port afterwards.
type monitoringChildCase struct {
	name   string
	m      *v1alpha1.Memcached
	served bool
	// metricsPort gives the Service the metrics port, as a Memcached
	// with monitoring has it.
	metricsPort bool
	// child is the stored child: nil for none.
	child  *unstructured.Unstructured
	failOn string
	// failWith is failOn's error, a Forbidden when nil.
	failWith error
	// wantActions are the child's calls and the Service's writes.
	wantActions []string
	wantErr     string
	// wantEvents are the Events' types and reasons.
	wantEvents []string
	// wantDegraded is the Degraded condition's reason.
	wantDegraded string
	// wantChild is the child afterwards: nil for none.
	wantChild *unstructured.Unstructured
}

// monitoringChild is a kind of Prometheus Operator child as the fake
// client serves it.
type monitoringChild struct {
	// kind is the word of the fake's actions, as in "create servicemonitor".
	kind string
	gvr  schema.GroupVersionResource
	// stored is where the fake keeps the kind's objects.
	stored func(c *fakeClient) map[string]*unstructured.Unstructured
}

var (
	serviceMonitorKind = monitoringChild{"servicemonitor", memcached.ServiceMonitorGVR,
		func(c *fakeClient) map[string]*unstructured.Unstructured { return c.serviceMonitors }}
	prometheusRuleKind = monitoringChild{"prometheusrule", memcached.PrometheusRuleGVR,
		func(c *fakeClient) map[string]*unstructured.Unstructured { return c.prometheusRules }}
)

// run runs each case on a fixture of its Memcached, named example in
// namespace test, with its Deployment, Service and one ready pod.
func (k monitoringChild) run(t *testing.T, tests []monitoringChildCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{
				tt.m, memcachedtest.OwnedDeployment(tt.m, 1), memcachedtest.OwnedService(memcachedtest.WithMonitoring(tt.m, tt.metricsPort)),
				memcachedtest.NewPod(tt.m, "example-a", corev1.PodRunning, true),
			}
			if tt.child != nil {
				objs = append(objs, tt.child)
			}
			f := newFixture(t, objs...)
			f.client.monitoringServed = tt.served
			if tt.failOn != "" {
				f.client.failOn[tt.failOn] = tt.failWith
				if tt.failWith == nil {
					f.client.failOn[tt.failOn] = apierrors.NewForbidden(k.gvr.GroupResource(), "example", nil)
				}
			}

			err := f.handle(tt.m, false)

			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Fatalf("Handle: got %v, want %q", err, tt.wantErr)
			}
			var actions []string
			for _, a := range f.client.actions {
				if strings.Contains(a, k.kind) || strings.HasPrefix(a, "patch service") || strings.HasPrefix(a, "delete service") {
					actions = append(actions, a)
				}
			}
			checkActions(t, actions, tt.wantActions)
			var events []string
			for _, e := range f.events() {
				// An Event reads "Type Reason message".
				events = append(events, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
			}
			if strings.Join(events, ",") != strings.Join(tt.wantEvents, ",") {
				t.Errorf("events: got %q, want %q", events, tt.wantEvents)
			}
			if len(f.client.statuses) == 0 {
				t.Fatal("no status written")
			}
			status := f.client.statuses[len(f.client.statuses)-1]
			if c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded); c == nil || c.Reason != tt.wantDegraded {
				t.Errorf("Degraded: got %+v, want reason %s", c, tt.wantDegraded)
			}
			got := k.stored(f.client)["test/example"]
			switch {
			case tt.wantChild == nil && got != nil:
				t.Errorf("%s: got %v, want none", k.kind, got.Object)
			case tt.wantChild != nil && (got == nil || !equality.Semantic.DeepEqual(got.Object["spec"], tt.wantChild.Object["spec"]) ||
				!equality.Semantic.DeepEqual(got.GetOwnerReferences(), tt.wantChild.GetOwnerReferences()) ||
				!maps.Equal(got.GetLabels(), tt.wantChild.GetLabels())):
				t.Errorf("%s: got %v, want %v", k.kind, got, tt.wantChild.Object)
			}
			if s := f.client.services["test/example"]; memcached.HasMetricsPort(s) != (memcached.Monitored(tt.m) || err != nil && tt.metricsPort) {
				t.Errorf("service ports %+v: want the metrics port only with monitoring, or until a failed step is retried", s.Spec.Ports)
			}
		})
	}
}
