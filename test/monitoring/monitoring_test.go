// Package monitoring checks deploy/monitoring offline: the alerting rules with
// promtool's own unit tests, and every PromQL expression of the rules, the Grafana
// dashboards and the console page, which promtool must parse and which may name only
// series that the sidecar (pkg/sidecar/METRICS.md) or the operator (pkg/metrics)
// export. promtool is Debian's prometheus package, Prometheus 2.42, the Prometheus
// of the real-node suite; test/scripts/install-deps.sh installs it.
//
// The expressions are parsed by promtool, Prometheus's own parser at the version the
// real-node suite runs, rather than by github.com/prometheus/prometheus/promql/parser
// in this module: its v0.313.2 and later (the releases the module index lists)
// require newer genproto modules than this module builds with, which would split the
// builds that test/dep's TestToolModulesShareBuilds keeps shared. The names are read
// with metricNames, a scan of PromQL's tokens that TestMetricNames checks.
package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/yaml"
)

// dir is deploy/monitoring.
const dir = "../../deploy/monitoring"

// promtool returns the path of promtool, failing the test without it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: run test/scripts/install-deps.sh test (Debian's prometheus package): %v", err)
	}
	return path
}

// run runs promtool with args in folder, failing the test with its output.
func run(t *testing.T, folder string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = folder
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleFile is the part of a Prometheus rule file that the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRules runs `promtool check rules` and `promtool test rules` on rules.yaml, and
// checks that every alert has a test case that fires it and one in which it does not
// fire, and that the alerts the README lists are there.
func TestRules(t *testing.T) {
	t.Parallel()
	t.Log(run(t, dir, "check", "rules", "rules.yaml"))
	t.Log(run(t, dir, "test", "rules", "rules_test.yaml"))

	b, err := os.ReadFile(filepath.Join(dir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: rules_test.yaml has a case that fires it: %v, one that does not: %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for _, want := range []string{"MemcachedDown", "MemcachedHitRatioLow", "MemcachedEvictions", "MemcachedConnectionsNearLimit",
		"MemcachedRejectedConnections", "MemcachedListenDisabled", "MemcachedCertificateExpiringSoon",
		"MemcachedCertificateRefreshFailing", "MemcachedOperatorReconcileErrors", "MemcachedOperatorNoLeader"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("rules.yaml has no alert %s", want)
		}
	}
}

// expression is one PromQL expression and where it comes from; that of a
// Grafana variable, label_values(expr, label), has the label whose values the
// variable takes.
type expression struct {
	where, expr, label string
}

// grafanaVariables returns the values the dashboards' variables take in the
// test: namespace and memcached are the Memcached's.
func grafanaVariables(namespace, memcached string) *strings.Replacer {
	return strings.NewReplacer(
		"$__rate_interval", "5m", "${__rate_interval}", "5m", "$__interval", "1m",
		"$namespace", namespace, "${namespace}", namespace, "$memcached", memcached, "${memcached}", memcached,
	)
}

// labelValues matches a Grafana variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardExpressions returns every expression of the Grafana dashboard file,
// with its variables replaced by vars, and checks that its panels and queries
// use the dashboard's datasource variable.
func dashboardExpressions(t *testing.T, file string, vars *strings.Replacer) []expression {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "dashboards", file))
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct{ Type, UID string }
	type panel struct {
		Title      string
		Type       string
		Datasource *datasource
		Targets    []struct {
			Expr       string
			Datasource *datasource
		}
		Panels []json.RawMessage
	}
	var d struct {
		UID        string
		Title      string
		Templating struct {
			List []struct {
				Name, Type string
				Query      json.RawMessage
				Datasource *datasource
			}
		}
		Panels []panel
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q: want both", file, d.UID, d.Title)
	}
	ours := func(ds *datasource) bool { return ds != nil && ds.Type == "prometheus" && ds.UID == "${datasource}" }
	var exprs []expression
	add := func(where, expr, label string) {
		e := vars.Replace(expr)
		if strings.Contains(e, "$") {
			t.Errorf("%s: %s names a variable the dashboard does not have", where, expr)
		}
		exprs = append(exprs, expression{where: where, expr: e, label: label})
	}
	hasDatasource := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			hasDatasource = v.Name == "datasource" && strings.Contains(string(v.Query), "prometheus")
		case "query":
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("%s: variable %s: %v", file, v.Name, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil || !ours(v.Datasource) {
				t.Errorf("%s: variable %s: query %q with datasource %+v, want label_values(selector, label) from ${datasource}", file, v.Name, q.Query, v.Datasource)
				continue
			}
			add(file+": variable "+v.Name, m[1], m[2])
		}
	}
	if !hasDatasource {
		t.Errorf("%s: no variable datasource of type prometheus", file)
	}
	panels := slices.Clone(d.Panels)
	for i := 0; i < len(panels); i++ {
		p := panels[i]
		for _, raw := range p.Panels {
			var nested panel
			if err := json.Unmarshal(raw, &nested); err != nil {
				t.Fatal(err)
			}
			panels = append(panels, nested)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || !ours(p.Datasource) {
			t.Errorf("%s: panel %q: %d queries, datasource %+v: want queries from ${datasource}", file, p.Title, len(p.Targets), p.Datasource)
		}
		for _, target := range p.Targets {
			if !ours(target.Datasource) {
				t.Errorf("%s: panel %q: a query's datasource is %+v, want ${datasource}", file, p.Title, target.Datasource)
			}
			add(fmt.Sprintf("%s: panel %q", file, p.Title), target.Expr, "")
		}
	}
	return exprs
}

// consoleLibraries stand in for the templates of Prometheus's prom.lib and
// menu.lib that the console calls; prom_query_drilldown queries its
// expression as the real one does.
const consoleLibraries = `{{ define "head" }}{{ end }}{{ define "tail" }}{{ end }}` +
	`{{ define "prom_right_table_head" }}{{ end }}{{ define "prom_right_table_tail" }}{{ end }}` +
	`{{ define "prom_content_head" }}{{ end }}{{ define "prom_content_tail" }}{{ end }}` +
	`{{ define "prom_query_drilldown" }}{{ with query .arg0 }}{{ . | first | value }}{{ end }}{{ end }}`

// sample is what the console's query function returns, as Prometheus's does.
type sample struct {
	Labels map[string]string
	Value  float64
}

// jsExpr matches the expr of a PromConsole.Graph, one string or a list of
// strings, whose brackets, as those of a range in a string, end no list.
var (
	jsExpr   = regexp.MustCompile(`expr:\s*("(?:[^"\\]|\\.)*"|\[(?:\s*"(?:[^"\\]|\\.)*"\s*,?)*\s*\])`)
	jsString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// consoleExpressions renders the console with params, as Prometheus would with
// its console libraries, and returns the expressions it queries while it renders
// and those of its graphs.
func consoleExpressions(t *testing.T, params map[string]string) []expression {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "consoles", "memcached.html"))
	if err != nil {
		t.Fatal(err)
	}
	where := fmt.Sprintf("consoles/memcached.html?%v", params)
	var exprs []expression
	funcs := template.FuncMap{
		"query": func(q string) []sample {
			exprs = append(exprs, expression{where: where + ": query", expr: q})
			return []sample{{Labels: map[string]string{"namespace": "shop", "pod": "cache-7d9f8b6c5-x2k4q"}, Value: 1}}
		},
		"first":       func(s []sample) sample { return s[0] },
		"value":       func(s sample) float64 { return s.Value },
		"sortByLabel": func(_ string, s []sample) []sample { return s },
		"args": func(a ...interface{}) map[string]interface{} {
			m := map[string]interface{}{}
			for i, v := range a {
				m["arg"+strconv.Itoa(i)] = v
			}
			return m
		},
	}
	tmpl, err := template.New("memcached.html").Funcs(funcs).Parse(consoleLibraries)
	if err == nil {
		_, err = tmpl.Parse(string(b))
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]interface{}{"Params": params, "Path": "memcached.html"}); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	graphs := strings.Count(out.String(), "new PromConsole.Graph(")
	found := jsExpr.FindAllStringSubmatch(out.String(), -1)
	if graphs == 0 || len(found) != graphs {
		t.Errorf("%s: %d graphs, %d expr fields: want one for each graph", where, graphs, len(found))
	}
	for _, f := range found {
		for _, s := range jsString.FindAllString(f[1], -1) {
			e, err := strconv.Unquote(s)
			if err != nil {
				t.Fatalf("%s: %s: %v", where, s, err)
			}
			exprs = append(exprs, expression{where: where + ": graph", expr: e})
		}
	}
	return exprs
}

// exportedMetrics returns the series the sidecar and the operator export: the
// metric names of pkg/sidecar/METRICS.md's tables, whose first table
// TestMetricsOfRealMemcached holds to a real scrape, and those that
// pkg/metrics/metrics.go registers, read from its source, with the _bucket,
// _sum and _count series of its histograms.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	b, err := os.ReadFile("../../pkg/sidecar/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(memcached_[a-z0-9_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	sidecar := len(names)

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../pkg/metrics/metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for i, name := range v.Names {
				if i < len(v.Values) {
					if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
			return true
		}
		parts := map[string]string{}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key := kv.Key.(*ast.Ident).Name
			switch v := kv.Value.(type) {
			case *ast.BasicLit:
				parts[key], _ = strconv.Unquote(v.Value)
			case *ast.Ident:
				parts[key] = consts[v.Name]
			}
		}
		var name []string
		for _, k := range []string{"Namespace", "Subsystem", "Name"} {
			if parts[k] != "" {
				name = append(name, parts[k])
			}
		}
		full := strings.Join(name, "_")
		names[full] = true
		if sel.Sel.Name == "HistogramOpts" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[full+s] = true
			}
		}
		return true
	})
	if sidecar < 30 || len(names)-sidecar < 10 || !names["memcached_up"] || !names["memcached_operator_leader"] {
		t.Fatalf("read %d sidecar and %d operator series, without memcached_up or memcached_operator_leader: the sources changed shape", sidecar, len(names)-sidecar)
	}
	return names
}

// TestExpressionsParseAndNameExportedMetrics gathers every expression of
// rules.yaml, both dashboards and the console page (rendered with and without
// its parameters), has promtool parse them all as the expressions of one rule
// file, and checks that each names only series that the sidecar or the operator
// export.
func TestExpressionsParseAndNameExportedMetrics(t *testing.T) {
	t.Parallel()
	var exprs []expression
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, expression{where: "rules.yaml: " + r.Alert, expr: r.Expr})
		}
	}
	vars := grafanaVariables("shop", "cache")
	exprs = append(exprs, dashboardExpressions(t, "memcached.json", vars)...)
	exprs = append(exprs, dashboardExpressions(t, "memcached-operator.json", vars)...)
	exprs = append(exprs, consoleExpressions(t, map[string]string{})...)
	exprs = append(exprs, consoleExpressions(t, map[string]string{"namespace": "shop", "memcached": "cache", "operator_namespace": "operators"})...)

	exported := exportedMetrics(t)
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{fmt.Sprintf("expression_%d", i), e.expr})
		names := metricNames(e.expr)
		if len(names) == 0 {
			t.Errorf("%s: %s names no series", e.where, e.expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %s is not a series the sidecar or the operator exports: %s", e.where, n, e.expr)
			}
		}
	}
	file := map[string]interface{}{"groups": []interface{}{map[string]interface{}{"name": "expressions", "rules": rules}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "expressions.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool(t), "check", "rules", "expressions.yaml")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		var list []string
		for i, e := range exprs {
			list = append(list, fmt.Sprintf("expression_%d: %s", i, e.where))
		}
		t.Fatalf("promtool check rules: %v\n%s\nwhere the expressions come from:\n%s", err, out, strings.Join(list, "\n"))
	}
	t.Logf("promtool parsed %d expressions", len(exprs))
}

// promqlWords are PromQL's keywords and aggregation operators: words that are
// no series even when no parenthesis follows them.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "bool": true, "offset": true, "inf": true, "nan": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

// labelLists are the keywords followed by a parenthesised list of label names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the series names that expr selects, sorted and once
// each: its identifiers that are no keyword, function, label name (inside
// braces or a label list) or part of a string, number or duration. It reads
// expressions that promtool parses; it does not check them.
func metricNames(expr string) []string {
	seen := map[string]bool{}
	braces, brackets := 0, 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '{':
			braces++
			i++
		case c == '}':
			braces--
			i++
		case c == '[':
			brackets++
			i++
		case c == ']':
			brackets--
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isWord(expr[i]) || expr[i] == '.') {
				i++
			}
		case isWord(c):
			j := i
			for j < len(expr) && (isWord(expr[j]) || expr[j] == ':') {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			switch {
			case braces > 0 || brackets > 0:
			case labelLists[word] && k < len(expr) && expr[k] == '(':
				for k < len(expr) && expr[k] != ')' {
					k++
				}
				j = k
			case promqlWords[strings.ToLower(word)]:
			case k < len(expr) && expr[k] == '(':
				// A function.
			default:
				seen[word] = true
			}
			i = j
		default:
			i++
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`memcached_up{namespace="shop"} == 0`, []string{"memcached_up"}},
		{`sum by (namespace, pod) (rate(memcached_commands_total{command="get"}[5m])) / sum without (status) (rate(memcached_commands_total[5m]))`, []string{"memcached_commands_total"}},
		{`a{x="memcached_fake{"} / on (pod) group_left (node) b offset 5m`, []string{"a", "b"}},
		{`histogram_quantile(0.99, sum(rate(x_bucket[5m])) by (le)) > 1e3 and bool y < inf`, []string{"x_bucket", "y"}},
		{`max_over_time(x[1h:5m]) - time() < 14 * 24 * 3600`, []string{"x"}},
		{`topk(3, z) or count_values("v", w)`, []string{"w", "z"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%s): got %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// TestPrometheusConfig runs `promtool check config` on prometheus.yaml, the plain
// Prometheus of the README, which also checks the rule file it loads. Debian's
// promtool, like its prometheus, is built without Kubernetes discovery, so the test
// puts a file_sd_configs entry in place of each kubernetes_sd_configs one: the rest,
// the relabelling included, is checked as written.
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(dir, "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sd := regexp.MustCompile(`(?m)^(\s*)kubernetes_sd_configs:\n\s*- role: pod\n`)
	if n := len(sd.FindAll(b, -1)); n != 2 {
		t.Fatalf("prometheus.yaml has %d kubernetes_sd_configs of role pod, want 2 (the sidecars and the operator)", n)
	}
	tmp := t.TempDir()
	config := sd.ReplaceAll(b, []byte("${1}file_sd_configs:\n${1}  - files: [targets.json]\n"))
	for name, content := range map[string][]byte{"prometheus.yaml": config, "targets.json": []byte("[]\n")} {
		if err := os.WriteFile(filepath.Join(tmp, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, tmp, "check", "config", "prometheus.yaml")
	if !strings.Contains(out, "rules found") {
		t.Errorf("promtool check config did not check rules.yaml:\n%s", out)
	}
	t.Log(out)
}

// longName is a Memcached name of 63 characters, the most the CRD accepts, and
// longNeighbour another that shares its first 58, all that its pods' names keep.
const (
	longName      = "sessions-of-the-checkout-service-in-eu-west-1-behind-the-proxy1"
	longNeighbour = "sessions-of-the-checkout-service-in-eu-west-1-behind-the-proxy2"
)

// scopedRules are the rule files of the PrometheusRules that the operator makes for
// Memcacheds shop/cache and shop/<longName>, which pkg/memcached's
// TestScopedRulesFile keeps current.
var scopedRules = map[string]string{
	"cache":  "../../pkg/memcached/testdata/prometheusrule-shop-cache.yaml",
	longName: "../../pkg/memcached/testdata/prometheusrule-shop-long.yaml",
}

// neighbours are, for each Memcached of scopedRules, another in its namespace
// whose pods' names start as its pods' names do.
var neighbours = map[string]string{"cache": "cache-blue", longName: longNeighbour}

// podName returns the name of a pod of the Memcached memcached, whose template has
// the hash hash, with the random suffix suffix, as Kubernetes names it: the
// Deployment, named after the Memcached, names its ReplicaSet <memcached>-<hash>
// (generateReplicaSetName of pkg/controller/deployment), the ReplicaSet gives its
// pods the generateName <replicaset>- (getPodsPrefix of pkg/controller), and the API
// server keeps names.MaxGeneratedNameLength (58) characters of it before the 5
// random ones.
func podName(memcached, hash, suffix string) string {
	base := memcached + "-" + hash + "-"
	if len(base) > names.MaxGeneratedNameLength {
		base = base[:names.MaxGeneratedNameLength]
	}
	return base + suffix
}

func TestPodName(t *testing.T) {
	tests := []struct {
		memcached, want string
	}{
		{"cache", "cache-7d9f8b6c5-x2k4q"},
		// 46 characters, the longest whose pods' names keep the whole base.
		{"sessions-of-the-checkout-service-in-eu-west-12", "sessions-of-the-checkout-service-in-eu-west-12-7d9f8b6c5-x2k4q"},
		{longName, "sessions-of-the-checkout-service-in-eu-west-1-behind-the-px2k4q"},
	}
	for _, tt := range tests {
		if got := podName(tt.memcached, "7d9f8b6c5", "x2k4q"); got != tt.want || len(got) > 63 {
			t.Errorf("podName(%s): got %s, want %s", tt.memcached, got, tt.want)
		}
	}
}

// forMemcached returns rules_test.yaml, whose cache pods are those of Memcached
// cache, as the tests of the Memcached memcached: each pod <cache>-<hash>-<suffix>
// has the name that memcached's pod of that hash and suffix has, and the labels job
// (the Service) and memcached name memcached.
func forMemcached(b []byte, memcached string) []byte {
	pod := regexp.MustCompile(`\bcache-([a-z0-9]+)-([a-z0-9]{5})\b`)
	b = pod.ReplaceAllFunc(b, func(p []byte) []byte {
		m := pod.FindSubmatch(p)
		return []byte(podName(memcached, string(m[1]), string(m[2])))
	})
	label := regexp.MustCompile(`\b(job|memcached)(="|: )cache([",}])`)
	return label.ReplaceAll(b, []byte("${1}${2}"+memcached+"${3}"))
}

// TestScopedRulesFireForTheirMemcachedOnly runs rules_test.yaml's cases of the
// cache alerts on the rules of the PrometheusRule of each Memcached of scopedRules,
// shop/cache and shop/<longName>, with the series given to that Memcached's pods and
// a copy of every series of the pod that fires them given to a pod of its neighbour,
// whose pods' names start as its own: each alert must fire as in rules.yaml, with
// the label memcached of the Memcached, and never for the neighbour's pod.
func TestScopedRulesFireForTheirMemcachedOnly(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile(filepath.Join(dir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for memcached, scopedRules := range scopedRules {
		t.Run(memcached, func(t *testing.T) {
			t.Parallel()
			var file map[string]interface{}
			if err := yaml.Unmarshal(forMemcached(source, memcached), &file); err != nil {
				t.Fatal(err)
			}
			var scoped ruleFile
			rules, err := os.ReadFile(scopedRules)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(rules, &scoped); err != nil {
				t.Fatal(err)
			}
			alerts := map[string]bool{}
			for _, g := range scoped.Groups {
				for _, r := range g.Rules {
					alerts[r.Alert] = true
				}
			}
			firing := fmt.Sprintf(`pod=%q`, podName(memcached, "7d9f8b6c5", "x2k4q"))
			neighbour := strings.NewReplacer(firing, fmt.Sprintf(`pod=%q`, podName(neighbours[memcached], "5b8c7d6e9", "abcde")),
				fmt.Sprintf(`job=%q`, memcached), fmt.Sprintf(`job=%q`, neighbours[memcached]),
				fmt.Sprintf(`memcached=%q`, memcached), fmt.Sprintf(`memcached=%q`, neighbours[memcached]))
			var kept []interface{}
			tested := map[string]bool{}
			for _, tc := range file["tests"].([]interface{}) {
				tc := tc.(map[string]interface{})
				checks := tc["alert_rule_test"].([]interface{})
				if !alerts[checks[0].(map[string]interface{})["alertname"].(string)] {
					continue
				}
				series := tc["input_series"].([]interface{})
				copied := 0
				for _, s := range series {
					s := s.(map[string]interface{})
					if name := s["series"].(string); strings.Contains(name, firing) {
						series = append(series, map[string]interface{}{"series": neighbour.Replace(name), "values": s["values"]})
						copied++
					}
				}
				if copied == 0 {
					t.Errorf("test %q: no series of %s", tc["name"], firing)
				}
				tc["input_series"] = series
				for _, c := range checks {
					c := c.(map[string]interface{})
					tested[c["alertname"].(string)] = true
					exp, _ := c["exp_alerts"].([]interface{})
					for _, e := range exp {
						e.(map[string]interface{})["exp_labels"].(map[string]interface{})["memcached"] = memcached
					}
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
			tmp := t.TempDir()
			for name, content := range map[string][]byte{"rules.yaml": rules, "tests.yaml": out} {
				if err := os.WriteFile(filepath.Join(tmp, name), content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Log(run(t, tmp, "test", "rules", "tests.yaml"))
		})
	}
}

// TestDashboardQueriesSelectTheirMemcachedOnly evaluates with promtool every query
// of dashboards/memcached.json and of the console about caches, with the variables
// and parameters of Memcached shop/cache and of shop/<longName>, over the series of
// one pod of that Memcached, then over those of a pod of its neighbour, whose pods'
// names start as its own: each query must return one series of the Memcached's pod
// and none of the neighbour's, and each variable must offer the value the test gives
// it. Every series carries the labels the queries filter on (command, status,
// result), with values that grow, so that rates and ratios have a value.
func TestDashboardQueriesSelectTheirMemcachedOnly(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	for memcached := range scopedRules {
		t.Run(memcached, func(t *testing.T) {
			t.Parallel()
			exprs := dashboardExpressions(t, "memcached.json", grafanaVariables("shop", memcached))
			for _, e := range consoleExpressions(t, map[string]string{"namespace": "shop", "memcached": memcached}) {
				if !strings.Contains(e.expr, "memcached_operator_") {
					exprs = append(exprs, e)
				}
			}
			values := map[string]string{"namespace": "shop", "memcached": memcached}
			type expSample struct {
				Labels string  `json:"labels"`
				Value  float64 `json:"value"`
			}
			type check struct {
				Expr       string      `json:"expr"`
				EvalTime   string      `json:"eval_time"`
				ExpSamples []expSample `json:"exp_samples"`
			}
			var mine, theirs []check
			metrics := map[string]bool{}
			for _, e := range exprs {
				for _, n := range metricNames(e.expr) {
					if !exported[n] || strings.HasPrefix(n, "memcached_operator_") {
						t.Errorf("%s: %s is no series of the sidecar: %s", e.where, n, e.expr)
					}
					metrics[n] = true
				}
				if e.label != "" {
					value, ok := values[e.label]
					if !ok {
						t.Errorf("%s: the test gives no value of label %s", e.where, e.label)
						continue
					}
					mine = append(mine, check{fmt.Sprintf("count by (%s) (%s)", e.label, e.expr), "10m", []expSample{{fmt.Sprintf("{%s=%q}", e.label, value), 1}}})
					continue
				}
				mine = append(mine, check{fmt.Sprintf("count(%s)", e.expr), "10m", []expSample{{"{}", 1}}})
				theirs = append(theirs, check{fmt.Sprintf("count(%s)", e.expr), "10m", nil})
			}
			if len(theirs) < 20 {
				t.Fatalf("%d queries of the dashboard and the console, want them all", len(theirs))
			}
			seriesOf := func(memcached, pod string) []map[string]string {
				var series []map[string]string
				for _, n := range slices.Sorted(maps.Keys(metrics)) {
					series = append(series, map[string]string{
						"series": fmt.Sprintf(`%s{namespace="shop", pod=%q, job=%q, memcached=%q, command="get", status="hit", result="failure"}`, n, pod, memcached, memcached),
						"values": "1+1x20",
					})
				}
				return series
			}
			tests := map[string]interface{}{
				"evaluation_interval": "1m",
				"tests": []interface{}{
					map[string]interface{}{
						"name":             "the queries return the series of a pod of " + memcached,
						"interval":         "1m",
						"input_series":     seriesOf(memcached, podName(memcached, "7d9f8b6c5", "x2k4q")),
						"promql_expr_test": mine,
					},
					map[string]interface{}{
						"name":             "the queries return nothing of a pod of " + neighbours[memcached],
						"interval":         "1m",
						"input_series":     seriesOf(neighbours[memcached], podName(neighbours[memcached], "5b8c7d6e9", "abcde")),
						"promql_expr_test": theirs,
					},
				},
			}
			b, err := yaml.Marshal(tests)
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			if err := os.WriteFile(filepath.Join(tmp, "tests.yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log(run(t, tmp, "test", "rules", "tests.yaml"))
			t.Logf("%d queries return the series of %s's pod and none of %s's", len(theirs), memcached, neighbours[memcached])
		})
	}
}
