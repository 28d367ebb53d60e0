package stub

import (
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
)

// ownedServiceMonitor is m's ServiceMonitor as the operator creates it,
// changed by edit.
func ownedServiceMonitor(m *v1alpha1.Memcached, edit func(spec map[string]interface{})) *unstructured.Unstructured {
	s, err := memcached.NewServiceMonitor(m)
	if err != nil {
		panic(err)
	}
	s.SetUID("uid-servicemonitor")
	if edit != nil {
		edit(s.Object["spec"].(map[string]interface{}))
	}
	return s
}

func TestEnsuresTheServiceMonitor(t *testing.T) {
	base := memcachedtest.NewMemcached("example", 1)
	on, off := memcachedtest.WithMonitoring(base, true), memcachedtest.WithMonitoring(base, false)
	foreign := ownedServiceMonitor(on, nil)
	foreign.SetOwnerReferences(nil)
	// A field the API server or a newer CRD defaults is no edit.
	defaulted := ownedServiceMonitor(on, func(spec map[string]interface{}) { memcachedtest.FirstEndpoint(spec)["scheme"] = "http" })
	edited := ownedServiceMonitor(on, func(spec map[string]interface{}) { memcachedtest.FirstEndpoint(spec)["port"] = "web" })
	refused := apierrors.NewForbidden(memcached.ServiceMonitorGVR.GroupResource(), "example", nil)
	tests := []struct {
		name   string
		m      *v1alpha1.Memcached
		served bool
		// metricsPort gives the Service the metrics port, as a Memcached
		// with monitoring has it.
		metricsPort bool
		sm          *unstructured.Unstructured
		failOn      string
		// failWith is failOn's error, refused when nil.
		failWith error
		// wantActions are the ServiceMonitor calls and the Service's writes.
		wantActions []string
		wantErr     string
		// wantEvents are the Events' types and reasons.
		wantEvents []string
		// wantDegraded is the Degraded condition's reason.
		wantDegraded string
		// wantSM is the ServiceMonitor afterwards: nil for none.
		wantSM *unstructured.Unstructured
	}{
		{
			name: "created when enabled and served", m: on, served: true, metricsPort: true,
			wantActions:  []string{"read servicemonitor test/example", "create servicemonitor test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated},
			wantDegraded: memcached.ReasonAsExpected, wantSM: ownedServiceMonitor(on, nil),
		},
		{
			name: "nothing and no error when the API is not served", m: on, metricsPort: true,
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "in sync costs one read", m: on, served: true, metricsPort: true, sm: defaulted,
			wantActions:  []string{"read servicemonitor test/example"},
			wantDegraded: memcached.ReasonAsExpected, wantSM: defaulted,
		},
		{
			name: "restored when edited", m: on, served: true, metricsPort: true, sm: edited,
			wantActions:  []string{"read servicemonitor test/example", "patch servicemonitor test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantSM: ownedServiceMonitor(on, nil),
		},
		{
			name: "someone else's is left alone", m: on, served: true, metricsPort: true, sm: foreign,
			// ensureExists confirms a foreign object with a second read.
			wantActions:  []string{"read servicemonitor test/example", "read servicemonitor test/example"},
			wantErr:      "servicemonitor test/example already exists and is not controlled by memcached example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorNotOwned},
			wantDegraded: memcached.ReasonServiceMonitorNotOwned, wantSM: foreign,
		},
		{
			name: "create refused", m: on, served: true, metricsPort: true, failOn: "create servicemonitor",
			wantActions:  []string{"read servicemonitor test/example", "create servicemonitor test/example"},
			wantErr:      "failed to create servicemonitor test/example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorCreateFailed},
			wantDegraded: memcached.ReasonServiceMonitorCreateFailed,
		},
		{
			name: "no error when the CRD went since discovery said it was served", m: on, served: true, metricsPort: true,
			failOn: "create servicemonitor", failWith: apierrors.NewNotFound(memcached.ServiceMonitorGVR.GroupResource(), ""),
			wantActions:  []string{"read servicemonitor test/example", "create servicemonitor test/example"},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "read refused", m: on, served: true, metricsPort: true, failOn: "read servicemonitor",
			wantActions:  []string{"read servicemonitor test/example"},
			wantErr:      "failed to get servicemonitor test/example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorReadFailed},
			wantDegraded: memcached.ReasonServiceMonitorReadFailed,
		},
		{
			name: "deleted when monitoring is turned off, before the metrics port", m: off, served: true, metricsPort: true, sm: ownedServiceMonitor(on, nil),
			wantActions:  []string{"read servicemonitor test/example", "delete servicemonitor test/example", "patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorDeleted, "Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "a refused delete keeps the metrics port, which brings the retry", m: off, served: true, metricsPort: true, sm: ownedServiceMonitor(on, nil), failOn: "delete servicemonitor",
			wantActions:  []string{"read servicemonitor test/example", "delete servicemonitor test/example"},
			wantErr:      "failed to delete servicemonitor test/example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorDeleteFailed},
			wantDegraded: memcached.ReasonServiceMonitorDeleteFailed, wantSM: ownedServiceMonitor(on, nil),
		},
		{
			name: "someone else's is not deleted", m: off, served: true, metricsPort: true, sm: foreign,
			wantActions:  []string{"read servicemonitor test/example", "patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantSM: foreign,
		},
		{
			name: "monitoring off while the API is not served", m: off, metricsPort: true,
			wantActions:  []string{"patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "a memcached without monitoring costs no request", m: off, served: true,
			wantDegraded: memcached.ReasonAsExpected,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{
				tt.m, memcachedtest.OwnedDeployment(tt.m, 1), memcachedtest.OwnedService(memcachedtest.WithMonitoring(tt.m, tt.metricsPort)),
				memcachedtest.NewPod(tt.m, "example-a", corev1.PodRunning, true),
			}
			if tt.sm != nil {
				objs = append(objs, tt.sm)
			}
			f := newFixture(t, objs...)
			f.client.monitoringServed = tt.served
			if tt.failOn != "" {
				f.client.failOn[tt.failOn] = refused
				if tt.failWith != nil {
					f.client.failOn[tt.failOn] = tt.failWith
				}
			}

			err := f.handle(tt.m, false)

			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Fatalf("Handle: got %v, want %q", err, tt.wantErr)
			}
			var actions []string
			for _, a := range f.client.actions {
				if strings.Contains(a, "servicemonitor") || strings.HasPrefix(a, "patch service") || strings.HasPrefix(a, "delete service") {
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
			got := f.client.serviceMonitors["test/example"]
			switch {
			case tt.wantSM == nil && got != nil:
				t.Errorf("servicemonitor: got %v, want none", got.Object)
			case tt.wantSM != nil && (got == nil || !equality.Semantic.DeepEqual(got.Object["spec"], tt.wantSM.Object["spec"]) ||
				!equality.Semantic.DeepEqual(got.GetOwnerReferences(), tt.wantSM.GetOwnerReferences())):
				t.Errorf("servicemonitor: got %v, want %v", got, tt.wantSM.Object)
			}
			if s := f.client.services["test/example"]; memcached.HasMetricsPort(s) != (memcached.Monitored(tt.m) || err != nil && tt.metricsPort) {
				t.Errorf("service ports %+v: want the metrics port only with monitoring, or until a failed step is retried", s.Spec.Ports)
			}
		})
	}
}
