// Package e2e is the operator's end-to-end suite. TestMain starts a local Kubernetes
// cluster (test/scripts/cluster.sh: kube-apiserver, etcd, kube-controller-manager,
// kube-scheduler and KWOK nodes), applies deploy/crd.yaml, and each test then runs
// the built operator as a local process, with the memcached-operator ServiceAccount's
// RBAC from deploy/, against a namespace of its own, driving it with kubectl.
//
// A test that touches only its own namespace calls t.Parallel. A test that
// changes what the whole cluster shares (the Memcached CRD, the control
// plane's processes, the KWOK nodes, the ServiceMonitor API) runs serially
// and says why in its doc comment; Go runs every serial test first, then the
// parallel ones together, at most -parallel at once (`make e2e` sets it).
//
// Run it with `make e2e`, which builds the operator and the tools first. Set
// E2E_KEEP_CLUSTER=1 to leave the cluster running afterwards (KUBECONFIG is
// tmp/_output/e2e/kubeconfig); the next run deletes it and starts afresh.
package e2e
