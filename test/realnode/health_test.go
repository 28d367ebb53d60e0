package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// metricsPort is the operator's --metrics-addr port in deploy/operator.yaml.
const metricsPort = 8080

// TestOperatorProbesAndMetrics checks the health and metrics server of the two
// operator pods that `make deploy` runs: the kubelet probes /readyz and /healthz
// on the port deploy/operator.yaml names (their request counters grow while the
// test asks neither), both answer 200 from the host on the pod IPs, /metrics
// shows the leader's reconciles, work queues and API requests and who leads, and
// the server answers nothing but those three paths.
func TestOperatorProbesAndMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	createMemcached(t, admin, "metrics", 1)
	waitServing(t, "metrics", 1)
	leader, standby := leaderAndStandby(t, admin)
	pods := []framework.Pod{leader, standby}

	t.Run("probes and port in the pod spec", func(t *testing.T) {
		for _, p := range pods {
			c, err := operatorContainerSpec(ctx, admin, p.Metadata.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(c.Ports, func(p containerPort) bool { return p.Name == "metrics" && p.ContainerPort == metricsPort }) {
				t.Errorf("pod %s: ports %+v, want metrics %d", p.Metadata.Name, c.Ports, metricsPort)
			}
			for _, probe := range []struct {
				name string
				got  *probe
				path string
			}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
				if probe.got == nil || probe.got.HTTPGet == nil || probe.got.HTTPGet.Path != probe.path || probe.got.HTTPGet.Port.String() != "metrics" {
					t.Errorf("pod %s: %s %+v, want httpGet %s on port metrics", p.Metadata.Name, probe.name, probe.got, probe.path)
				}
			}
		}
	})

	t.Run("the kubelet probes both pods", func(t *testing.T) {
		for _, p := range pods {
			first, err := scrape(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			// Readiness every 5s, liveness every 10s: both counters grow, though the
			// test itself asks only for /metrics.
			err = framework.Eventually(ctx, time.Minute, "the kubelet to probe "+p.Metadata.Name, func(ctx context.Context) error {
				now, err := scrape(ctx, p)
				if err != nil {
					return err
				}
				for _, h := range []string{"readyz", "healthz"} {
					series := `memcached_operator_http_requests_total{code="200",handler="` + h + `"}`
					if value(now, series) < value(first, series)+2 {
						return fmt.Errorf("%s: %v, was %v", series, value(now, series), value(first, series))
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if !p.Ready() {
				t.Errorf("pod %s is not Ready", p.Metadata.Name)
			}
		}
	})

	t.Run("healthz and readyz from the host", func(t *testing.T) {
		for _, p := range pods {
			for _, path := range []string{"/healthz", "/readyz"} {
				code, body, err := podGet(ctx, p, path)
				if err != nil {
					t.Fatal(err)
				}
				if code != http.StatusOK || body != "ok\n" {
					t.Errorf("GET %s on %s = %d %q, want 200 ok", path, p.Metadata.Name, code, body)
				}
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		page, err := scrape(ctx, leader)
		if err != nil {
			t.Fatal(err)
		}
		for series, least := range map[string]float64{
			`memcached_operator_leader`:                                                             1,
			`memcached_operator_reconcile_total{result="success"}`:                                  1,
			`memcached_operator_reconcile_duration_seconds_count`:                                   1,
			`memcached_operator_workqueue_adds_total{queue="memcached-reconcile"}`:                  1,
			`memcached_operator_workqueue_work_duration_seconds_count{queue="memcached-reconcile"}`: 1,
			`memcached_operator_api_requests_total{code="200",verb="GET"}`:                          1,
			`memcached_operator_api_requests_total{code="200",verb="PUT"}`:                          1,
			`memcached_operator_api_request_duration_seconds_count{verb="GET"}`:                     1,
		} {
			if got := value(page, series); got < least {
				t.Errorf("leader %s: %s = %v, want at least %v", leader.Metadata.Name, series, got, least)
			}
		}
		// The handler's own queue; the SDK's, "memcacheds", is there too while
		// the SDK delivers the Memcached events.
		for _, series := range []string{`memcached_operator_workqueue_depth{queue="memcached-reconcile"}`, `memcached_operator_workqueue_retries_total{queue="memcached-reconcile"}`} {
			if value(page, series) < 0 {
				t.Errorf("leader %s: no series %s", leader.Metadata.Name, series)
			}
		}
		page, err = scrape(ctx, standby)
		if err != nil {
			t.Fatal(err)
		}
		if got := value(page, `memcached_operator_leader`); got != 0 {
			t.Errorf("standby %s: memcached_operator_leader = %v, want 0", standby.Metadata.Name, got)
		}
		if got := value(page, `memcached_operator_reconcile_total{result="success"}`); got != 0 {
			t.Errorf("standby %s reconciled %v times, want 0", standby.Metadata.Name, got)
		}
		// The standby's API requests are its reads of the Lease.
		if got := value(page, `memcached_operator_api_requests_total{code="200",verb="GET"}`); got < 1 {
			t.Errorf("standby %s: %v GET requests, want its reads of the lease", standby.Metadata.Name, got)
		}
	})

	t.Run("nothing beyond metrics", func(t *testing.T) {
		for _, p := range pods {
			for _, path := range []string{"/", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/vars", "/env", "/metrics/x"} {
				code, _, err := podGet(ctx, p, path)
				if err != nil {
					t.Fatal(err)
				}
				if code != http.StatusNotFound {
					t.Errorf("GET %s on %s = %d, want 404", path, p.Metadata.Name, code)
				}
			}
			page, err := scrape(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(page), "\n") {
				switch {
				case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# TYPE "):
				case strings.HasPrefix(line, "memcached_operator_"), strings.HasPrefix(line, "go_"), strings.HasPrefix(line, "process_"):
				default:
					t.Errorf("%s: unexpected line on /metrics: %q", p.Metadata.Name, line)
				}
			}
			// Names of this deploy, which only an environment or object dump would show.
			for _, secret := range []string{p.Metadata.Name, namespace, "serviceaccount", "KUBERNETES_", "198.18.", "198.19."} {
				if strings.Contains(page, secret) {
					t.Errorf("%s: /metrics contains %q", p.Metadata.Name, secret)
				}
			}
		}
	})
}

// TestReadinessFollowsTheLease shows that the operator pods are Ready only through
// their readiness probe: with the Role's Lease rules revoked, new operator pods run
// (the liveness probe passes, nothing restarts) but stay not Ready, /readyz saying
// why; once deploy/rbac.yaml is applied again, the same pods turn Ready.
func TestReadinessFollowsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := deployOperatorNamespace(t, "readiness", memcachedImage)
	dumpOnFailure(t, k)
	leaderAndStandby(t, k)

	revokeLeases(t, k)
	if _, err := k.Run(ctx, "delete", "pods", "-l", "app.kubernetes.io/name="+operatorName, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	var blocked []framework.Pod
	err := framework.Eventually(ctx, readyTimeout, "new operator pods that run but are not Ready", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d live operator pods, want 2", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != "Running" || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s is %s with IP %q", p.Metadata.Name, p.Status.Phase, p.Status.PodIP)
			}
			code, body, err := podGet(ctx, p, "/readyz")
			if err != nil {
				return err
			}
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "leader-election: cannot read lease") || !strings.Contains(body, "Forbidden") {
				return fmt.Errorf("GET /readyz on %s = %d %q, want 503 saying the lease is forbidden", p.Metadata.Name, code, body)
			}
		}
		blocked = pods
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := podGet(ctx, blocked[0], "/readyz")
	t.Logf("GET /readyz on %s: 503 %s", blocked[0].Metadata.Name, strings.TrimSpace(body))

	// Several readiness periods (5s) and a liveness period (10s).
	err = framework.Consistently(ctx, 15*time.Second, "pods that run, pass liveness and are not Ready", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if !slices.ContainsFunc(blocked, func(b framework.Pod) bool { return b.Metadata.UID == p.Metadata.UID }) {
				return fmt.Errorf("pod %s replaced the pods under test", p.Metadata.Name)
			}
			if p.Ready() || restarts(p) != 0 || p.Status.Phase != "Running" {
				return fmt.Errorf("pod %s is %s, ready %t, %d restarts; want Running, not Ready, 0 restarts", p.Metadata.Name, p.Status.Phase, p.Ready(), restarts(p))
			}
			if code, _, err := podGet(ctx, p, "/healthz"); err != nil || code != http.StatusOK {
				return fmt.Errorf("GET /healthz on %s = %d, %v; want 200", p.Metadata.Name, code, err)
			}
			// Not even for a moment at start, before its checks were in place.
			page, err := scrape(ctx, p)
			if err != nil {
				return err
			}
			if n := value(page, `memcached_operator_http_requests_total{code="200",handler="readyz"}`); n > 0 {
				return fmt.Errorf("pod %s answered /readyz with 200 %v times", p.Metadata.Name, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := k.Run(ctx, "apply", "-f", paths.Deploy("rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	err = framework.Eventually(ctx, readyTimeout, "the same pods to turn Ready", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if !slices.ContainsFunc(blocked, func(b framework.Pod) bool { return b.Metadata.UID == p.Metadata.UID }) {
				return framework.Permanent(fmt.Errorf("pod %s replaced the pods under test", p.Metadata.Name))
			}
			if !p.Ready() || restarts(p) != 0 {
				return fmt.Errorf("pod %s: ready %t, %d restarts", p.Metadata.Name, p.Ready(), restarts(p))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	leader, standby := leaderAndStandby(t, k)
	t.Logf("with the lease readable again, %s leads and %s stands by, both Ready, no restarts", leader.Metadata.Name, standby.Metadata.Name)
}

// revokeLeases removes the Role's rules on leases and waits until the API
// server's authorizer denies the operator's ServiceAccount reading its Lease.
func revokeLeases(t *testing.T, k framework.Kubectl) {
	t.Helper()
	ctx := context.Background()
	var role struct {
		Rules []map[string]any `json:"rules"`
	}
	if err := k.GetJSON(ctx, &role, "role", operatorName); err != nil {
		t.Fatal(err)
	}
	rules := slices.DeleteFunc(role.Rules, func(r map[string]any) bool {
		resources, _ := r["resources"].([]any)
		return slices.Contains(resources, any("leases"))
	})
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/rules", "value": rules}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, "patch", "role", operatorName, "--type=json", "-p", string(patch)); err != nil {
		t.Fatal(err)
	}
	as := "system:serviceaccount:" + k.Namespace + ":" + operatorSA
	err = framework.Eventually(ctx, time.Minute, "RBAC to deny the operator its lease", func(ctx context.Context) error {
		// kubectl auth can-i exits 1 when the answer is no.
		out, _ := k.Run(ctx, "auth", "can-i", "get", "leases.coordination.k8s.io/"+operatorName, "--as", as)
		if strings.TrimSpace(out) != "no" {
			return fmt.Errorf("can-i get lease: %q", out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// containerPort, probe and containerSpec are the parts of a pod's container spec
// that the tests read.
type containerPort struct {
	Name          string `json:"name"`
	ContainerPort int    `json:"containerPort"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `json:"path"`
		Port jsonValue `json:"port"`
	} `json:"httpGet"`
}

type containerSpec struct {
	Name           string          `json:"name"`
	Ports          []containerPort `json:"ports"`
	ReadinessProbe *probe          `json:"readinessProbe"`
	LivenessProbe  *probe          `json:"livenessProbe"`
}

// jsonValue is a JSON string or number, such as a probe's port.
type jsonValue string

func (v *jsonValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = jsonValue(s)
		return nil
	}
	*v = jsonValue(b)
	return nil
}

func (v jsonValue) String() string { return string(v) }

// operatorContainerSpec returns the spec of the operator container of pod name.
func operatorContainerSpec(ctx context.Context, k framework.Kubectl, name string) (containerSpec, error) {
	var pod struct {
		Spec struct {
			Containers []containerSpec `json:"containers"`
		} `json:"spec"`
	}
	if err := k.GetJSON(ctx, &pod, "pod", name); err != nil {
		return containerSpec{}, err
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == operatorName {
			return c, nil
		}
	}
	return containerSpec{}, fmt.Errorf("pod %s has no container %s", name, operatorName)
}

// podGet requests path from the operator's server on pod p's IP, from the host.
func podGet(ctx context.Context, p framework.Pod, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(metricsPort)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// scrape returns the /metrics page of pod p.
func scrape(ctx context.Context, p framework.Pod) (string, error) {
	code, body, err := podGet(ctx, p, "/metrics")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /metrics on %s = %d", p.Metadata.Name, code)
	}
	return body, nil
}

// value returns the value of series, as /metrics prints it (labels sorted by
// name), or -1 when page has no such series.
func value(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}
