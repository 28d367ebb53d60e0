package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
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
			Port     string `json:"port"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitorFollowsTheAPI checks that a Memcached with monitoring is
// healthy, with no complaint, while the ServiceMonitor API is not served;
// that the operator notices the CRD installed later and creates a
// ServiceMonitor that scrapes the Service's metrics port, owned by the
// Memcached; that it deletes it when monitoring is turned off; and that it
// leaves someone else's ServiceMonitor alone.
//
// It runs serially: the ServiceMonitor CRD it installs and deletes is the
// whole cluster's, and every operator running would follow it.
func TestServiceMonitorFollowsTheAPI(t *testing.T) {
	ctx := context.Background()
	admin := cluster.Kubectl()
	if _, err := admin.Run(ctx, "delete", "crd", serviceMonitorCRDName, "--ignore-not-found", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Run(context.Background(), "delete", "crd", serviceMonitorCRDName, "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator(fmt.Sprintf("--resync=%v", serviceMonitorResync), fmt.Sprintf("--servicemonitor-check-interval=%v", serviceMonitorCheck))
	ns.apply(memcachedManifest("cache", "spec:\n  size: 1\n  monitoring: {enabled: true}\n"))

	// Without the API: converged, Degraded=False, and no Warning Event.
	ns.waitConverged("cache", 1)
	var warnings struct{ Items []framework.Event }
	if err := ns.kubectl.GetJSON(ctx, &warnings, "events", "--field-selector", "involvedObject.kind=Memcached,involvedObject.name=cache,type=Warning"); err != nil {
		t.Fatal(err)
	}
	if len(warnings.Items) != 0 {
		t.Fatalf("Warning Events without the ServiceMonitor API: %+v, want none", warnings.Items)
	}

	if err := admin.Apply(ctx, serviceMonitorCRD); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Run(ctx, "wait", "--for=condition=Established", "crd/"+serviceMonitorCRDName, "--timeout=60s"); err != nil {
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
		return checkServiceMonitor(sm, svc, ns.name, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.eventually("the ServiceMonitorCreated Event", func(ctx context.Context) error {
		events, err := ns.events(ctx, "cache", "ServiceMonitorCreated")
		if err == nil && len(events) == 0 {
			err = errors.New("none yet")
		}
		return err
	})

	// Monitoring off: the ServiceMonitor goes, and so does the port.
	ns.run("patch", "memcached", "cache", "--type=merge", "-p", `{"spec":{"monitoring":null}}`)
	ns.eventually("the servicemonitor of memcached cache to be deleted", func(ctx context.Context) error {
		out, err := ns.kubectl.Run(ctx, "get", "servicemonitors", "-o", "name")
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
// namespace, scrapes its port named metrics, and has the Memcached of uid
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
