#!/usr/bin/env bash
# demo.sh runs the getting-started guide on a local Kubernetes 1.37 cluster.
#
# Usage:
#   demo.sh up     build what is missing, start (or reuse) the local cluster, deploy the
#                  operator, create memcached-for-wordpress and memcached-for-drupal,
#                  wait for their pods and status, and print them. Leaves everything
#                  running.
#   demo.sh down   stop the operator, the real node and the local registry, delete the
#                  cluster and tmp/_output/demo.
#   demo.sh require-down
#                  fail, saying to run `make demo-down`, while the demo is up; and
#                  while something else answers on the registry's address, as the
#                  registry of another checkout's demo does. `make test` and `make
#                  e2e` run it first: their suites start clusters, a real node and the
#                  registry of their own, and one real node runs per machine (its
#                  bridge, iptables chains and the kubelet's ports).
#
# On a machine that can run the real node (node.sh check: root, containerd, runc,
# the CNI plugins), the demo is the guide for real: the cluster's only node is a real
# kubelet; `make deploy` runs the operator image in a pod with its ServiceAccount;
# memcached pods start from an image of Debian's memcached and pass their probes; and
# a memcached client (test/cmd/mcclient) stores and reads keys through them.
#
# Where the real node cannot run, demo.sh says why and falls back to KWOK fake nodes,
# on which pods go Running without containers: the operator then runs as a local
# process (the SDK's `up local`) with its ServiceAccount's token, and there is no
# memcached to talk to.
#
# Environment: DEMO_NODE (real or fake; default: real where the machine can run it),
# DEMO_NAMESPACE (default: default), DEMO_NODES (fake nodes, default: 3), DEMO_TIMEOUT
# seconds to wait for the resources (default: 180).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLUSTER_NAME="memcached-demo"
DEMO_DIR="${OUTPUT}/demo"
KUBECONFIG_FILE="${DEMO_DIR}/kubeconfig"
OPERATOR_KUBECONFIG="${DEMO_DIR}/operator.kubeconfig"
OPERATOR_PID="${DEMO_DIR}/operator.pid"
OPERATOR_LOG="${DEMO_DIR}/operator.log"
# LOCK serializes demo.sh runs. It lives outside DEMO_DIR, which `down` removes, and
# its descriptor (9) is closed for every long-lived child (cluster, operator), so
# only demo.sh itself ever holds it.
LOCK="${OUTPUT}/.demo.lock"
MODE_FILE="${DEMO_DIR}/mode"
MCCLIENT="${OUTPUT}/bin/mcclient"
NAMESPACE="${DEMO_NAMESPACE:-default}"
NODES="${DEMO_NODES:-3}"
TIMEOUT="${DEMO_TIMEOUT:-180}"
RESOURCES=(memcached-for-wordpress memcached-for-drupal)
CLUSTER_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl)

kubectl() {
  "${TOOLS_BIN}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" --namespace "${NAMESPACE}" "$@"
}

# build builds the tools MODE needs, and the operator.
build() {
  local mode="$1"
  # Only what the cluster needs (not deepcopy-gen, nor OLM).
  if [[ "${mode}" == real ]]; then
    "${ROOT}/test/scripts/build-tools.sh" "${CLUSTER_TOOLS[@]}" kubelet kube-proxy
  else
    "${ROOT}/test/scripts/build-tools.sh" "${CLUSTER_TOOLS[@]}"
  fi
  # The operator is rebuilt every time (a no-op when nothing changed), so the demo
  # never runs a stale binary.
  if [[ -x "${ROOT}/tmp/build/build.sh" ]]; then
    "${ROOT}/tmp/build/build.sh" >&2
  else
    log "building ${OPERATOR_BIN}"
    (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${OPERATOR_BIN}" ./cmd/memcached-operator)
  fi
}

# operator_alive succeeds when the pid file names a running memcached-operator (and
# not an unrelated process that reused the pid after a reboot).
operator_alive() {
  pid_alive "${OPERATOR_PID}" &&
    tr '\0' ' ' <"/proc/$(<"${OPERATOR_PID}")/cmdline" 2>/dev/null | grep memcached-operator >/dev/null
}

# stop_operator stops the operator that a previous `demo.sh up` started, if any.
stop_operator() {
  if operator_alive; then
    stop_pid_file "${OPERATOR_PID}" "the operator" 30
  fi
  rm -f "${OPERATOR_PID}"
}

start_operator() {
  # A fresh token each time; the old operator is replaced, never run twice.
  "${ROOT}/test/scripts/cluster.sh" sa-kubeconfig "${KUBECONFIG_FILE}" "${NAMESPACE}" memcached-operator "${OPERATOR_KUBECONFIG}" 24h
  log "starting the operator (log: ${OPERATOR_LOG})"
  KUBERNETES_CONFIG="${OPERATOR_KUBECONFIG}" WATCH_NAMESPACE="${NAMESPACE}" \
    setsid "${OPERATOR_BIN}" >>"${OPERATOR_LOG}" 2>&1 </dev/null 9>&- &
  echo "$!" >"${OPERATOR_PID}"
  if ! wait_for 5 "the operator to start" operator_started; then
    tail -n 20 "${OPERATOR_LOG}" >&2
    fatal "the operator exited; see ${OPERATOR_LOG}"
  fi
}

# operator_started fails when the operator has exited; it succeeds once it has run
# for a few seconds (so the loop in wait_for catches early crashes).
OPERATOR_CHECKS=0
operator_started() {
  operator_alive || return 2
  OPERATOR_CHECKS=$((OPERATOR_CHECKS + 1))
  ((OPERATOR_CHECKS >= 3))
}

create_resources() {
  log "creating ${RESOURCES[*]}"
  kubectl apply -f - >&2 <<'EOF'
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: memcached-for-wordpress
spec:
  size: 3
---
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: memcached-for-drupal
spec:
  size: 2
EOF
}

# converged succeeds when NAME has spec.size Running pods, as many Ready ones in
# its status, and status.nodes lists exactly their names.
converged() {
  local name="$1" size running ready nodes pods
  size="$(kubectl get memcached "${name}" -o jsonpath='{.spec.size}')"
  ready="$(kubectl get memcached "${name}" -o jsonpath='{.status.readyReplicas}')"
  running="$(kubectl get pods -l "memcached_cr=${name}" --field-selector=status.phase=Running -o name | wc -l)"
  pods="$(kubectl get pods -l "memcached_cr=${name}" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | paste -sd' ')"
  nodes="$(kubectl get memcached "${name}" -o jsonpath='{range .status.nodes[*]}{@}{"\n"}{end}' | paste -sd' ')"
  [[ "${running}" -eq "${size}" && "${ready:-0}" -eq "${size}" && -n "${nodes}" && "${nodes}" == "${pods}" ]]
}

# pick_mode prints real or fake (see DEMO_NODE in the header).
pick_mode() {
  local problems
  case "${DEMO_NODE:-}" in
    fake)
      echo fake
      return
      ;;
    real | "") ;;
    *) fatal "DEMO_NODE=${DEMO_NODE} must be real or fake" ;;
  esac
  # On a fresh Debian machine, as root, this brings containerd, runc, the CNI plugins,
  # buildah and the rest; elsewhere it says what is missing, and node.sh check why
  # the real node cannot run.
  "${ROOT}/test/scripts/install-deps.sh" node || true
  if problems="$("${ROOT}/test/scripts/node.sh" check 2>&1)"; then
    echo real
    return
  fi
  [[ -z "${DEMO_NODE:-}" ]] || fatal "DEMO_NODE=real, but ${problems}"
  log "${problems}"
  log "falling back to KWOK fake nodes: the operator runs as a local process and no memcached container starts (DEMO_NODE=fake says so without this notice)"
  echo fake
}

# apply_crd applies deploy/crd.yaml and makes sure the namespace exists.
apply_crd() {
  log "applying deploy/crd.yaml; namespace ${NAMESPACE}"
  kubectl apply -f "${ROOT}/deploy/crd.yaml" >&2
  kubectl wait --for=condition=Established --timeout=60s crd/memcacheds.cache.example.com >&2
  if ! kubectl get namespace "${NAMESPACE}" >/dev/null 2>&1; then
    kubectl create namespace "${NAMESPACE}" >&2
  fi
}

wait_converged() {
  local name
  for name in "${RESOURCES[@]}"; do
    if ! wait_for "${TIMEOUT}" "${name} to have Ready pods and status.nodes" converged "${name}"; then
      kubectl describe memcached "${name}" >&2 || true
      kubectl get pods -o wide >&2 || true
      if [[ "$1" == real ]]; then
        kubectl logs deployment/memcached-operator --tail=30 >&2 || true
      else
        tail -n 30 "${OPERATOR_LOG}" >&2
      fi
      fatal "the demo did not converge; everything is left running for inspection (make demo-down stops it)"
    fi
  done
}

up_fake() {
  "${ROOT}/test/scripts/cluster.sh" up "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" "${NODES}" 9>&-
  apply_crd
  log "applying deploy/sa.yaml and deploy/rbac.yaml"
  kubectl apply -f "${ROOT}/deploy/sa.yaml" -f "${ROOT}/deploy/rbac.yaml" >&2
  stop_operator
  start_operator
  create_resources
  wait_converged fake

  echo
  echo "\$ kubectl get memcached,deployments,pods"
  kubectl get memcached,deployments,pods
  print_nodes
  cat <<EOF

The cluster (Kubernetes $(server_version), ${NODES} KWOK fake nodes: pods go Running
without containers) and the operator (a local process, pid $(<"${OPERATOR_PID}")) keep running.
EOF
  explore "tail -f ${OPERATOR_LOG#"${ROOT}/"}"
}

up_real() {
  local operator_image memcached_image
  operator_image="$("${ROOT}/test/scripts/images.sh" ref operator "$(make -s -C "${ROOT}" --no-print-directory --eval 'v: ; @echo $(VERSION)' v)")"
  memcached_image="$("${ROOT}/test/scripts/images.sh" ref memcached)"
  "${ROOT}/test/scripts/images.sh" build 9>&-
  (cd "${ROOT}/test" && CGO_ENABLED=0 go build -o "${MCCLIENT}" ./cmd/mcclient)

  "${ROOT}/test/scripts/cluster.sh" up "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" 0 9>&-
  "${ROOT}/test/scripts/node.sh" up "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" 9>&-
  apply_crd
  log "make deploy IMG=${operator_image} MEMCACHED_IMAGE=${memcached_image}"
  PATH="${TOOLS_BIN}:${PATH}" make -s -C "${ROOT}" --no-print-directory deploy \
    KUBECONFIG="${KUBECONFIG_FILE}" NAMESPACE="${NAMESPACE}" \
    IMG="${operator_image}" MEMCACHED_IMAGE="${memcached_image}" >&2
  kubectl rollout status deployment/memcached-operator --timeout="${TIMEOUT}s" >&2
  create_resources
  wait_converged real

  echo
  echo "\$ kubectl get memcached,deployments,services,poddisruptionbudgets,pods -o wide"
  kubectl get memcached,deployments,services,poddisruptionbudgets,pods -o wide
  print_nodes
  local name servers
  for name in "${RESOURCES[@]}"; do
    servers="$(service_servers "${name}")"
    echo
    echo "# the servers: the Ready endpoints of the headless service/${name} (status.serviceName),"
    echo "# which a client in the cluster resolves as ${name}.${NAMESPACE}.svc"
    echo "\$ mcclient -servers ${servers} -keys 6 -prefix ${name#memcached-for-}"
    "${MCCLIENT}" -servers "${servers}" -keys 6 -prefix "${name#memcached-for-}"
  done
  cat <<EOF

The cluster (Kubernetes $(server_version)), its real node ${NODE_NAME:-real-node} (kubelet,
containerd, pods on 198.18.0.0/24) and the operator (two pods, one leading) keep running.
The images are local builds in the registry on 127.0.0.1:5000, not the upstream ones.
EOF
  explore "kubectl logs -f -l app.kubernetes.io/name=memcached-operator --prefix   # two replicas; the Lease memcached-operator names the leader"
}

# service_servers prints host:port, comma-separated, of every Ready endpoint of
# the headless Service that NAME's status.serviceName names: the servers a
# memcached client inside the cluster gets from the Service's DNS name.
service_servers() {
  local svc
  svc="$(kubectl get memcached "$1" -o jsonpath='{.status.serviceName}')"
  kubectl get endpointslices -l "kubernetes.io/service-name=${svc}" \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{":11211\n"}{end}' |
    sort | paste -sd,
}

print_nodes() {
  local name
  for name in "${RESOURCES[@]}"; do
    echo
    echo "\$ kubectl get memcached/${name} -o jsonpath='{.status.nodes}'"
    kubectl get memcached "${name}" -o jsonpath='{.status.nodes}'
    echo
  done
}

server_version() {
  kubectl version -o yaml | sed -n '/serverVersion/,$ s/^ *gitVersion: //p'
}

# explore prints how to look around, with FOLLOW as the way to follow the operator.
explore() {
  cat <<EOF
Explore:
  export KUBECONFIG=${KUBECONFIG_FILE#"${ROOT}/"}
  export PATH=\$PWD/${TOOLS_BIN#"${ROOT}/"}:\$PATH   # this kubectl matches the cluster
  kubectl get memcached
  kubectl scale memcached/memcached-for-drupal --replicas=4
  kubectl patch memcached memcached-for-wordpress --type=merge -p '{"spec":{"size":1}}'
  $1
Stop and remove everything:
  make demo-down
EOF
}

cmd_up() {
  require_cmds go setsid
  mkdir -p "${DEMO_DIR}"
  exec 9>"${LOCK}"
  if ! flock -n 9; then
    log "another demo.sh is running; waiting for it to finish, then reusing its cluster"
    flock -w 600 9 || fatal "another demo.sh has held ${LOCK} for 10 minutes"
  fi

  local mode
  mode="$(pick_mode)"
  # A cluster from a demo of the other kind goes first: the real-node demo has no
  # fake nodes and runs the operator in a pod, the fake-node one the reverse.
  if [[ -s "${MODE_FILE}" && "$(<"${MODE_FILE}")" != "${mode}" ]]; then
    log "the running demo uses $(<"${MODE_FILE}") nodes; replacing it"
    teardown
    mkdir -p "${DEMO_DIR}"
  fi
  echo "${mode}" >"${MODE_FILE}"
  build "${mode}"
  "up_${mode}"
}

# teardown stops and removes everything the demo started.
teardown() {
  stop_operator
  if [[ "$("${ROOT}/test/scripts/node.sh" status 2>/dev/null)" == "${CLUSTER_NAME}" ]]; then
    "${ROOT}/test/scripts/node.sh" down 9>&-
  fi
  if [[ -x "${TOOLS_BIN}/kwokctl" ]]; then
    "${ROOT}/test/scripts/cluster.sh" down "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" 9>&-
  fi
  if ! "${ROOT}/test/scripts/node.sh" status >/dev/null 2>&1; then
    "${ROOT}/test/scripts/registry.sh" down
  fi
  rm -rf "${DEMO_DIR}"
}

cmd_down() {
  mkdir -p "${OUTPUT}"
  exec 9>"${LOCK}"
  flock -w 300 9 || fatal "another demo.sh has held ${LOCK} for 5 minutes"
  teardown
  log "demo stopped and removed"
}

# cmd_require_down fails while the demo is up (see the header). It needs no tools
# and builds nothing, so that `make test` stops before any build.
cmd_require_down() {
  local why="the test suites start clusters of their own"
  if [[ -s "${MODE_FILE}" ]]; then
    [[ "$(<"${MODE_FILE}")" != real ]] || why="the test suites start their own clusters, real node and registry, and only one real node runs per machine"
    fatal "make demo is up ($(<"${MODE_FILE}") nodes, cluster ${CLUSTER_NAME}): ${why}. Run \`make demo-down\` first, then run this again."
  fi
  "${ROOT}/test/scripts/registry.sh" require-free
}

main() {
  case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    require-down) cmd_require_down ;;
    *) fatal "usage: demo.sh up|down|require-down" ;;
  esac
}

main "$@"
