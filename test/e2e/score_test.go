package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kubeScoreLeftFailing are the kube-score checks that the operator's manifests and
// children fail on purpose, by the kind of object they fail on. The section
// "What kube-score says" of docs/reliability.md gives each reason; TestKubeScore
// checks that each still fails, so that the list never outlives the reason, and
// that the section names each check.
var kubeScoreLeftFailing = map[string][]string{
	// Both memcached's probes can only connect to its port; they differ in
	// how long they wait (memcached.memcachedProbes), which kube-score does
	// not compare.
	"pod-probes-identical": {"memcached Deployment"},
	// No CPU limit on memcached or its sidecar: the CFS quota would stall a
	// busy memcached and add the stall to its replies' latency.
	"container-resources": {"memcached Deployment"},
	// IfNotPresent: a restarted container must come back while the registry
	// is down.
	"container-image-pull-policy": {"memcached Deployment", "operator Deployment"},
	// No NetworkPolicy: spec.networkPolicy, which says who may reach a
	// cache, is off by default. The operator's deploy/networkpolicy.yaml
	// limits ingress alone: its egress goes to the API server, whose
	// address no portable policy knows, and to the sidecars of every
	// namespace it serves.
	"pod-networkpolicy": {"memcached Deployment", "operator Deployment"},
	// memcached's pods spread by topologySpreadConstraints, which allow two on
	// one node when there is a single node, and anti-affinity does not.
	"deployment-has-host-podantiaffinity": {"memcached Deployment"},
}

// scoredObject is one object of kube-score's JSON output (version 2).
type scoredObject struct {
	ObjectName string `json:"object_name"`
	TypeMeta   struct {
		Kind string `json:"kind"`
	} `json:"type_meta"`
	ObjectMeta struct {
		Name string `json:"name"`
	} `json:"object_meta"`
	Checks []struct {
		Check struct {
			ID string `json:"id"`
		} `json:"check"`
		Grade    int  `json:"grade"`
		Skipped  bool `json:"skipped"`
		Comments []struct {
			Path, Summary string
		} `json:"comments"`
	} `json:"checks"`
}

// kubeScoreWarning is kube-score's grade of a warning; critical is lower, and
// "almost OK" and "all OK" are higher.
const kubeScoreWarning = 5

// TestKubeScore runs kube-score v1.20.0 (test/tools/kube-score) on deploy/ and on
// the children that the operator builds for a plain Memcached and for one with TLS,
// auth and monitoring, read back from the API server. Every check that fails (a
// warning or worse) must be in kubeScoreLeftFailing, every entry there must still
// fail, and docs/reliability.md must name each of them.
func TestKubeScore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin := paths.Tool("kube-score")
	if err := paths.RequireTools("kube-score"); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.apply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: plain
spec:
  size: 2
---
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: secure
spec:
  size: 2
  tls: {secretName: secure-tls, clientCertificates: Required}
  auth: {secretName: secure-users}
  monitoring: {enabled: true}
`)
	ns.waitConverged("plain", 2)
	ns.waitConverged("secure", 2)

	var children struct {
		Items []map[string]any `json:"items"`
	}
	if err := ns.kubectl.GetJSON(ctx, &children, "deployments,services,poddisruptionbudgets", "-l", "app=memcached"); err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, item := range children.Items {
		delete(item, "status")
		b, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	childrenFile := filepath.Join(ns.dir, "children.yaml")
	if err := os.WriteFile(childrenFile, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	failing := map[string][]string{}
	score := func(what string, files ...string) {
		t.Helper()
		args := append([]string{"score", "--kubernetes-version", "v1.37", "--output-format", "json", "--output-version", "v2"}, files...)
		// kube-score exits 1 when a check fails; its JSON says which.
		out, err := exec.CommandContext(ctx, bin, args...).Output()
		var objects []scoredObject
		if jerr := json.Unmarshal(out, &objects); jerr != nil {
			t.Fatalf("kube-score on %s: %v; output %q: %v", what, err, out, jerr)
		}
		for _, o := range objects {
			kind := what + " " + o.TypeMeta.Kind
			for _, c := range o.Checks {
				if c.Skipped || c.Grade > kubeScoreWarning {
					continue
				}
				var why []string
				for _, cm := range c.Comments {
					why = append(why, strings.TrimSpace(cm.Path+" "+cm.Summary))
				}
				t.Logf("kube-score: %s %s fails %s: %s", o.TypeMeta.Kind, o.ObjectMeta.Name, c.Check.ID, strings.Join(why, "; "))
				if !slices.Contains(failing[c.Check.ID], kind) {
					failing[c.Check.ID] = append(failing[c.Check.ID], kind)
				}
			}
		}
	}
	score("operator", paths.Deploy("operator.yaml"), paths.Deploy("pdb.yaml"), paths.Deploy("networkpolicy.yaml"), paths.Deploy("sa.yaml"), paths.Deploy("rbac.yaml"))
	score("memcached", childrenFile)

	for id, kinds := range failing {
		for _, kind := range kinds {
			if !slices.Contains(kubeScoreLeftFailing[id], kind) {
				t.Errorf("kube-score: the %s fails %s, which is not among the checks docs/reliability.md explains", kind, id)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(paths.Root, "docs", "reliability.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "## What kube-score says"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[3:], "\n## "); j >= 0 {
			section = section[:3+j]
		}
	} else {
		t.Errorf("docs/reliability.md has no section \"What kube-score says\"")
	}
	for id, kinds := range kubeScoreLeftFailing {
		for _, kind := range kinds {
			if !slices.Contains(failing[id], kind) {
				t.Errorf("kube-score: the %s passes %s now: remove it from kubeScoreLeftFailing and docs/reliability.md", kind, id)
			}
		}
		if !strings.Contains(section, "`"+id+"`") {
			t.Errorf("docs/reliability.md's \"What kube-score says\" does not name %s", id)
		}
	}
	if t.Failed() {
		t.Logf("children scored: %s", childrenFile)
	}
}
