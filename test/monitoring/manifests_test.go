package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestPrometheusRuleManifests checks each PrometheusRule of
// PrometheusRuleManifests: that the committed file is what `make generate`
// writes from rules.yaml; that its spec.groups are rules.yaml's groups it names,
// rule for rule; that promtool checks them as a rule file; and that
// rules_test.yaml's cases of its alerts pass on them alone. What a Prometheus
// Operator does with it, whether its ruleSelector picks it up, only a cluster
// with one shows.
func TestPrometheusRuleManifests(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var source struct{ Groups []map[string]interface{} }
	if err := yaml.Unmarshal(rules, &source); err != nil {
		t.Fatal(err)
	}
	for _, m := range PrometheusRuleManifests {
		t.Run(m.File, func(t *testing.T) {
			t.Parallel()
			got, err := os.ReadFile(filepath.Join(dir, m.File))
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.Render(rules)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("deploy/monitoring/%s is stale: run make generate (tmp/codegen/update-monitoring.sh) and commit the result", m.File)
			}
			var rule struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct{ Name string }
				Spec       struct{ Groups []map[string]interface{} }
			}
			if err := yaml.Unmarshal(got, &rule); err != nil {
				t.Fatal(err)
			}
			if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Name != m.Name {
				t.Errorf("%s %s named %q, want monitoring.coreos.com/v1 PrometheusRule %q", rule.APIVersion, rule.Kind, rule.Metadata.Name, m.Name)
			}
			var groups []map[string]interface{}
			for _, name := range m.Groups {
				i := slices.IndexFunc(source.Groups, func(g map[string]interface{}) bool { return g["name"] == name })
				if i < 0 {
					t.Fatalf("rules.yaml has no group %s", name)
				}
				groups = append(groups, source.Groups[i])
			}
			if !reflect.DeepEqual(rule.Spec.Groups, groups) {
				t.Errorf("spec.groups:\n%v\nwant rules.yaml's %v:\n%v", rule.Spec.Groups, m.Groups, groups)
			}

			// spec.groups as a rule file, with rules_test.yaml's cases of its alerts.
			extracted, err := yaml.Marshal(map[string]interface{}{"groups": rule.Spec.Groups})
			if err != nil {
				t.Fatal(err)
			}
			alerts := map[string]bool{}
			for _, g := range groups {
				for _, r := range g["rules"].([]interface{}) {
					alerts[r.(map[string]interface{})["alert"].(string)] = true
				}
			}
			tests := ruleTestsOf(t, nil, alerts, nil)
			tmp := t.TempDir()
			for name, content := range map[string][]byte{"rules.yaml": extracted, "tests.yaml": tests} {
				if err := os.WriteFile(filepath.Join(tmp, name), content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := run(t, tmp, "check", "rules", "rules.yaml")
			if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)); !strings.Contains(out, want) {
				t.Errorf("promtool check rules: %s; want %q", out, want)
			}
			t.Log(out)
			t.Log(run(t, tmp, "test", "rules", "tests.yaml"))
		})
	}
}

// ruleTestsOf returns rules_test.yaml, its text changed by source when not nil,
// with the cases of alerts alone, each changed by edit when not nil, on the rule
// file rules.yaml; it fails the test when an alert has no case.
func ruleTestsOf(t *testing.T, source func([]byte) []byte, alerts map[string]bool, edit func(tc map[string]interface{})) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if source != nil {
		b = source(b)
	}
	var file map[string]interface{}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var kept []interface{}
	tested := map[string]bool{}
	for _, tc := range file["tests"].([]interface{}) {
		tc := tc.(map[string]interface{})
		checks := tc["alert_rule_test"].([]interface{})
		if !alerts[checks[0].(map[string]interface{})["alertname"].(string)] {
			continue
		}
		if edit != nil {
			edit(tc)
		}
		for _, c := range checks {
			tested[c.(map[string]interface{})["alertname"].(string)] = true
		}
		kept = append(kept, tc)
	}
	for a := range alerts {
		if !tested[a] {
			t.Errorf("rules_test.yaml has no case of %s", a)
		}
	}
	file["tests"] = kept
	file["rule_files"] = []string{"rules.yaml"}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOperatorPodMonitorSelectsTheOperator checks operator-podmonitor.yaml
// against deploy/operator.yaml: its selector matches the operator's pod template
// and each endpoint's port is a port of the operator's container, the one its
// --metrics-addr serves. That the Prometheus Operator selects it and scrapes the
// pods, which needs its podMonitorSelector's label and a running operator, only
// a cluster with one shows.
func TestOperatorPodMonitorSelectsTheOperator(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(dir, "operator-podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			NamespaceSelector   map[string]interface{} `json:"namespaceSelector"`
			PodMetricsEndpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &pm, yaml.DisallowUnknownFields); err != nil {
		t.Fatal(err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" || pm.Metadata.Name != "memcached-operator" {
		t.Errorf("%s %s named %q, want monitoring.coreos.com/v1 PodMonitor memcached-operator", pm.APIVersion, pm.Kind, pm.Metadata.Name)
	}
	b, err = os.ReadFile(filepath.Join(dir, "..", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 || !labels.SelectorFromSet(pm.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select deploy/operator.yaml's pods, labelled %v", pm.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	// Without a namespaceSelector, a PodMonitor selects pods of its own namespace,
	// the operator's when applied there as docs/monitoring.md says.
	if pm.Spec.NamespaceSelector != nil {
		t.Errorf("namespaceSelector %v: want none, the PodMonitor's namespace", pm.Spec.NamespaceSelector)
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		t.Fatal("no podMetricsEndpoints")
	}
	var metricsAddr string
	ports := map[string]int32{}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != d.Name {
			continue
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
				metricsAddr = v
			}
		}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
	}
	for _, e := range pm.Spec.PodMetricsEndpoints {
		port, ok := ports[e.Port]
		if !ok {
			t.Errorf("endpoint port %q: deploy/operator.yaml's container %s has ports %v", e.Port, d.Name, ports)
		} else if !strings.HasSuffix(metricsAddr, fmt.Sprintf(":%d", port)) {
			t.Errorf("endpoint port %q is %d, but the operator serves its metrics on --metrics-addr=%q", e.Port, port, metricsAddr)
		}
		// The operator serves /metrics, the Prometheus Operator's default path.
		if e.Path != "" && e.Path != "/metrics" {
			t.Errorf("endpoint path %q, want /metrics", e.Path)
		}
	}
}
