// Package e2e is the operator's end-to-end suite. TestMain starts a local Kubernetes
// cluster (test/scripts/cluster.sh: kube-apiserver, etcd, kube-controller-manager,
// kube-scheduler and KWOK nodes), applies deploy/crd.yaml, and each test then runs
// the built operator as a local process, with the memcached-operator ServiceAccount's
// RBAC from deploy/, against a namespace of its own, driving it with kubectl.
//
// Run it with `make e2e`, which builds the operator and the tools first. Set
// E2E_KEEP_CLUSTER=1 to leave the cluster running afterwards (KUBECONFIG is
// tmp/_output/e2e/kubeconfig); the next run deletes it and starts afresh.
package e2e
