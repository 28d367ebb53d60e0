package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ConsoleLibraries is where Debian's prometheus package puts Prometheus's
// console libraries (prom.lib, menu.lib), which console templates include:
// the package installs them as examples only.
const ConsoleLibraries = "/usr/share/doc/prometheus/examples/console_libraries"

// Prometheus is a Prometheus server from Debian's prometheus package, run as
// a process of this machine, as a Prometheus without the Prometheus Operator
// runs: its own configuration file, rule files and console templates.
type Prometheus struct {
	// URL is where it serves, http://127.0.0.1:PORT.
	URL string
	// LogFile holds its output.
	LogFile string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// PrometheusRun says how StartPrometheus runs Prometheus.
type PrometheusRun struct {
	// Dir holds the configuration, the TSDB and the log.
	Dir string
	// Config is the content of prometheus.yml.
	Config []byte
	// Consoles, when set, is the folder of console templates served at
	// /consoles/, with ConsoleLibraries.
	Consoles string
}

// StartPrometheus checks r.Config with promtool, starts Prometheus on a free
// loopback port and waits until it is ready. It fails when the prometheus
// package is missing (test/scripts/install-deps.sh installs it).
func StartPrometheus(ctx context.Context, r PrometheusRun) (*Prometheus, error) {
	for _, tool := range []string{"prometheus", "promtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s: %v (test/scripts/install-deps.sh test installs Debian's prometheus)", tool, err)
		}
	}
	config := filepath.Join(r.Dir, "prometheus.yml")
	if err := os.WriteFile(config, r.Config, 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "promtool", "check", "config", config).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("promtool check config: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		p, err := startPrometheusOnce(ctx, r, config)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || attempt == 4 {
			return p, err
		}
	}
}

func startPrometheusOnce(ctx context.Context, r PrometheusRun, config string) (*Prometheus, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(r.Dir, "data"),
		"--web.listen-address=" + addr,
	}
	if r.Consoles != "" {
		args = append(args, "--web.console.templates="+r.Consoles, "--web.console.libraries="+ConsoleLibraries)
	}
	p := &Prometheus{URL: "http://" + addr, LogFile: filepath.Join(r.Dir, "prometheus.log"), exited: make(chan struct{})}
	log, err := os.Create(p.LogFile)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	p.cmd = exec.Command("prometheus", args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	err = EventuallyEvery(ctx, time.Minute, 100*time.Millisecond, "prometheus to be ready on "+addr, func(ctx context.Context) error {
		select {
		case <-p.exited:
			return Permanent(fmt.Errorf("prometheus exited (%s): %s", p.cmd.ProcessState, lastLine(p.Log())))
		default:
		}
		code, _, err := p.get(ctx, "/-/ready")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/-/ready: %d", code)
		}
		return err
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop ends Prometheus and waits for it.
func (p *Prometheus) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Log returns Prometheus's output so far.
func (p *Prometheus) Log() string {
	out, err := os.ReadFile(p.LogFile)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// get requests path from Prometheus and returns the status code and body.
func (p *Prometheus) get(ctx context.Context, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// Get returns the body of path, which must answer 200.
func (p *Prometheus) Get(ctx context.Context, path string) ([]byte, error) {
	code, body, err := p.get(ctx, path)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s = %d: %s", path, code, body)
	}
	return body, err
}

// API decodes the data of the HTTP API's answer to path (under /api/v1/)
// with query into v.
func (p *Prometheus) API(ctx context.Context, path string, query url.Values, v any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	body, err := p.Get(ctx, "/api/v1/"+path)
	if err != nil {
		return err
	}
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("/api/v1/%s: %v", path, err)
	}
	if answer.Status != "success" {
		return fmt.Errorf("/api/v1/%s: %s %s", path, answer.Status, answer.Error)
	}
	return json.Unmarshal(answer.Data, v)
}

// PromTarget is a target of /api/v1/targets.
type PromTarget struct {
	Labels     map[string]string `json:"labels"`
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	LastScrape time.Time         `json:"lastScrape"`
}

// Targets returns Prometheus's active targets.
func (p *Prometheus) Targets(ctx context.Context) ([]PromTarget, error) {
	var data struct {
		ActiveTargets []PromTarget `json:"activeTargets"`
	}
	err := p.API(ctx, "targets", url.Values{"state": {"active"}}, &data)
	return data.ActiveTargets, err
}

// PromAlert is an alert of /api/v1/alerts or of a rule: pending or firing.
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

func (a PromAlert) String() string {
	return fmt.Sprintf("%s %s{namespace=%q, pod=%q} since %s", a.State, a.Labels["alertname"], a.Labels["namespace"], a.Labels["pod"], a.ActiveAt.Format(time.RFC3339))
}

// Alerts returns the alerts that are pending or firing.
func (p *Prometheus) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := p.API(ctx, "alerts", nil, &data)
	return data.Alerts, err
}

// PromRule is an alerting rule of /api/v1/rules.
type PromRule struct {
	Name           string      `json:"name"`
	Duration       float64     `json:"duration"`
	State          string      `json:"state"`
	Health         string      `json:"health"`
	LastError      string      `json:"lastError"`
	LastEvaluation time.Time   `json:"lastEvaluation"`
	Alerts         []PromAlert `json:"alerts"`
}

// AlertingRules returns the alerting rules Prometheus evaluates, by name.
func (p *Prometheus) AlertingRules(ctx context.Context) (map[string]PromRule, error) {
	var data struct {
		Groups []struct {
			Rules []PromRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.API(ctx, "rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	rules := map[string]PromRule{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			rules[r.Name] = r
		}
	}
	return rules, nil
}

// PromSeries is a series of a query's answer: its labels and its samples,
// one for an instant query.
type PromSeries struct {
	Metric  map[string]string
	Samples []PromSample
}

// PromSample is one sample of a series.
type PromSample struct {
	Time  time.Time
	Value float64
}

// Query evaluates expr now.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]PromSeries, error) {
	return p.query(ctx, "query", url.Values{"query": {expr}})
}

// QueryRange evaluates expr from start to end every step.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]PromSeries, error) {
	return p.query(ctx, "query_range", url.Values{
		"query": {expr},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	})
}

func (p *Prometheus) query(ctx context.Context, path string, q url.Values) ([]PromSeries, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	}
	if err := p.API(ctx, path, q, &data); err != nil {
		return nil, err
	}
	var series []PromSeries
	for _, r := range data.Result {
		s := PromSeries{Metric: r.Metric}
		if r.Value != nil {
			r.Values = append(r.Values, r.Value)
		}
		for _, v := range r.Values {
			sample, err := promSample(v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %v", path, q.Get("query"), err)
			}
			s.Samples = append(s.Samples, sample)
		}
		series = append(series, s)
	}
	return series, nil
}

// promSample reads the API's [unix seconds, "value"].
func promSample(v []any) (PromSample, error) {
	if len(v) != 2 {
		return PromSample{}, fmt.Errorf("sample %v", v)
	}
	at, ok := v[0].(float64)
	text, isText := v[1].(string)
	if !ok || !isText {
		return PromSample{}, fmt.Errorf("sample %v", v)
	}
	value, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return PromSample{}, err
	}
	return PromSample{Time: time.UnixMilli(int64(at * 1000)), Value: value}, nil
}

// PromtoolCheckMetrics runs `promtool check metrics` on page, a scrape in
// Prometheus's text format, and returns its complaints as an error.
func PromtoolCheckMetrics(ctx context.Context, page string) error {
	cmd := exec.CommandContext(ctx, "promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool check metrics: %v:\n%s", err, out)
	}
	return nil
}
