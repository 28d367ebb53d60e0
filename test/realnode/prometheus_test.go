package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	"sigs.k8s.io/yaml"
)

const (
	// promScrapeInterval is the test Prometheus's scrape interval, which
	// deploy/monitoring/prometheus.yaml's memcached scrape_timeout (10s) fits.
	promScrapeInterval = 10 * time.Second
	// promEvalInterval is how often it evaluates deploy/monitoring/rules.yaml.
	promEvalInterval = 5 * time.Second
	// sidecarIOTimeout is how long the sidecar waits for memcached's reply
	// before it reports memcached_up 0 (pkg/sidecar's ioTimeout).
	sidecarIOTimeout = 5 * time.Second
	// promSlack is what the waits allow on top of the intervals they follow
	// from: discovery, a busy machine.
	promSlack = 45 * time.Second
	// promLag is what the check of when an alert fired allows on top of its
	// for and the intervals: a scrape or an evaluation that a busy machine
	// starts late.
	promLag = 15 * time.Second
	// consoleWindow is the range of the console's graphs.
	consoleWindow = 5 * time.Minute
)

// TestPrometheusOnTheRealNode runs Debian's Prometheus on the host, as a plain
// Prometheus without the Prometheus Operator, with deploy/monitoring's scrape
// configuration, rules and console, and Prometheus's own Kubernetes discovery
// (framework.KubernetesSD: Debian builds Prometheus without it) as a
// ServiceAccount that may only get, list and watch pods. On a Memcached of two
// pods with TLS, client certificates, auth and monitoring, it shows that:
// Prometheus discovers and scrapes both pods' sidecars and both operator pods,
// all up; `promtool check metrics` passes on a scrape of each; every rule
// evaluates, and none fires or is pending on the healthy cache; with memcached
// stopped (SIGSTOP) in one pod, MemcachedDown fires for that pod alone, no
// sooner than its `for` after the stop and within it plus the scrape and
// evaluation intervals; and the console page, in headless Chromium, draws
// every graph Prometheus has data for, with no error, in a screenshot kept as
// tmp/_output/realnode/prometheus-console.png.
func TestPrometheusOnTheRealNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "watched"
	ca := newTestCA(t)
	// MemcachedCertificateExpiringSoon warns 14 days ahead.
	certPEM, keyPEM, _ := ca.issueFor(t, 100, 90*24*time.Hour)
	_, _, client := ca.issue(t, 200)
	applySecret(t, admin, name+"-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.pem})
	applySecret(t, admin, name+"-users", "Opaque", map[string][]byte{"passwords": []byte("app:password\n")})
	applyMemcachedSpec(t, admin, name, `size: 2
tls: {secretName: `+name+`-tls, clientCertificates: Required}
auth: {secretName: `+name+`-users}
monitoring: {enabled: true}`)
	prom := startPrometheus(t)
	o := waitServing(t, name, 2)
	mine := map[string]bool{}
	for _, p := range o.Pods {
		mine[p.Metadata.Name] = true
		addr, err := podAddr(o, p.Metadata.Name)
		if err != nil {
			t.Fatal(err)
		}
		// Items, hits and misses for the console's graphs.
		c, _, err := session(ctx, addr, ca, &client, "app", "password")
		if err != nil {
			t.Fatalf("pod %s: %v", p.Metadata.Name, err)
		}
		for i := 0; i < 20; i++ {
			if reply, err := c.do(fmt.Sprintf("set key-%d 0 0 5\r\nvalue\r\n", i)); err != nil || reply != "STORED" {
				t.Fatalf("pod %s: set: %q, %v", p.Metadata.Name, reply, err)
			}
			// A hit, and every fourth time a miss.
			if v, err := c.get(fmt.Sprintf("key-%d", i)); err != nil || v != "value" {
				t.Fatalf("pod %s: get: %q, %v", p.Metadata.Name, v, err)
			}
			if i%4 == 0 {
				if v, err := c.get("missing"); err != nil || v != "" {
					t.Fatalf("pod %s: get of a missing key: %q, %v", p.Metadata.Name, v, err)
				}
			}
		}
		c.Close()
	}
	operators, err := operatorPods(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}

	// Discovery and scrapes: every pod of the cache and of the operator, up.
	want := map[string]string{}
	for _, p := range o.Pods {
		want[p.Metadata.Name] = "memcached"
	}
	for _, p := range operators {
		want[p.Metadata.Name] = "memcached-operator"
	}
	var targets []framework.PromTarget
	err = framework.Eventually(ctx, readyTimeout, "Prometheus to scrape every pod of "+name+" and of the operator", func(ctx context.Context) error {
		var err error
		if targets, err = prom.Targets(ctx); err != nil {
			return err
		}
		for pod, job := range want {
			i := slices.IndexFunc(targets, func(t framework.PromTarget) bool {
				return t.Labels["pod"] == pod && t.Labels["namespace"] == namespace && t.Labels["job"] == job
			})
			if i < 0 {
				return fmt.Errorf("no target of job %s for pod %s", job, pod)
			}
			if targets[i].Health != "up" {
				return fmt.Errorf("target %s is %s: %s", targets[i].ScrapeURL, targets[i].Health, targets[i].LastError)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		if want[tg.Labels["pod"]] != "" {
			t.Logf("target %s job=%s pod=%s: %s", tg.ScrapeURL, tg.Labels["job"], tg.Labels["pod"], tg.Health)
		}
	}

	// promtool's lint of what each pod serves.
	for _, p := range o.Pods {
		page, err := scrapeSidecar(ctx, p)
		if err == nil {
			err = framework.PromtoolCheckMetrics(ctx, page)
		}
		if err != nil {
			t.Errorf("sidecar of %s: %v", p.Metadata.Name, err)
		}
	}
	for _, p := range operators {
		page, err := scrape(ctx, p)
		if err == nil {
			err = framework.PromtoolCheckMetrics(ctx, page)
		}
		if err != nil {
			t.Errorf("operator %s: %v", p.Metadata.Name, err)
		}
	}

	// Every rule of rules.yaml evaluates; on the healthy cache none is
	// pending or firing for its pods, nor for the operator.
	wantRules, err := alertNames(paths.Deploy("monitoring/rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	podSelector := fmt.Sprintf(`namespace=%q,pod=~%q`, namespace, strings.Join(slices.Sorted(maps.Keys(mine)), "|"))
	var rules map[string]framework.PromRule
	err = framework.Eventually(ctx, readyTimeout, "every rule evaluated with memcached_up 1 in both pods, and no alert about them or the operator", func(ctx context.Context) error {
		up, err := prom.Query(ctx, "memcached_up{"+podSelector+"} == 1")
		if err != nil {
			return err
		}
		if len(up) != len(mine) {
			return fmt.Errorf("memcached_up 1 in %d of %d pods", len(up), len(mine))
		}
		if rules, err = prom.AlertingRules(ctx); err != nil {
			return err
		}
		for _, r := range wantRules {
			rule, ok := rules[r]
			if !ok {
				return framework.Permanent(fmt.Errorf("Prometheus has no rule %s of rules.yaml; it has %v", r, slices.Sorted(maps.Keys(rules))))
			}
			if rule.Health != "ok" {
				return fmt.Errorf("rule %s: health %q: %s", r, rule.Health, rule.LastError)
			}
		}
		if active := alertsAbout(rules, mine); len(active) > 0 {
			return fmt.Errorf("active alerts: %v", active)
		}
		return nil
	})
	logReconcileErrors(t, prom, rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rules evaluated, all inactive for pods %v and the operator", len(wantRules), slices.Sorted(maps.Keys(mine)))

	// memcached stops answering in one pod: its sidecar answers
	// memcached_up 0 after its I/O timeout.
	down := o.Pods[0]
	pid, err := containerProcess(ctx, down, "memcached")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop memcached %d: %v", pid, err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	t.Logf("stopped memcached (pid %d) in pod %s", pid, down.Metadata.Name)
	forDown := time.Duration(rules["MemcachedDown"].Duration * float64(time.Second))
	budget := forDown + promScrapeInterval + sidecarIOTimeout + 2*promEvalInterval
	var firing framework.PromAlert
	err = framework.Eventually(ctx, budget+promSlack, "MemcachedDown to fire for pod "+down.Metadata.Name, func(ctx context.Context) error {
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			return err
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "MemcachedDown" && a.Labels["pod"] == down.Metadata.Name {
				firing = a
				if a.State == "firing" {
					return nil
				}
			}
		}
		return fmt.Errorf("MemcachedDown: %v", firing)
	})
	seen := time.Since(stopped)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MemcachedDown (for %v) firing %v after the stop: %v, value %s: %s", forDown, seen.Round(time.Second), firing, firing.Value, firing.Annotations["summary"])
	if firing.ActiveAt.Before(stopped) {
		t.Errorf("MemcachedDown was active since %v, before memcached stopped at %v", firing.ActiveAt, stopped)
	}
	// When it first fired, from the ALERTS series Prometheus wrote at each
	// evaluation.
	series, err := prom.QueryRange(ctx, `ALERTS{alertstate="firing",`+podSelector+`}`, stopped.Add(-consoleWindow), time.Now(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		first := s.Samples[0].Time
		switch {
		case s.Metric["alertname"] != "MemcachedDown" || s.Metric["pod"] != down.Metadata.Name:
			t.Errorf("%s fired for pod %s at %v", s.Metric["alertname"], s.Metric["pod"], first)
		case first.Before(stopped.Add(forDown)):
			t.Errorf("MemcachedDown fired at %v, %v after memcached stopped, before its for of %v", first, first.Sub(stopped), forDown)
		case first.After(stopped.Add(budget + promLag)):
			t.Errorf("MemcachedDown fired %v after memcached stopped, later than its for and the intervals, %v, and %v more", first.Sub(stopped), budget, promLag)
		default:
			t.Logf("MemcachedDown first fired %v after the stop (for %v, at most %v with the intervals)", first.Sub(stopped).Round(time.Second), forDown, budget)
		}
	}
	if rules, err = prom.AlertingRules(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range alertsAbout(rules, mine) {
		if a.Labels["alertname"] != "MemcachedDown" || a.Labels["pod"] != down.Metadata.Name {
			t.Errorf("alert beside MemcachedDown of %s: %v", down.Metadata.Name, a)
		}
	}
	logReconcileErrors(t, prom, rules)

	// The console, in a browser, with the drop in memcached_up on it.
	checkConsole(t, prom, name)
}

// startPrometheus starts Prometheus with deploy/monitoring/prometheus.yaml,
// its rules and its console, as ServiceAccount prometheus of the suite's
// namespace, which may only get, list and watch pods there, with
// promScrapeInterval and promEvalInterval; on failure the test logs its
// targets, alerts and log.
func startPrometheus(t *testing.T) *framework.Prometheus {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	const sa = "prometheus"
	err := admin.Apply(ctx, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %[1]s
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s}
subjects: [{kind: ServiceAccount, name: %[1]s}]
`, sa))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Run(context.Background(), "delete", "serviceaccount,role,rolebinding", sa, "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cluster.ServiceAccountKubeconfig(ctx, namespace, sa, kubeconfig, time.Hour); err != nil {
		t.Fatal(err)
	}
	config, sds, err := prometheusConfig(dir, kubeconfig)
	for _, sd := range sds {
		t.Cleanup(sd.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	prom, err := framework.StartPrometheus(ctx, framework.PrometheusRun{Dir: dir, Config: config, Consoles: paths.Deploy("monitoring/consoles")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	framework.DumpOnFailure(t, func() string {
		var b strings.Builder
		b.WriteString("===== Prometheus targets\n")
		targets, err := prom.Targets(context.Background())
		for _, tg := range targets {
			fmt.Fprintf(&b, "%s %s pod=%s %s %s\n", tg.ScrapePool, tg.ScrapeURL, tg.Labels["pod"], tg.Health, tg.LastError)
		}
		b.WriteString(errText(err))
		b.WriteString("===== Prometheus alerts\n")
		alerts, err := prom.Alerts(context.Background())
		for _, a := range alerts {
			fmt.Fprintln(&b, a)
		}
		b.WriteString(errText(err))
		for _, sd := range sds {
			b.WriteString(errText(sd.Err()))
			if log, err := os.ReadFile(sd.File + ".log"); err == nil {
				fmt.Fprintf(&b, "===== discovery log %s (tail)\n%s\n", filepath.Base(sd.File), tail(string(log), 20))
			}
		}
		return b.String() + "===== Prometheus log (tail)\n" + tail(prom.Log(), 30)
	})
	return prom
}

// prometheusConfig returns deploy/monitoring/prometheus.yaml as the test runs
// it: each kubernetes_sd_configs entry, given kubeconfig and the suite's
// namespace, runs in a framework.KubernetesSD, whose file a file_sd_configs
// entry reads in its place; the relabel_configs stay as they are. The rule
// file is the repository's, and the intervals are the test's.
func prometheusConfig(dir, kubeconfig string) ([]byte, []*framework.KubernetesSD, error) {
	raw, err := os.ReadFile(paths.Deploy("monitoring/prometheus.yaml"))
	if err != nil {
		return nil, nil, err
	}
	var config map[string]any
	if err := yaml.Unmarshal(raw, &config); err != nil {
		return nil, nil, err
	}
	config["global"] = map[string]any{"scrape_interval": promScrapeInterval.String(), "evaluation_interval": promEvalInterval.String()}
	config["rule_files"] = []any{paths.Deploy("monitoring/rules.yaml")}
	scrapes, _ := config["scrape_configs"].([]any)
	var sds []*framework.KubernetesSD
	for _, s := range scrapes {
		scrape, _ := s.(map[string]any)
		entries, _ := scrape["kubernetes_sd_configs"].([]any)
		var files []any
		for i, e := range entries {
			entry, _ := e.(map[string]any)
			entry["kubeconfig_file"] = kubeconfig
			entry["namespaces"] = map[string]any{"names": []any{namespace}}
			b, err := yaml.Marshal(entry)
			if err != nil {
				return nil, sds, err
			}
			file := filepath.Join(dir, fmt.Sprintf("%s-%d.json", scrape["job_name"], i))
			sd, err := framework.StartKubernetesSD(b, file)
			if err != nil {
				return nil, sds, err
			}
			sds = append(sds, sd)
			files = append(files, file)
		}
		if len(entries) == 0 {
			return nil, sds, fmt.Errorf("scrape config %v has no kubernetes_sd_configs", scrape["job_name"])
		}
		delete(scrape, "kubernetes_sd_configs")
		scrape["file_sd_configs"] = []any{map[string]any{"files": files}}
	}
	out, err := yaml.Marshal(config)
	return out, sds, err
}

// logReconcileErrors logs namespaceWide's state, and the failed reconciles in
// the suite's namespace over its window that explain it.
func logReconcileErrors(t *testing.T, prom *framework.Prometheus, rules map[string]framework.PromRule) {
	t.Helper()
	failed, err := prom.Query(context.Background(), fmt.Sprintf(`sum(increase(memcached_operator_reconcile_total{namespace=%q,result=~"error|panic"}[5m]))`, namespace))
	if err != nil {
		t.Error(err)
		return
	}
	n := 0.0
	if len(failed) > 0 {
		n = failed[0].Samples[0].Value
	}
	if alerts := rules[namespaceWide].Alerts; len(alerts) > 0 {
		t.Logf("%s is %s: the operator failed about %.0f reconciles in %s in the last 5 minutes, which the suite's other tests may cause", namespaceWide, alerts[0].State, n, namespace)
	} else {
		t.Logf("%s is inactive (%.0f failed reconciles in %s in the last 5 minutes)", namespaceWide, n, namespace)
	}
}

// alertNames returns the alerts of the rule file at path.
func alertNames(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return nil, err
	}
	var names []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no alert", path)
	}
	return names, nil
}

// namespaceWide is the operator's alert on the reconciles of every Memcached
// of the suite's namespace, where the parallel tests that this one does not
// control may make some fail: the test logs it, with the failures it counts,
// rather than require it inactive.
const namespaceWide = "MemcachedOperatorReconcileErrors"

// alertsAbout returns the pending and firing alerts of rules about pods, or
// about the operator in the suite's namespace: those with no pod label, as the
// operator's rules aggregate by namespace; namespaceWide's are left out.
func alertsAbout(rules map[string]framework.PromRule, pods map[string]bool) []framework.PromAlert {
	var about []framework.PromAlert
	for name, r := range rules {
		if name == namespaceWide {
			continue
		}
		for _, a := range r.Alerts {
			if a.Labels["namespace"] == namespace && (pods[a.Labels["pod"]] || a.Labels["pod"] == "") {
				about = append(about, a)
			}
		}
	}
	return about
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

var (
	// consoleGraph is where a graph of the console's DOM starts.
	consoleGraph = regexp.MustCompile(`<div id="(\w+)"><table class="prom_graph_table">`)
	// consoleExprs are the expressions of a graph's script.
	consoleExprs = regexp.MustCompile(`expr: (` + jsString + `|\[\s*(?:` + jsString + `\s*,?\s*)*\])`)
	// jsString is a JavaScript string literal in double quotes.
	jsString = `"(?:[^"\\]|\\.)*"`
	// consoleLine is a series of a graph, as Rickshaw draws it.
	consoleLine = regexp.MustCompile(`<path class="path" d="([^"]*)" fill="none" stroke="(#[0-9a-f]{6})"`)
)

// checkConsole loads the console page for Memcached name in headless Chromium,
// keeps its screenshot and DOM under tmp/_output/realnode, and checks that
// it drew every graph of the template, each without an error, a line of
// several points in each graph whose expression Prometheus has a number for,
// and those lines in the screenshot, in their colours, across at least a
// fifth of its width.
func checkConsole(t *testing.T, prom *framework.Prometheus, name string) {
	t.Helper()
	ctx := context.Background()
	template, err := os.ReadFile(paths.Deploy("monitoring/consoles/memcached.html"))
	if err != nil {
		t.Fatal(err)
	}
	query := url.Values{"namespace": {namespace}, "memcached": {name}, "operator_namespace": {namespace}}.Encode()
	page := "/consoles/memcached.html?" + query
	// The template runs at the server: a failure there is a 500 with its error.
	html, err := prom.Get(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(scratch, "prometheus-console.png")
	const width, height = 1280, 4200
	// Each call of the template's memcached_graph draws a graph, as does a
	// PromConsole.Graph written out of it.
	want := strings.Count(string(template), `template "memcached_graph"`) +
		strings.Count(string(template), "new PromConsole.Graph(") - strings.Count(string(template), `define "memcached_graph"`)
	// On a busy machine one load can end before the page's scripts have
	// built a graph (a make test run drew none, the same page before and
	// after drew all 12), so the page is loaded until its scripts have
	// built every graph, or the deadline ends; what is drawn is then
	// checked below.
	var dom string
	err = framework.Eventually(ctx, 3*time.Minute, "the console page's scripts to build every graph", func(ctx context.Context) error {
		var err error
		dom, err = framework.Headless(ctx, framework.HeadlessPage{
			URL:        prom.URL + page + fmt.Sprintf(`#pctc{"duration":%d,"endTime":0}`, int(consoleWindow.Seconds())),
			Screenshot: png, Width: width, Height: height, ScriptTime: 15 * time.Second,
		})
		if err != nil {
			return err
		}
		if got := len(consoleGraph.FindAllStringIndex(dom, -1)); got != want {
			return fmt.Errorf("the page built %d graphs, the template has %d", got, want)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "prometheus-console.html"), []byte(dom), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("console page %s (%d bytes as served): screenshot %s", page, len(html), png)

	var graphs [][2]string // id, and the DOM from it to the next graph
	starts := consoleGraph.FindAllStringSubmatchIndex(dom, -1)
	for i, m := range starts {
		end := len(dom)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		graphs = append(graphs, [2]string{dom[m[2]:m[3]], dom[m[0]:end]})
	}
	if len(graphs) != want {
		t.Errorf("the page drew %d graphs, the template has %d", len(graphs), want)
	}
	colours := map[string]bool{}
	for _, g := range graphs {
		id, body := g[0], g[1]
		if strings.Contains(body, "prom_graph_error") {
			t.Errorf("graph %s shows an error: %s", id, regexp.MustCompile(`class="prom_graph_error">([^<]*)`).FindStringSubmatch(body))
		}
		points := 0
		for _, line := range consoleLine.FindAllStringSubmatch(body, -1) {
			points += strings.Count(line[1], ",")
			colours[line[2]] = true
		}
		numbers := 0
		for _, e := range consoleExprs.FindAllStringSubmatch(body, -1) {
			for _, quoted := range regexp.MustCompile(jsString).FindAllString(e[1], -1) {
				// A JavaScript string, as html/template escapes it.
				var expr string
				if err := json.Unmarshal([]byte(quoted), &expr); err != nil {
					t.Fatalf("graph %s: expression %s: %v", id, quoted, err)
				}
				series, err := prom.Query(ctx, expr)
				if err != nil {
					t.Errorf("graph %s: %v", id, err)
				}
				for _, s := range series {
					if v := s.Samples[0].Value; v == v {
						numbers++
					}
				}
			}
		}
		switch {
		case numbers > 0 && points < 2:
			t.Errorf("graph %s draws %d points, though Prometheus has %d series with a number for it", id, points, numbers)
		case numbers == 0:
			t.Logf("graph %s: Prometheus has no number for it now (%d points drawn)", id, points)
		}
	}
	drawn, err := columnsIn(png, colours)
	if err != nil {
		t.Fatal(err)
	}
	if drawn < width/5 {
		t.Errorf("the screenshot has the graphs' colours %v in %d of its %d columns, want at least a fifth", slices.Sorted(maps.Keys(colours)), drawn, width)
	}
	t.Logf("%d graphs; the lines' colours %v fill %d of the screenshot's %d columns", len(graphs), slices.Sorted(maps.Keys(colours)), drawn, width)
}

// columnsIn returns how many columns of the PNG at path have a pixel of one of
// the vivid colours (#rrggbb) of colours, within a small distance, which
// anti-aliasing leaves.
func columnsIn(path string, colours map[string]bool) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	var rgb [][3]int
	for c := range colours {
		var r, g, b int
		// Rickshaw's palettes have greys too, which text and grid lines
		// would match: only vivid colours count.
		if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b); err == nil && max(r, g, b)-min(r, g, b) >= 60 {
			rgb = append(rgb, [3]int{r, g, b})
		}
	}
	near := func(x, y int) bool {
		r, g, b, _ := img.At(x, y).RGBA()
		for _, c := range rgb {
			if abs(int(r>>8)-c[0])+abs(int(g>>8)-c[1])+abs(int(b>>8)-c[2]) <= 30 {
				return true
			}
		}
		return false
	}
	bounds := img.Bounds()
	columns := 0
	for x := bounds.Min.X; x < bounds.Max.X; x++ {
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			if near(x, y) {
				columns++
				break
			}
		}
	}
	return columns, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
