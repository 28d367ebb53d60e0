package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	"sigs.k8s.io/yaml"
)

const (
	// serviceMonitorCRD is the Prometheus Operator's API reduced to what the
	// operator needs: the group, version and names, with a spec the API
	// server keeps as it is sent.
	serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names:
    kind: ServiceMonitor
    listKind: ServiceMonitorList
    plural: servicemonitors
    singular: servicemonitor
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`
	serviceMonitorCRDName = "servicemonitors.monitoring.coreos.com"
	// prometheusRuleCRD is the Prometheus Operator's PrometheusRule API,
	// reduced the same way; the Prometheus Operator installs both.
	prometheusRuleCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names:
    kind: PrometheusRule
    listKind: PrometheusRuleList
    plural: prometheusrules
    singular: prometheusrule
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`
	prometheusRuleCRDName = "prometheusrules.monitoring.coreos.com"
	// monitoringSpec asks for monitoring, the PrometheusRule and the label
	// that a kube-prometheus-stack release selects on.
	monitoringSpec = "spec:\n  size: 1\n  monitoring: {enabled: true, prometheusRule: true, labels: {release: kube-prometheus-stack}}\n"
	// serviceMonitorNotice bounds how long the operator takes to notice a
	// CRD installed after it asked discovery: its check interval (the
	// test's --servicemonitor-check-interval) plus the test's --resync,
	// which brings the reconcile that asks again, plus 30 s for that
	// reconcile. It is shorter than the default one-minute check, so the
	// test fails if the operator does not honour the flag.
	serviceMonitorNotice = serviceMonitorCheck + serviceMonitorResync + 30*time.Second
	serviceMonitorCheck  = 5 * time.Second
	serviceMonitorResync = 5 * time.Second
)

// serviceMonitor is the part of a ServiceMonitor that the test checks.
type serviceMonitor struct {
	Metadata framework.ObjectMeta `json:"metadata"`
	Spec     struct {
		Selector          labelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitorFollowsTheAPI checks that a Memcached with monitoring is
// healthy, with no complaint, while the Prometheus Operator's API is not
// served; that the operator notices the CRDs installed later and creates a
// ServiceMonitor that scrapes the Service's metrics port, labelling the
// series with the Memcached's name, and a PrometheusRule whose rules
// promtool accepts and select the Memcached's series only, both owned by the Memcached and labelled with
// spec.monitoring.labels, which are put back when removed and taken off
// when the spec drops them; that it deletes
// both when monitoring is turned off; and that it leaves someone else's
// ServiceMonitor alone.
//
// It runs serially: the CRDs it installs and deletes are the whole
// cluster's, and every operator running would follow them.
func TestServiceMonitorFollowsTheAPI(t *testing.T) {
	ctx := context.Background()
	admin := cluster.Kubectl()
	if _, err := admin.Run(ctx, "delete", "crd", serviceMonitorCRDName, prometheusRuleCRDName, "--ignore-not-found", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Run(context.Background(), "delete", "crd", serviceMonitorCRDName, prometheusRuleCRDName, "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator(fmt.Sprintf("--resync=%v", serviceMonitorResync), fmt.Sprintf("--servicemonitor-check-interval=%v", serviceMonitorCheck))
	ns.apply(memcachedManifest("cache", monitoringSpec))

	// Without the API: converged, Degraded=False, and no Warning Event.
	ns.waitConverged("cache", 1)
	var warnings struct{ Items []framework.Event }
	if err := ns.kubectl.GetJSON(ctx, &warnings, "events", "--field-selector", "involvedObject.kind=Memcached,involvedObject.name=cache,type=Warning"); err != nil {
		t.Fatal(err)
	}
	if len(warnings.Items) != 0 {
		t.Fatalf("Warning Events without the ServiceMonitor API: %+v, want none", warnings.Items)
	}

	if err := admin.Apply(ctx, serviceMonitorCRD+"---\n"+prometheusRuleCRD); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Run(ctx, "wait", "--for=condition=Established", "crd/"+serviceMonitorCRDName, "crd/"+prometheusRuleCRDName, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}

	uid := ns.snapshot("cache").Memcached.Metadata.UID
	var svc service
	err := framework.Eventually(ctx, serviceMonitorNotice, "the servicemonitor of memcached cache", func(ctx context.Context) error {
		var sm serviceMonitor
		if err := ns.kubectl.GetJSON(ctx, &sm, "servicemonitor", "cache"); err != nil {
			return err
		}
		if err := ns.kubectl.GetJSON(ctx, &svc, "service", "cache"); err != nil {
			return err
		}
		if err := checkServiceMonitor(sm, svc, ns.name, uid); err != nil {
			return err
		}
		if sm.Metadata.Labels["release"] != "kube-prometheus-stack" {
			return fmt.Errorf("servicemonitor labels %v, want spec.monitoring.labels' release=kube-prometheus-stack", sm.Metadata.Labels)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.eventually("the prometheusrule of memcached cache", func(ctx context.Context) error {
		return checkPrometheusRule(ctx, t, ns, uid)
	})
	// A removed label is put back, on the reconcile of the next resync.
	ns.run("label", "prometheusrule", "cache", "release-")
	ns.run("label", "servicemonitor", "cache", "release-")
	ns.eventually("the release label back on the servicemonitor and the prometheusrule", func(ctx context.Context) error {
		for _, kind := range []string{"servicemonitor", "prometheusrule"} {
			var o struct{ Metadata framework.ObjectMeta }
			if err := ns.kubectl.GetJSON(ctx, &o, kind, "cache"); err != nil {
				return err
			}
			if o.Metadata.Labels["release"] != "kube-prometheus-stack" {
				return fmt.Errorf("%s labels %v, want release=kube-prometheus-stack", kind, o.Metadata.Labels)
			}
		}
		return nil
	})
	// A label taken out of the spec is taken off; the new one is added.
	ns.run("patch", "memcached", "cache", "--type=merge", "-p", `{"spec":{"monitoring":{"labels":{"release":null,"tier":"cache"}}}}`)
	ns.eventually("release off and tier on the servicemonitor and the prometheusrule", func(ctx context.Context) error {
		for _, kind := range []string{"servicemonitor", "prometheusrule"} {
			var o struct{ Metadata framework.ObjectMeta }
			if err := ns.kubectl.GetJSON(ctx, &o, kind, "cache"); err != nil {
				return err
			}
			if _, ok := o.Metadata.Labels["release"]; ok || o.Metadata.Labels["tier"] != "cache" {
				return fmt.Errorf("%s labels %v, want tier=cache and no release", kind, o.Metadata.Labels)
			}
		}
		return nil
	})
	ns.eventually("the ServiceMonitorCreated Event", func(ctx context.Context) error {
		events, err := ns.events(ctx, "cache", "ServiceMonitorCreated")
		if err == nil && len(events) == 0 {
			err = errors.New("none yet")
		}
		return err
	})
	// The first check may read before a Warning the operator sent: its
	// recorder writes Events from goroutines of its own, one for Normal
	// and one for Warning Events (pkg/events), so nothing orders a Warning
	// before the ServiceMonitorCreated Event. By now, after the CRDs and
	// several reconciles, one sent while the API was missing has had
	// seconds to land; none may have come since either.
	if err := ns.kubectl.GetJSON(ctx, &warnings, "events", "--field-selector", "involvedObject.kind=Memcached,involvedObject.name=cache,type=Warning"); err != nil {
		t.Fatal(err)
	}
	if len(warnings.Items) != 0 {
		t.Fatalf("Warning Events while the ServiceMonitor API came: %+v, want none", warnings.Items)
	}

	// Monitoring off: the ServiceMonitor and the PrometheusRule go, and so
	// does the port.
	ns.run("patch", "memcached", "cache", "--type=merge", "-p", `{"spec":{"monitoring":null}}`)
	ns.eventually("the servicemonitor and prometheusrule of memcached cache to be deleted", func(ctx context.Context) error {
		out, err := ns.kubectl.Run(ctx, "get", "servicemonitors,prometheusrules", "-o", "name")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Errorf("servicemonitors left: %s", out)
		}
		events, err := ns.events(ctx, "cache", "ServiceMonitorDeleted")
		if err == nil && len(events) == 0 {
			err = errors.New("no ServiceMonitorDeleted Event yet")
		}
		return err
	})
	ns.waitConverged("cache", 1)

	// Someone else's ServiceMonitor of the same name stays as it is.
	ns.apply(`apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: foreign
spec:
  selector: {matchLabels: {team: other}}
  endpoints: [{port: web}]
`)
	ns.apply(memcachedManifest("foreign", "spec:\n  size: 1\n  monitoring: {enabled: true}\n"))
	ns.eventually("memcached foreign to report the servicemonitor it does not own", func(ctx context.Context) error {
		o, err := framework.Observe(ctx, ns.kubectl, "foreign")
		if err != nil {
			return err
		}
		if c := o.Memcached.Condition("Degraded"); c == nil || c.Status != "True" || c.Reason != "ServiceMonitorNotOwned" {
			return fmt.Errorf("condition Degraded = %+v, want True with reason ServiceMonitorNotOwned", c)
		}
		return nil
	})
	var foreign serviceMonitor
	if err := ns.kubectl.GetJSON(ctx, &foreign, "servicemonitor", "foreign"); err != nil {
		t.Fatal(err)
	}
	if len(foreign.Metadata.OwnerReferences) != 0 || foreign.Spec.Selector.MatchLabels["team"] != "other" || len(foreign.Spec.Endpoints) != 1 || foreign.Spec.Endpoints[0].Port != "web" {
		t.Errorf("the foreign servicemonitor changed: %+v", foreign)
	}
}

// checkServiceMonitor returns nil when sm selects svc's labels in
// namespace, scrapes its port named metrics, labelling the series memcached
// with the pods' memcached_cr label, and has the Memcached of uid
// as its controller, blocking its deletion.
func checkServiceMonitor(sm serviceMonitor, svc service, namespace, uid string) error {
	selector := sm.Spec.Selector.MatchLabels
	if len(selector) == 0 || !maps.Equal(selector, map[string]string{"app": "memcached", "memcached_cr": "cache"}) {
		return fmt.Errorf("servicemonitor selector %v, want the memcached's labels", selector)
	}
	for k, v := range selector {
		if svc.Metadata.Labels[k] != v {
			return fmt.Errorf("servicemonitor selector %v does not select service labels %v", selector, svc.Metadata.Labels)
		}
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		return fmt.Errorf("servicemonitor namespaceSelector %v, want [%s]", sm.Spec.NamespaceSelector.MatchNames, namespace)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Interval == "" {
		return fmt.Errorf("servicemonitor endpoints %+v, want the port metrics with an interval", sm.Spec.Endpoints)
	}
	if r := sm.Spec.Endpoints[0].Relabelings; len(r) != 1 || !slices.Equal(r[0].SourceLabels, []string{"__meta_kubernetes_pod_label_memcached_cr"}) || r[0].TargetLabel != "memcached" {
		return fmt.Errorf("servicemonitor relabelings %+v, want the pod's memcached_cr label copied to memcached", r)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return p.Name == "metrics" }) {
		return fmt.Errorf("service ports %+v have no port named metrics", svc.Spec.Ports)
	}
	refs := sm.Metadata.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Memcached" || refs[0].UID != uid || refs[0].Controller == nil || !*refs[0].Controller ||
		refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		return fmt.Errorf("servicemonitor owner references %+v, want memcached cache (uid %s) as controller, blocking its deletion", refs, uid)
	}
	return nil
}

// prometheusRule is the part of a PrometheusRule that the test checks.
type prometheusRule struct {
	Metadata framework.ObjectMeta `json:"metadata"`
	Spec     struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert  string            `json:"alert"`
				Expr   string            `json:"expr"`
				Labels map[string]string `json:"labels"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// checkPrometheusRule returns nil when memcached cache's PrometheusRule has
// the Memcached of uid as its controller, the release label, and alerts
// that select the Memcached's pods and carry its name, and when promtool
// accepts its spec as a rule file; a refusal of promtool's ends the wait.
func checkPrometheusRule(ctx context.Context, t *testing.T, ns *namespace, uid string) error {
	var raw map[string]any
	if err := ns.kubectl.GetJSON(ctx, &raw, "prometheusrule", "cache"); err != nil {
		return err
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	var r prometheusRule
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	refs := r.Metadata.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Memcached" || refs[0].UID != uid || refs[0].Controller == nil || !*refs[0].Controller {
		return fmt.Errorf("prometheusrule owner references %+v, want memcached cache (uid %s) as controller", refs, uid)
	}
	if r.Metadata.Labels["release"] != "kube-prometheus-stack" || r.Metadata.Labels["memcached_cr"] != "cache" {
		return fmt.Errorf("prometheusrule labels %v, want release=kube-prometheus-stack beside the operator's", r.Metadata.Labels)
	}
	pods := fmt.Sprintf(`namespace=%q,memcached="cache"`, ns.name)
	if len(r.Spec.Groups) != 1 || len(r.Spec.Groups[0].Rules) == 0 {
		return fmt.Errorf("prometheusrule groups %+v, want one with the cache alerts", r.Spec.Groups)
	}
	for _, rule := range r.Spec.Groups[0].Rules {
		if !strings.Contains(rule.Expr, pods) || rule.Labels["memcached"] != "cache" {
			return fmt.Errorf("alert %s: expression %s, labels %v: want the selector %s and memcached=cache", rule.Alert, rule.Expr, rule.Labels, pods)
		}
	}
	spec, err := yaml.Marshal(raw["spec"])
	if err != nil {
		return err
	}
	file := filepath.Join(t.TempDir(), "prometheusrule.yaml")
	if err := os.WriteFile(file, spec, 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "promtool", "check", "rules", file).CombinedOutput()
	if err != nil {
		return framework.Permanent(fmt.Errorf("promtool check rules on the prometheusrule's spec (test/scripts/install-deps.sh test installs promtool): %v\n%s", err, out))
	}
	t.Logf("promtool check rules on the prometheusrule's spec:\n%s", out)
	return nil
}
