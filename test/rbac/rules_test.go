// Package rbac checks deploy/'s RBAC offline: that the cluster scope's
// ClusterRole (deploy/cluster) grants the operator what the namespaced Role
// of deploy/rbac.yaml grants it, in every namespace, and nothing more, but
// for the Lease, which stays a Role of the operator's own namespace, and
// for the list and watch of namespaces that --namespace-selector needs.
package rbac

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const deploy = "../../deploy"

// objects are the RBAC objects of one file, by kind.
type objects struct {
	Role               *rbacv1.Role
	RoleBinding        *rbacv1.RoleBinding
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
}

// load decodes the RBAC objects of deploy/name, strictly, one of each kind
// at most.
func load(t *testing.T, name string) objects {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deploy, name))
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var target any
		switch meta.Kind {
		case "":
			continue
		case "Role":
			o.Role = &rbacv1.Role{}
			target = o.Role
		case "RoleBinding":
			o.RoleBinding = &rbacv1.RoleBinding{}
			target = o.RoleBinding
		case "ClusterRole":
			o.ClusterRole = &rbacv1.ClusterRole{}
			target = o.ClusterRole
		case "ClusterRoleBinding":
			o.ClusterRoleBinding = &rbacv1.ClusterRoleBinding{}
			target = o.ClusterRoleBinding
		default:
			t.Fatalf("%s: unexpected kind %s", name, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return o
}

// grants expands rules into one line per group, resource, name and verb,
// sorted, so that two sets of rules compare equal when they grant the
// same, however they are split or ordered.
func grants(rules []rbacv1.PolicyRule) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*any*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						seen[fmt.Sprintf("%s/%s name=%s %s", g, res, n, v)] = true
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				seen["url "+u+" "+v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// split returns rules' Lease rules and the others.
func split(rules []rbacv1.PolicyRule) (lease, others []rbacv1.PolicyRule) {
	for _, r := range rules {
		isLease := len(r.APIGroups) == 1 && r.APIGroups[0] == "coordination.k8s.io" && len(r.Resources) == 1 && r.Resources[0] == "leases"
		if isLease {
			lease = append(lease, r)
		} else {
			others = append(others, r)
		}
	}
	return lease, others
}

// diff returns the grants of got that want lacks, and those of want that got
// lacks.
func diff(got, want []string) (extra, missing []string) {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	g, w := in(got), in(want)
	for _, x := range got {
		if !w[x] {
			extra = append(extra, x)
		}
	}
	for _, x := range want {
		if !g[x] {
			missing = append(missing, x)
		}
	}
	return extra, missing
}

// clusterOnly are the grants of the ClusterRole that no Role can hold: the
// list and watch of namespaces, for --namespace-selector.
var clusterOnly = []string{"/namespaces name=*any* list", "/namespaces name=*any* watch"}

// TestClusterRoleGrantsTheRolesRules: the ClusterRole grants exactly the
// namespaced Role's rules but the Lease's, plus clusterOnly, and the
// leader-election Role exactly the Lease's, so that the two scopes never
// drift apart.
func TestClusterRoleGrantsTheRolesRules(t *testing.T) {
	namespaced := load(t, "rbac.yaml")
	cluster := load(t, "cluster/cluster-role.yaml")
	leader := load(t, "cluster/leader-election.yaml")
	if namespaced.Role == nil || cluster.ClusterRole == nil || leader.Role == nil {
		t.Fatalf("want a Role in rbac.yaml, a ClusterRole in cluster/cluster-role.yaml and a Role in cluster/leader-election.yaml")
	}
	lease, others := split(namespaced.Role.Rules)
	if len(lease) == 0 {
		t.Fatal("rbac.yaml has no Lease rule")
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"the ClusterRole against the Role without its Lease rules, plus namespaces' list and watch", grants(cluster.ClusterRole.Rules), append(grants(others), clusterOnly...)},
		{"the leader-election Role against the Role's Lease rules", grants(leader.Role.Rules), grants(lease)},
	} {
		extra, missing := diff(c.got, c.want)
		if len(extra) > 0 || len(missing) > 0 {
			t.Errorf("%s: grants more %v, grants less %v", c.what, extra, missing)
		}
	}
	if lease, _ := split(cluster.ClusterRole.Rules); len(lease) > 0 {
		t.Errorf("the ClusterRole grants Leases in every namespace: %v", lease)
	}
}

// TestClusterBindingsBindTheOperator: each binding of deploy/cluster binds
// its role to the operator's ServiceAccount of deploy/rbac.yaml's binding.
func TestClusterBindingsBindTheOperator(t *testing.T) {
	want := load(t, "rbac.yaml").RoleBinding.Subjects
	if len(want) != 1 || want[0].Kind != rbacv1.ServiceAccountKind {
		t.Fatalf("rbac.yaml binds %v, want one ServiceAccount", want)
	}
	crb := load(t, "cluster/cluster-role-binding.yaml").ClusterRoleBinding
	if crb == nil || crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != load(t, "cluster/cluster-role.yaml").ClusterRole.Name {
		t.Fatalf("cluster-role-binding.yaml: got %+v, want a ClusterRoleBinding of the ClusterRole", crb)
	}
	if s := crb.Subjects; len(s) != 1 || s[0].Kind != want[0].Kind || s[0].Name != want[0].Name || s[0].Namespace == "" {
		t.Errorf("ClusterRoleBinding subjects: got %+v, want the ServiceAccount %s with a namespace", s, want[0].Name)
	}
	le := load(t, "cluster/leader-election.yaml")
	if le.RoleBinding == nil || le.RoleBinding.RoleRef.Kind != "Role" || le.RoleBinding.RoleRef.Name != le.Role.Name {
		t.Fatalf("leader-election.yaml: got %+v, want a RoleBinding of its Role", le.RoleBinding)
	}
	if s := le.RoleBinding.Subjects; len(s) != 1 || s[0] != want[0] {
		t.Errorf("leader-election RoleBinding subjects: got %+v, want %+v", s, want)
	}
}
