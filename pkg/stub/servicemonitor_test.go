package stub

import (
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	serviceMonitorKind.run(t, []monitoringChildCase{
		{
			name: "created when enabled and served", m: on, served: true, metricsPort: true,
			wantActions:  []string{"read servicemonitor test/example", "create servicemonitor test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorCreated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: ownedServiceMonitor(on, nil),
		},
		{
			name: "nothing and no error when the API is not served", m: on, metricsPort: true,
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "in sync costs one read", m: on, served: true, metricsPort: true, child: defaulted,
			wantActions:  []string{"read servicemonitor test/example"},
			wantDegraded: memcached.ReasonAsExpected, wantChild: defaulted,
		},
		{
			name: "restored when edited", m: on, served: true, metricsPort: true, child: edited,
			wantActions:  []string{"read servicemonitor test/example", "patch servicemonitor test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: ownedServiceMonitor(on, nil),
		},
		{
			name: "someone else's is left alone", m: on, served: true, metricsPort: true, child: foreign,
			// ensureExists confirms a foreign object with a second read.
			wantActions:  []string{"read servicemonitor test/example", "read servicemonitor test/example"},
			wantErr:      "servicemonitor test/example already exists and is not controlled by memcached example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorNotOwned},
			wantDegraded: memcached.ReasonServiceMonitorNotOwned, wantChild: foreign,
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
			name: "deleted when monitoring is turned off, before the metrics port", m: off, served: true, metricsPort: true, child: ownedServiceMonitor(on, nil),
			wantActions:  []string{"read servicemonitor test/example", "delete servicemonitor test/example", "patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceMonitorDeleted, "Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected,
		},
		{
			name: "a refused delete keeps the metrics port, which brings the retry", m: off, served: true, metricsPort: true, child: ownedServiceMonitor(on, nil), failOn: "delete servicemonitor",
			wantActions:  []string{"read servicemonitor test/example", "delete servicemonitor test/example"},
			wantErr:      "failed to delete servicemonitor test/example",
			wantEvents:   []string{"Warning " + memcached.ReasonServiceMonitorDeleteFailed},
			wantDegraded: memcached.ReasonServiceMonitorDeleteFailed, wantChild: ownedServiceMonitor(on, nil),
		},
		{
			name: "someone else's is not deleted", m: off, served: true, metricsPort: true, child: foreign,
			wantActions:  []string{"read servicemonitor test/example", "patch service test/example"},
			wantEvents:   []string{"Normal " + ReasonServiceUpdated},
			wantDegraded: memcached.ReasonAsExpected, wantChild: foreign,
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
	})
}
