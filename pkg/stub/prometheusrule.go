package stub

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	// ReasonPrometheusRuleCreated, ReasonPrometheusRuleUpdated and
	// ReasonPrometheusRuleDeleted are the reasons of the Normal Events
	// recorded when the operator creates a Memcached's PrometheusRule,
	// restores its rules, or deletes it once spec.monitoring no longer asks
	// for it.
	ReasonPrometheusRuleCreated = "PrometheusRuleCreated"
	ReasonPrometheusRuleUpdated = "PrometheusRuleUpdated"
	ReasonPrometheusRuleDeleted = "PrometheusRuleDeleted"
)

// prometheusRuleChild is the PrometheusRule of a Memcached with monitoring
// and spec.monitoring.prometheusRule: the alerts of its pods (see
// memcached.NewPrometheusRule). It is the ServiceMonitor's twin: restored
// when someone changed its rules or labels, read from the API server, and
// nothing at all while the API is not served.
//
// With monitoring on and prometheusRule off it is looked for, one GET per
// reconcile as the ServiceMonitor's, and deleted. With monitoring off,
// serviceChild removes it with the ServiceMonitor before it takes the
// metrics port off the Service, so that Memcacheds without monitoring cost
// no request.
var prometheusRuleChild = &ownedChild[*unstructured.Unstructured]{
	childKind: childKind{
		kind:         "prometheusrule",
		readFailed:   memcached.ReasonPrometheusRuleReadFailed,
		createFailed: memcached.ReasonPrometheusRuleCreateFailed,
		notOwned:     memcached.ReasonPrometheusRuleNotOwned,
		updateFailed: memcached.ReasonPrometheusRuleUpdateFailed,
		deleteFailed: memcached.ReasonPrometheusRuleDeleteFailed,
	},
	api: &kube.Kind{
		Resource: memcached.PrometheusRuleGVR,
		New:      func() kube.Object { return &unstructured.Unstructured{} },
		Optional: true,
	},
	wanted:         memcached.Alerted,
	removeUnwanted: memcached.Monitored,
	want: func(_ *Handler, m *v1alpha1.Memcached) (*unstructured.Unstructured, error) {
		return memcached.NewPrometheusRule(m)
	},
	holds: func(got, want *unstructured.Unstructured) bool {
		return holds(got.Object["spec"], want.Object["spec"])
	},
	restore: func(_, want *unstructured.Unstructured) map[string]interface{} {
		return map[string]interface{}{"/spec": want.Object["spec"]}
	},
	restoreFailed: "failed to restore prometheusrule %s/%s: %w",
	created:       event{ReasonPrometheusRuleCreated, "Created prometheusrule %s with the alerts of the memcached's pods"},
	restored:      event{ReasonPrometheusRuleUpdated, "Restored the rules of prometheusrule %s"},
	deleted:       event{ReasonPrometheusRuleDeleted, "Deleted prometheusrule %s: spec.monitoring no longer asks for it"},
}
