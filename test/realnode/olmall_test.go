package realnode

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/example-inc/memcached-operator/test/framework"
	"github.com/example-inc/memcached-operator/test/olm/catalog"
)

const (
	// allNamespacesOperators is where TestOLMAllNamespacesUpgrade's OperatorGroup, Subscription,
	// CSVs and operator live, as in OLM's own `operators` namespace.
	allNamespacesOperators = "olm-operators"
	// allNamespacesLabel labels the namespaces that the AllNamespaces operator serves: its
	// Subscription's NAMESPACE_SELECTOR.
	allNamespacesLabel = "memcached.example.com/olm-all-namespaces=served"
	// allNamespacesCache is the Memcached of each tenant namespace.
	allNamespacesCache = "olm-cache"
)

// allNamespacesTenants are the two namespaces whose caches the upgrade must leave alone.
var allNamespacesTenants = []string{"olm-tenant-a", "olm-tenant-b"}

// TestOLMAllNamespacesUpgrade installs the bundle as OLM v1 and a platform team install it,
// once for the whole cluster: an AllNamespaces OperatorGroup (no targetNamespaces) in a
// namespace of its own, CSV 0.0.1, then the upgrade to CSV 0.0.2, which replaces it. The
// caches of two tenant namespaces, created under 0.0.1, must keep their pods (the same UIDs,
// no container restarted), their Deployments' generation and template, and the keys written
// before the upgrade; the operator Deployment is updated in place, and its leader on 0.0.2
// reconciles both caches.
//
// The operator is confined. An operator of every namespace would also serve the Memcacheds
// of the suite's parallel tests, each served by its own operator already, so the
// Subscription's spec.config.env sets NAMESPACE_SELECTOR to a label that only the two tenant
// namespaces carry, the way a platform team confines it; the test checks that OLM put it in
// the operator's Deployment for both CSVs, and that the operator says it serves only those.
//
// No catalog operator runs here: the suite applies CSVs directly, as the guide does, and the
// test does the catalog operator's part of an install by hand. It creates the Subscription
// and writes its status.installedCSV, which is how the olm operator finds the Subscription
// whose spec.config.env it applies to a CSV's Deployment, and it creates each CSV's
// permissions as a Role and RoleBinding owned by that CSV, which OLM lifts into a ClusterRole
// (with get, list and watch of namespaces added) and ClusterRoleBinding for an AllNamespaces
// group. The catalog operator moves installedCSV to the new CSV once that exists, while the
// olm operator may be installing it already, a race that the test cannot leave open: the new
// Deployment, written before the move, would run without NAMESPACE_SELECTOR, over every
// namespace. The test closes it with OLM's own gate: an Upgradeable=False override on the
// OperatorCondition of 0.0.1 (holdUpgrades) holds 0.0.2 Pending, and is lifted once 0.0.1 is
// Replacing (so it no longer writes its Deployment) and installedCSV names 0.0.2.
//
// OLM runs once in the suite (startOLM) and accepts no second OperatorGroup providing the
// Memcached API beside an AllNamespaces one, whose targets intersect every namespace: this
// install and TestPromisesAcrossFeatures' take turns (holdOperatorGroup), each removing its
// own at its end. Two caches of one pod each keep the test cheap.
func TestOLMAllNamespacesUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	startOLM(ctx, t)
	im := suiteOLM.images
	admin := cluster.Kubectl()
	k := admin.WithNamespace(allNamespacesOperators)
	workDir := olmWorkDir(t, allNamespacesOperators)
	holdOperatorGroup(ctx, t, allNamespacesOperators)
	framework.DumpOnFailure(t,
		func() string {
			return framework.Describe(ctx, admin, allNamespacesOperators, "operatorgroups,subscriptions,clusterserviceversions,operatorconditions,roles,deployments,pods,leases")
		},
		func() string {
			return framework.Describe(ctx, admin, allNamespacesTenants[0], "memcached,deployments,pods") +
				framework.Describe(ctx, admin, allNamespacesTenants[1], "memcached,deployments,pods")
		},
		func() string {
			return "===== kubectl auth can-i --list as the operator's ServiceAccount, in " + allNamespacesTenants[0] + "\n" +
				output(admin.Run(ctx, "auth", "can-i", "--list", "--namespace", allNamespacesTenants[0], "--as", allNamespacesServiceAccount()))
		},
		olmLog,
		func() string {
			return "===== kubectl logs -l app.kubernetes.io/name=memcached-operator (leader and standby)\n" +
				output(k.Run(ctx, "logs", "-l", "app.kubernetes.io/name="+operatorName, "--prefix", "--tail=100"))
		},
	)

	t.Log("creating the namespaces, the AllNamespaces OperatorGroup and the Subscription, whose spec.config.env sets NAMESPACE_SELECTOR=" + allNamespacesLabel)
	key, value, _ := strings.Cut(allNamespacesLabel, "=")
	var nsManifest strings.Builder
	fmt.Fprintf(&nsManifest, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", allNamespacesOperators)
	for _, ns := range allNamespacesTenants {
		fmt.Fprintf(&nsManifest, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {%s: %s}}\n", ns, key, value)
	}
	mustApply(ctx, t, admin, nsManifest.String())
	mustApply(ctx, t, k, fmt.Sprintf(`apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: %[1]s
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: %[1]s
spec:
  name: %[2]s
  channel: %[3]s
  source: memcached-catalog
  sourceNamespace: %[4]s
  startingCSV: %[5]s
  config:
    env:
      - name: NAMESPACE_SELECTOR
        value: %[6]q
`, operatorName, catalog.PackageName, catalog.Channel, allNamespacesOperators, catalog.CSVName("0.0.1"), allNamespacesLabel))
	waitForTargets(ctx, t, k, "")
	setInstalledCSV(ctx, t, k, "0.0.1")

	t.Log("installing CSV 0.0.1 with deploy/sa.yaml and, as the catalog operator would, its permissions as a Role owned by the CSV")
	mustRun(ctx, t, k, "apply", "-f", paths.Deploy("sa.yaml"))
	applyOwnedCSV(ctx, t, k, workDir, "0.0.1", im)
	waitForCSVSucceeded(ctx, t, k, "0.0.1")
	dep1 := waitForOperatorDeployment(ctx, t, k, "0.0.1", im.operator["0.0.1"], "")
	requireSelectorEnv(ctx, t, k)
	waitForOperatorLog(ctx, t, k, "starting memcached-operator 0.0.1 ", "watching all namespaces", "serving only the namespaces labelled "+allNamespacesLabel)
	requireClusterWideGrant(ctx, t)
	holdUpgrades(ctx, t, k)

	t.Logf("creating a Memcached of one pod in each of %v and writing a key to its pod", allNamespacesTenants)
	pods := map[string]map[string]podState{}
	templates := map[string]deploymentTemplate{}
	for _, ns := range allNamespacesTenants {
		mustApply(ctx, t, admin.WithNamespace(ns), memcached(allNamespacesCache, 1, ""))
	}
	for _, ns := range allNamespacesTenants {
		kn := admin.WithNamespace(ns)
		pods[ns] = waitForMemcached(ctx, t, kn, allNamespacesCache, 1)
		for pod, s := range pods[ns] {
			if err := framework.MemcachedSetGet(s.addr(), upgradeKey, pod); err != nil {
				t.Fatalf("%s: pod %s: %v", ns, pod, err)
			}
		}
		templates[ns] = getDeploymentTemplate(ctx, t, kn, allNamespacesCache)
		t.Logf("%s: pods %v hold %s", ns, podNames(pods[ns]), upgradeKey)
	}

	t.Log("upgrading to CSV 0.0.2, held by 0.0.1's OperatorCondition until the Subscription names it")
	upgradeBehindTheSubscription(ctx, t, k, workDir, im)
	dep2 := waitForOperatorDeployment(ctx, t, k, "0.0.2", im.operator["0.0.2"], "")
	if dep2.UID != dep1.UID {
		t.Errorf("operator Deployment was recreated (uid %s, was %s); want it updated in place", dep2.UID, dep1.UID)
	}
	requireSelectorEnv(ctx, t, k)
	waitForOperatorLog(ctx, t, k, "starting memcached-operator 0.0.2 ", "serving only the namespaces labelled "+allNamespacesLabel)
	waitForReconciledBy(ctx, t, k, im.operator["0.0.2"], len(allNamespacesTenants))

	for _, ns := range allNamespacesTenants {
		kn := admin.WithNamespace(ns)
		now := waitForMemcached(ctx, t, kn, allNamespacesCache, 1)
		if !reflect.DeepEqual(now, pods[ns]) {
			t.Errorf("%s: pods were %v before the upgrade, %v after; want the same pods, no container restarted", ns, pods[ns], now)
			continue
		}
		if got := getDeploymentTemplate(ctx, t, kn, allNamespacesCache); !reflect.DeepEqual(got, templates[ns]) {
			t.Errorf("%s: Deployment was %+v before the upgrade, %+v after; want it unchanged", ns, templates[ns], got)
		}
		for pod, s := range now {
			if err := framework.MemcachedGet(s.addr(), upgradeKey, pod); err != nil {
				t.Errorf("%s: pod %s after the upgrade: %v", ns, pod, err)
			}
		}
	}
}

// upgradeCondition is the OperatorCondition that OLM makes for CSV 0.0.1, which holdUpgrades
// overrides.
var upgradeCondition = "operatorconditions.v2.operators.coreos.com/" + catalog.CSVName("0.0.1")

// holdUpgrades writes an Upgradeable=False override on the OperatorCondition of CSV 0.0.1,
// which holds in Pending any CSV that replaces it, until upgradeBehindTheSubscription lifts
// it. It is written long before CSV 0.0.2 exists, while the caches are created, so that OLM,
// which reads it from its informer's cache, has it when 0.0.2 first asks.
func holdUpgrades(ctx context.Context, t *testing.T, k framework.Kubectl) {
	t.Helper()
	waitFor(ctx, t, csvTimeout, "OLM to create the OperatorCondition of CSV 0.0.1", func(ctx context.Context) error {
		_, err := k.Run(ctx, "get", upgradeCondition, "-o", "name")
		return err
	})
	mustRun(ctx, t, k, "patch", upgradeCondition, "--type=merge", "-p",
		`{"spec":{"overrides":[{"type":"Upgradeable","status":"False","reason":"SubscriptionNotUpdated","message":"held until the Subscription names the new CSV"}]}}`)
}

// upgradeBehindTheSubscription applies CSV 0.0.2 and its Role, and lets OLM install it only
// once the Subscription names it (see TestOLMAllNamespacesUpgrade): holdUpgrades' override
// holds 0.0.2 Pending (a 0.0.2 past Pending fails the test at once); with 0.0.1 Replacing,
// which no longer writes its Deployment, the Subscription's installedCSV moves to 0.0.2 and
// the override goes. It returns when 0.0.2 has Succeeded and 0.0.1 is gone.
func upgradeBehindTheSubscription(ctx context.Context, t *testing.T, k framework.Kubectl, workDir string, im images) {
	t.Helper()
	applyOwnedCSV(ctx, t, k, workDir, "0.0.2", im)
	waitFor(ctx, t, csvTimeout, "CSV 0.0.1 to be Replacing and 0.0.2 held Pending", func(ctx context.Context) error {
		old, err := getCSV(ctx, k, catalog.CSVName("0.0.1"))
		if err != nil {
			return err
		}
		next, err := getCSV(ctx, k, catalog.CSVName("0.0.2"))
		if err != nil {
			return err
		}
		if next.Phase != "Pending" && next.Phase != "" {
			return framework.Permanent(fmt.Errorf("CSV 0.0.2 is %s (%s: %s) while 0.0.1's OperatorCondition holds it", next.Phase, next.Reason, next.Message))
		}
		if old.Phase != "Replacing" || next.Reason != "OperatorConditionNotUpgradeable" {
			return fmt.Errorf("0.0.1 %s (%s), 0.0.2 %s (%s)", old.Phase, old.Reason, next.Phase, next.Reason)
		}
		return nil
	})
	setInstalledCSV(ctx, t, k, "0.0.2")
	mustRun(ctx, t, k, "patch", upgradeCondition, "--type=merge", "-p", `{"spec":{"overrides":null}}`)
	waitForCSVSucceeded(ctx, t, k, "0.0.2")
	waitForCSVRemoved(ctx, t, k, "0.0.1")
}

// setInstalledCSV writes, as the catalog operator does once a CSV of the Subscription exists,
// the Subscription's status: at the latest version, with version's CSV installed.
func setInstalledCSV(ctx context.Context, t *testing.T, k framework.Kubectl, version string) {
	t.Helper()
	name := catalog.CSVName(version)
	mustRun(ctx, t, k, "patch", "subscription", operatorName, "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"currentCSV":%q,"installedCSV":%q,"state":"AtLatestKnown","lastUpdated":%q}}`,
			name, name, time.Now().UTC().Format(time.RFC3339)))
}

// applyOwnedCSV applies the local CSV of version (localCSV) and then, as the catalog
// operator's install plan does, its permissions as a Role and a RoleBinding to its
// ServiceAccount, both owned by the CSV and labelled with OLM's owner labels and olm.managed,
// by which OLM finds the Roles to lift for an AllNamespaces group.
func applyOwnedCSV(ctx context.Context, t *testing.T, k framework.Kubectl, workDir, version string, im images) {
	t.Helper()
	file := localCSV(t, workDir, version, im)
	mustRun(ctx, t, k, "apply", "-f", file)
	csv, err := catalog.ReadCSV(file)
	if err != nil {
		t.Fatal(err)
	}
	var live struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := k.GetJSON(ctx, &live, "clusterserviceversion", csv.Name); err != nil {
		t.Fatal(err)
	}
	owner := metav1.ObjectMeta{
		Name: csv.Name + "-" + operatorSA,
		Labels: map[string]string{
			"olm.owner":           csv.Name,
			"olm.owner.namespace": allNamespacesOperators,
			"olm.owner.kind":      "ClusterServiceVersion",
			// OLM's informers of RBAC see only the objects labelled as its own.
			"olm.managed": "true",
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion",
			Name: csv.Name, UID: types.UID(live.Metadata.UID),
		}},
	}
	perms := csv.Spec.InstallStrategy.StrategySpec.Permissions
	if len(perms) != 1 || perms[0].ServiceAccountName != operatorSA {
		t.Fatalf("CSV %s: permissions %+v, want one set for %s", csv.Name, perms, operatorSA)
	}
	role := rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: owner,
		Rules:      perms[0].Rules,
	}
	binding := rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: owner,
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: operatorSA, Namespace: allNamespacesOperators}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: owner.Name},
	}
	var manifest []string
	for _, obj := range []any{role, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, string(b))
	}
	mustApply(ctx, t, k, strings.Join(manifest, "---\n"))
}

// requireSelectorEnv checks that OLM gave the operator Deployment's container the
// Subscription's NAMESPACE_SELECTOR.
func requireSelectorEnv(ctx context.Context, t *testing.T, k framework.Kubectl) {
	t.Helper()
	var d appsv1.Deployment
	if err := k.GetJSON(ctx, &d, "deployment", operatorName); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != operatorName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "NAMESPACE_SELECTOR" {
				if e.Value != allNamespacesLabel {
					t.Fatalf("operator Deployment: NAMESPACE_SELECTOR=%q, want the Subscription's %q", e.Value, allNamespacesLabel)
				}
				return
			}
		}
	}
	t.Fatalf("operator Deployment's container %s has no NAMESPACE_SELECTOR: %+v", operatorName, d.Spec.Template.Spec.Containers)
}

// waitForOperatorLog waits until the log of one of k's operator pods says each of want.
func waitForOperatorLog(ctx context.Context, t *testing.T, k framework.Kubectl, want ...string) {
	t.Helper()
	waitFor(ctx, t, csvTimeout, fmt.Sprintf("the operator pod to log %q", want), func(ctx context.Context) error {
		out, err := k.Run(ctx, "logs", "deployment/"+operatorName)
		if err != nil {
			return err
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("no %q in the log: %s", w, tail(out, 3))
			}
		}
		return nil
	})
}

// requireClusterWideGrant checks that OLM lifted the CSV's permissions cluster-wide, with the
// list of namespaces that NAMESPACE_SELECTOR needs, which the Role alone cannot grant.
func requireClusterWideGrant(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, check := range [][]string{
		{"watch", "memcacheds.cache.example.com", "--all-namespaces"},
		{"create", "deployments.apps", "--namespace", allNamespacesTenants[0]},
		{"list", "namespaces"},
	} {
		args := append([]string{"auth", "can-i"}, check...)
		out, err := cluster.Kubectl().Run(ctx, append(args, "--as", allNamespacesServiceAccount())...)
		if err != nil || strings.TrimSpace(out) != "yes" {
			t.Fatalf("kubectl auth can-i %s as the operator: %q, %v; want yes", strings.Join(check, " "), out, err)
		}
	}
}

func allNamespacesServiceAccount() string {
	return "system:serviceaccount:" + allNamespacesOperators + ":" + operatorSA
}
