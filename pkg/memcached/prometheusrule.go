package memcached

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/example-inc/memcached-operator/deploy/monitoring"
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/ghodss/yaml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PrometheusRuleGVR is the Prometheus Operator's PrometheusRule API, which,
// like ServiceMonitorGVR, may not be served.
var PrometheusRuleGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}

// CacheRuleGroup is the group of deploy/monitoring/rules.yaml whose alerts a
// Memcached's PrometheusRule carries; its other group alerts on the operator,
// which is one for many Memcacheds and so no Memcached's to install.
const CacheRuleGroup = "memcached"

// MemcachedAlertLabel is the label that every alert of a Memcached's
// PrometheusRule carries, with the Memcached's name, for routing.
const MemcachedAlertLabel = "memcached"

// RuleGroup and Rule are the part of a Prometheus rule file, and of a
// PrometheusRule's spec, that rules.yaml uses.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting rule of a RuleGroup.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// cacheRules is rules.yaml's CacheRuleGroup, read once; cacheRulesErr says
// why it could not be, which every NewPrometheusRule then returns
// (TestCacheRulesLoad keeps it nil).
var cacheRules, cacheRulesErr = loadCacheRules(monitoring.Rules)

// loadCacheRules returns the CacheRuleGroup of the rule file b.
func loadCacheRules(b []byte) (RuleGroup, error) {
	var file struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		return RuleGroup{}, fmt.Errorf("failed to read deploy/monitoring/rules.yaml: %v", err)
	}
	for _, g := range file.Groups {
		if g.Name == CacheRuleGroup {
			return g, nil
		}
	}
	return RuleGroup{}, fmt.Errorf("deploy/monitoring/rules.yaml has no group %s", CacheRuleGroup)
}

// sidecarSelector matches the start of a vector selector of a sidecar series
// with its brace, and the closing brace of an empty one: rules.yaml writes
// every selector of CacheRuleGroup with braces, so that scoping it needs no
// PromQL parser (TestScopedRulesSelectOnlyTheMemcachedsPods holds it to that).
var sidecarSelector = regexp.MustCompile(`\bmemcached_[a-z0-9_]+\{(\s*\})?`)

// PodMatchers returns the PromQL label matchers of the series of m's pods:
// those of m's namespace whose MemcachedSeriesLabel is m's name. It selects
// no series by the pod's name: the API server keeps 58 characters of a
// pod's generated name before its random suffix, and the ReplicaSet's name
// before them is m's name, a dash and the template's hash, so a name of 47
// characters or more loses the dashes or its own end, and the pods of two
// Memcacheds whose names share their first 58 characters are named alike.
func PodMatchers(m *v1alpha1.Memcached) string {
	return fmt.Sprintf(`namespace=%q,%s=%q`, m.Namespace, MemcachedSeriesLabel, m.Name)
}

// scopeExpr returns expr with matchers added to each of its sidecar series'
// selectors.
func scopeExpr(expr, matchers string) string {
	return sidecarSelector.ReplaceAllStringFunc(expr, func(s string) string {
		if s[len(s)-1] == '}' {
			return s[:len(s)-len(sidecarSelector.FindStringSubmatch(s)[1])] + matchers + "}"
		}
		return s + matchers + ","
	})
}

// prometheusRuleSpec is the spec of m's PrometheusRule: rules.yaml's
// CacheRuleGroup with every selector narrowed to m's pods, so that m's
// alerts are about m alone wherever Prometheus loads them, and the label
// MemcachedAlertLabel on every alert.
func prometheusRuleSpec(m *v1alpha1.Memcached) (map[string]interface{}, error) {
	if cacheRulesErr != nil {
		return nil, cacheRulesErr
	}
	matchers := PodMatchers(m)
	group := RuleGroup{Name: cacheRules.Name}
	for _, r := range cacheRules.Rules {
		labels := map[string]string{MemcachedAlertLabel: m.Name}
		for k, v := range r.Labels {
			labels[k] = v
		}
		r.Expr, r.Labels = scopeExpr(r.Expr, matchers), labels
		group.Rules = append(group.Rules, r)
	}
	spec := struct {
		Groups []RuleGroup `json:"groups"`
	}{[]RuleGroup{group}}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
}

// NewPrometheusRule returns m's PrometheusRule, unstructured as
// NewServiceMonitor's ServiceMonitor, with the labels of monitoringMeta.
func NewPrometheusRule(m *v1alpha1.Memcached) (*unstructured.Unstructured, error) {
	spec, err := prometheusRuleSpec(m)
	if err != nil {
		return nil, err
	}
	meta := monitoringMeta(m)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": PrometheusRuleGVR.GroupVersion().String(),
		"kind":       "PrometheusRule",
		"metadata":   content,
		"spec":       spec,
	}}, nil
}

// Alerted reports whether m asks for its PrometheusRule.
func Alerted(m *v1alpha1.Memcached) bool {
	return Monitored(m) && m.Spec.Monitoring.PrometheusRule
}

// SetLabelsAnnotation lists, sorted and comma-separated, the keys of
// spec.monitoring.labels that the operator set on a ServiceMonitor or
// PrometheusRule, so that it takes off a label the spec no longer has, and
// only such a label: one that someone else added stays (see SetLabels).
const SetLabelsAnnotation = "cache.example.com/set-labels"

// SetLabels returns the keys that o's SetLabelsAnnotation lists.
func SetLabels(o metav1.Object) []string {
	v := o.GetAnnotations()[SetLabelsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// monitoringMeta is the metadata of m's ServiceMonitor and PrometheusRule:
// that of every child, with spec.monitoring.labels added and listed in
// SetLabelsAnnotation. The operator's own labels win over the same keys
// there, which ValidateSpec refuses anyway.
func monitoringMeta(m *v1alpha1.Memcached) metav1.ObjectMeta {
	meta := childMeta(m)
	if m.Spec.Monitoring == nil || len(m.Spec.Monitoring.Labels) == 0 {
		return meta
	}
	labels := make(map[string]string, len(meta.Labels)+len(m.Spec.Monitoring.Labels))
	keys := make([]string, 0, len(m.Spec.Monitoring.Labels))
	for k, v := range m.Spec.Monitoring.Labels {
		labels[k] = v
		keys = append(keys, k)
	}
	for k, v := range meta.Labels {
		labels[k] = v
	}
	sort.Strings(keys)
	meta.Labels = labels
	meta.Annotations = map[string]string{SetLabelsAnnotation: strings.Join(keys, ",")}
	return meta
}

// The reasons below name the failed steps of the Memcached's PrometheusRule,
// as those of servicemonitor.go name its ServiceMonitor's.
const (
	// ReasonPrometheusRuleCreateFailed and the three reasons after it are
	// the same for the Memcached's PrometheusRule, which the operator
	// deletes when spec.monitoring no longer asks for it.
	ReasonPrometheusRuleCreateFailed = "PrometheusRuleCreateFailed"
	ReasonPrometheusRuleReadFailed   = "PrometheusRuleReadFailed"
	ReasonPrometheusRuleUpdateFailed = "PrometheusRuleUpdateFailed"
	ReasonPrometheusRuleDeleteFailed = "PrometheusRuleDeleteFailed"
	// ReasonPrometheusRuleNotOwned means a PrometheusRule with the
	// Memcached's name exists but another owner controls it.
	ReasonPrometheusRuleNotOwned = "PrometheusRuleNotOwned"
)
