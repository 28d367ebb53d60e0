package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// PrometheusRuleManifest is a PrometheusRule of deploy/monitoring generated from
// rules.yaml, to be installed with kubectl apply where a Prometheus Operator
// selects rules.
type PrometheusRuleManifest struct {
	// File is its name in deploy/monitoring.
	File string
	// Name is the PrometheusRule's name.
	Name string
	// Groups are the names of the groups of rules.yaml it carries, in its order.
	Groups []string
	// About is the comment that opens the file: what it is for.
	About string
}

// PrometheusRuleManifests are the PrometheusRules that `make generate` writes
// and `make verify` checks.
var PrometheusRuleManifests = []PrometheusRuleManifest{
	{
		File:   "operator-prometheusrule.yaml",
		Name:   "memcached-operator",
		Groups: []string{"memcached-operator"},
		About: "The operator's own alerts, rules.yaml's group memcached-operator. The caches'\n" +
			"alerts come from the PrometheusRule the operator creates for each Memcached with\n" +
			"spec.monitoring.prometheusRule.",
	},
	{
		File:   "all-prometheusrule.yaml",
		Name:   "memcached",
		Groups: []string{"memcached", "memcached-operator"},
		About: "Every alert of rules.yaml, those of every cache at once and the operator's:\n" +
			"install it instead of operator-prometheusrule.yaml, and leave the Memcacheds'\n" +
			"spec.monitoring.prometheusRule off, or the cache alerts come twice.",
	},
}

// groupStart is the line that starts a group of rules.yaml's groups.
var groupStart = regexp.MustCompile(`^  - name: (\S+)$`)

// Render returns m's manifest: a PrometheusRule whose spec.groups are the text of
// m.Groups in rules, a Prometheus rule file whose groups each start at a line
// "  - name: <group>" and end where the next starts, so that their comments and
// layout stay as written.
func (m PrometheusRuleManifest) Render(rules []byte) ([]byte, error) {
	groups := map[string][]string{}
	var current string
	for _, line := range strings.SplitAfter(string(rules), "\n") {
		if g := groupStart.FindStringSubmatch(strings.TrimSuffix(line, "\n")); g != nil {
			current = g[1]
			if _, dup := groups[current]; dup {
				return nil, fmt.Errorf("rules.yaml: group %s comes twice", current)
			}
		}
		if current != "" {
			groups[current] = append(groups[current], line)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Code generated from rules.yaml by test/cmd/monitoring-gen (make generate). DO NOT EDIT.\n#\n")
	for _, line := range strings.Split(m.About, "\n") {
		fmt.Fprintf(&b, "# %s\n", line)
	}
	fmt.Fprintf(&b, "#\n# kubectl apply -n <operator namespace> -f deploy/monitoring/%s, then give it the\n", m.File)
	fmt.Fprintf(&b, "# label your Prometheus's ruleSelector asks for (kube-prometheus-stack: release=<release>).\n")
	fmt.Fprintf(&b, "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: %s\nspec:\n  groups:\n", m.Name)
	for i, name := range m.Groups {
		lines, ok := groups[name]
		if !ok {
			return nil, fmt.Errorf("rules.yaml has no group %s", name)
		}
		text := strings.TrimRight(strings.Join(lines, ""), "\n") + "\n"
		if i > 0 {
			b.WriteString("\n")
		}
		for _, line := range strings.SplitAfter(text, "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
	}
	return b.Bytes(), nil
}

// GeneratePrometheusRules renders every manifest of PrometheusRuleManifests from
// the rules.yaml of dir, deploy/monitoring, and writes them there or, with
// verify, writes nothing and fails when a committed one differs.
func GeneratePrometheusRules(dir string, verify bool) error {
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		return err
	}
	var stale []string
	for _, m := range PrometheusRuleManifests {
		want, err := m.Render(rules)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, m.File)
		if !verify {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				return err
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			stale = append(stale, path)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s stale or missing: run make generate and commit the result", strings.Join(stale, ", "))
	}
	return nil
}
