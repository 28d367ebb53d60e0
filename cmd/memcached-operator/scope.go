package main

import (
	"fmt"
	"strings"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/operator-framework/operator-sdk/pkg/util/k8sutil"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// podNamespaceEnv names the variable that holds the operator's own
// namespace: deploy/operator.yaml and the CSV set it from the downward API's
// metadata.namespace.
const podNamespaceEnv = "POD_NAMESPACE"

// watchScope returns the namespaces that WATCH_NAMESPACE names: every
// namespace when it is empty, else its comma-separated list (see
// kube.ParseScope); one name is the guide's single namespace, as before.
//
// An unset WATCH_NAMESPACE is an error, not every namespace: a manifest that
// forgot it, or a shell without it, would otherwise have the operator act
// on every tenant's Memcacheds with RBAC granted for one namespace, or, with
// a ClusterRole, take over namespaces that another operator serves. Every
// namespace is asked for by setting it, to "".
func watchScope(lookup func(string) (string, bool)) (kube.Scope, error) {
	value, ok := lookup(k8sutil.WatchNamespaceEnvVar)
	if !ok {
		return kube.Scope{}, fmt.Errorf("%s must be set: to the namespace to manage (the downward API's metadata.namespace in a pod), to a comma-separated list of namespaces, or to \"\" for every namespace", k8sutil.WatchNamespaceEnvVar)
	}
	scope, err := kube.ParseScope(value)
	if err != nil {
		return kube.Scope{}, fmt.Errorf("%s: %v", k8sutil.WatchNamespaceEnvVar, err)
	}
	return scope, nil
}

// ownNamespace returns the namespace where the operator keeps its own
// state, the Lease of --leader-elect and the Events about it: POD_NAMESPACE,
// never a watched namespace as such, so that a tenant who may edit Leases in
// their namespace cannot take the lead. Out of a cluster, as `make run`
// runs it, nothing sets POD_NAMESPACE: the single namespace of scope stands
// in for it, and only when scope is exactly one namespace, where the guide's
// operator has always kept its Lease; with more, or every namespace, there is
// no namespace to take for it, and it must be set.
func ownNamespace(getenv func(string) string, scope kube.Scope) (string, error) {
	if ns, err := podNamespace(getenv); ns != "" || err != nil {
		return ns, err
	}
	if ns, ok := scope.Single(); ok {
		return ns, nil
	}
	return "", fmt.Errorf("--leader-elect keeps its Lease in the operator's own namespace: set %s to it (the downward API's metadata.namespace in a pod); only with a single %s may it be left unset", podNamespaceEnv, k8sutil.WatchNamespaceEnvVar)
}

// podNamespace returns POD_NAMESPACE, the namespace of the operator's pod,
// or "" when it is unset, as out of a cluster. The NetworkPolicies of
// Memcacheds admit the operator's pods of this namespace to the sidecars'
// port; without it they cannot name the operator, which then runs where no
// policy applies to its connections anyway.
func podNamespace(getenv func(string) string) (string, error) {
	ns := getenv(podNamespaceEnv)
	if ns == "" {
		return "", nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("%s=%q is not a namespace's name: %s", podNamespaceEnv, ns, strings.Join(errs, "; "))
	}
	return ns, nil
}

// checkNamespaceSelector refuses a --namespace-selector (selector, nil for
// none) with any scope but every namespace. A list, or one namespace,
// already names the namespaces to serve: a selector on top would make a
// listed namespace that lacks the labels quietly unserved, and would need a
// ClusterRole to list and watch namespaces that the list's Roles do not
// grant. Listing the namespaces that the selector would keep says the same
// with neither.
func checkNamespaceSelector(scope kube.Scope, selector labels.Selector) error {
	if selector == nil || scope.All() {
		return nil
	}
	return fmt.Errorf("--namespace-selector=%q applies only with %s=\"\" (every namespace), not with %s: list the namespaces instead", selector, k8sutil.WatchNamespaceEnvVar, scope)
}
