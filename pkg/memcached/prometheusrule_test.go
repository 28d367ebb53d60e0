package memcached_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/ghodss/yaml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScopeExpr(t *testing.T) {
	const scope = `namespace="shop",memcached="cache"`
	tests := []struct {
		name, in, want string
	}{
		{"empty braces", `memcached_up{} == 0`, `memcached_up{` + scope + `} == 0`},
		{"empty braces with a space", `memcached_up{ } == 0`, `memcached_up{` + scope + `} == 0`},
		{"matchers", `rate(memcached_commands_total{command="get"}[5m])`, `rate(memcached_commands_total{` + scope + `,command="get"}[5m])`},
		{"two selectors", `memcached_current_connections{} / memcached_max_connections{}`,
			`memcached_current_connections{` + scope + `} / memcached_max_connections{` + scope + `}`},
		{"a label named in by is no selector", `sum by (namespace, pod) (memcached_up{})`, `sum by (namespace, pod) (memcached_up{` + scope + `})`},
		{"other series stay", `up{job="x"} == 0`, `up{job="x"} == 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.ScopeExpr(tt.in, scope); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// longName is a Memcached name of 63 characters, the most the CRD accepts:
// its pods' names hold its first 58 characters and no more.
const longName = "sessions-of-the-checkout-service-in-eu-west-1-behind-the-proxy1"

func TestPodMatchers(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a short name", "cache", `namespace="test",memcached="cache"`},
		{"a name with a dot", "my.cache", `namespace="test",memcached="my.cache"`},
		{"a name of 63 characters", longName, `namespace="test",memcached="` + longName + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.PodMatchers(memcachedtest.NewMemcached(tt.in, 1)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCacheRulesLoad checks that the operator reads rules.yaml's memcached
// group, with the alerts that the README and the tests name, and that the
// group names no series of the operator, which scoping to pods would empty.
func TestCacheRulesLoad(t *testing.T) {
	g, err := memcached.CacheRules()
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, r := range g.Rules {
		alerts = append(alerts, r.Alert)
		if strings.Contains(r.Expr, "memcached_operator_") {
			t.Errorf("alert %s names a series of the operator: %s", r.Alert, r.Expr)
		}
		if r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("alert %+v: want an expression, a severity and a summary", r)
		}
	}
	for _, want := range []string{"MemcachedDown", "MemcachedHitRatioLow", "MemcachedEvictions", "MemcachedConnectionsNearLimit",
		"MemcachedRejectedConnections", "MemcachedListenDisabled", "MemcachedCertificateExpiringSoon", "MemcachedCertificateRefreshFailing"} {
		if !strings.Contains(","+strings.Join(alerts, ",")+",", ","+want+",") {
			t.Errorf("alerts %v: no %s", alerts, want)
		}
	}
}

// TestScopedRulesSelectOnlyTheMemcachedsPods checks every alert of a
// Memcached's PrometheusRule: each sidecar series it names is selected by
// the Memcached's namespace and pods, which holds rules.yaml to writing
// every selector with braces, and it carries the memcached label.
func TestScopedRulesSelectOnlyTheMemcachedsPods(t *testing.T) {
	m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 2), true)
	m.Spec.Monitoring.PrometheusRule = true
	m.Spec.Monitoring.Labels = map[string]string{"release": "kube-prometheus-stack"}
	r, err := memcached.NewPrometheusRule(m)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetKind() != "PrometheusRule" || r.GetAPIVersion() != "monitoring.coreos.com/v1" || r.GetNamespace() != m.Namespace || r.GetName() != m.Name {
		t.Errorf("got %s %s %s/%s, want monitoring.coreos.com/v1 PrometheusRule test/example", r.GetAPIVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
	}
	if !metav1.IsControlledBy(r, m) || len(r.GetOwnerReferences()) != 1 || !*r.GetOwnerReferences()[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the memcached as controller, blocking its deletion", r.GetOwnerReferences())
	}
	wantLabels := map[string]string{"app": "memcached", "memcached_cr": "example", "release": "kube-prometheus-stack"}
	if !maps.Equal(r.GetLabels(), wantLabels) {
		t.Errorf("labels %v, want %v", r.GetLabels(), wantLabels)
	}

	b, err := json.Marshal(r.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct{ Groups []memcached.RuleGroup }
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	source, _ := memcached.CacheRules()
	if len(spec.Groups) != 1 || len(spec.Groups[0].Rules) != len(source.Rules) {
		t.Fatalf("groups %+v, want one with the %d rules of rules.yaml's group %s", spec.Groups, len(source.Rules), memcached.CacheRuleGroup)
	}
	name := regexp.MustCompile(`\bmemcached_[a-z0-9_]+`)
	scoped := regexp.MustCompile(`\bmemcached_[a-z0-9_]+\{` + regexp.QuoteMeta(memcached.PodMatchers(m)) + `[,}]`)
	for i, rule := range spec.Groups[0].Rules {
		names, selected := len(name.FindAllString(rule.Expr, -1)), len(scoped.FindAllString(rule.Expr, -1))
		if names == 0 || names != selected {
			t.Errorf("alert %s: %d of its %d sidecar series are selected by the memcached's pods: %s", rule.Alert, selected, names, rule.Expr)
		}
		if rule.Labels[memcached.MemcachedAlertLabel] != m.Name || rule.Labels["severity"] != source.Rules[i].Labels["severity"] {
			t.Errorf("alert %s labels %v, want rules.yaml's and memcached=%s", rule.Alert, rule.Labels, m.Name)
		}
		if rule.Alert != source.Rules[i].Alert || rule.For != source.Rules[i].For || !maps.Equal(rule.Annotations, source.Rules[i].Annotations) {
			t.Errorf("alert %+v differs from rules.yaml's %+v in more than its selectors", rule, source.Rules[i])
		}
	}
}

// TestMonitoringLabelsAndAlertsRollNoPod checks that spec.monitoring.labels
// and prometheusRule leave the pod template alone: they are the Prometheus
// Operator objects' business, not the pods'.
func TestMonitoringLabelsAndAlertsRollNoPod(t *testing.T) {
	m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached("example", 2), true)
	want := memcachedtest.ManifestHash(t, m, memcachedtest.Image)
	m.Spec.Monitoring.PrometheusRule = true
	m.Spec.Monitoring.Labels = map[string]string{"release": "kube-prometheus-stack"}
	if got := memcachedtest.ManifestHash(t, m, memcachedtest.Image); got != want {
		t.Errorf("hash %s, want %s as without them", got, want)
	}
}

// scopedRulesFiles are where test/monitoring's TestScopedRulesFireForTheirMemcachedOnly
// reads the rules of the PrometheusRules of two Memcacheds in namespace shop,
// cache and one of the longest name, to run rules_test.yaml's cases on them.
var scopedRulesFiles = map[string]string{
	"cache":  "testdata/prometheusrule-shop-cache.yaml",
	longName: "testdata/prometheusrule-shop-long.yaml",
}

// TestScopedRulesFile checks that each of scopedRulesFiles is the spec of
// the PrometheusRule of its Memcached in namespace shop, the namespace that
// rules_test.yaml's series carry, and rewrites them with -update.
func TestScopedRulesFile(t *testing.T) {
	for name, file := range scopedRulesFiles {
		m := memcachedtest.WithMonitoring(memcachedtest.NewMemcached(name, 2), true)
		m.Namespace = "shop"
		m.Spec.Monitoring.PrometheusRule = true
		r, err := memcached.NewPrometheusRule(m)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := yaml.Marshal(r.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		b := append([]byte("# The spec of the PrometheusRule of Memcached shop/"+name+", a rule file: generated by\n"+
			"# go test ./pkg/memcached -run TestScopedRulesFile -update. Do not edit.\n"), spec...)
		if *update {
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, b) {
			t.Errorf("%s is stale: run go test ./pkg/memcached -run TestScopedRulesFile -update", file)
		}
	}
}
