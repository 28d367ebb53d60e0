#!/usr/bin/env bash
# demo.sh runs the getting-started guide on a local Kubernetes cluster.
#
# Usage:
#   demo.sh up     build what is missing, start (or reuse) the local cluster, apply
#                  deploy/crd.yaml, sa.yaml and rbac.yaml, run the operator as a local
#                  process with the memcached-operator ServiceAccount's credentials,
#                  create memcached-for-wordpress and memcached-for-drupal, wait for
#                  their pods and status, and print them. Leaves everything running.
#   demo.sh down   stop the operator, delete the cluster and tmp/_output/demo.
#
# deploy/operator.yaml is not applied: it would run the operator image in a pod, and
# KWOK nodes run no containers. The operator runs as a local process instead, in the
# SDK's `up local` mode (KUBERNETES_CONFIG), but with a ServiceAccount token, so
# deploy/rbac.yaml is exactly what it is allowed to do.
#
# Environment: DEMO_NAMESPACE (default: default), DEMO_NODES (default: 3),
# DEMO_TIMEOUT seconds to wait for the resources (default: 120).
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
NAMESPACE="${DEMO_NAMESPACE:-default}"
NODES="${DEMO_NODES:-3}"
TIMEOUT="${DEMO_TIMEOUT:-120}"
RESOURCES=(memcached-for-wordpress memcached-for-drupal)

kubectl() {
  "${TOOLS_BIN}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" --namespace "${NAMESPACE}" "$@"
}

build() {
  # Only what the cluster needs (not deepcopy-gen, nor tools later modules add).
  "${ROOT}/test/scripts/build-tools.sh" kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl
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
    tr '\0' ' ' <"/proc/$(<"${OPERATOR_PID}")/cmdline" 2>/dev/null | grep -q memcached-operator
}

# stop_operator stops the operator that a previous `demo.sh up` started, if any.
stop_operator() {
  if operator_alive; then
    local pid
    pid="$(<"${OPERATOR_PID}")"
    log "stopping the operator (pid ${pid})"
    kill -TERM "${pid}"
    wait_for 30 "the operator to exit" bash -c "! kill -0 ${pid}" || kill -KILL "${pid}" 2>/dev/null || true
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

# converged succeeds when NAME has spec.size Running pods and status.nodes lists
# exactly their names.
converged() {
  local name="$1" size running nodes pods
  size="$(kubectl get memcached "${name}" -o jsonpath='{.spec.size}')"
  running="$(kubectl get pods -l "memcached_cr=${name}" --field-selector=status.phase=Running -o name | wc -l)"
  pods="$(kubectl get pods -l "memcached_cr=${name}" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | paste -sd' ')"
  nodes="$(kubectl get memcached "${name}" -o jsonpath='{range .status.nodes[*]}{@}{"\n"}{end}' | paste -sd' ')"
  [[ "${running}" -eq "${size}" && -n "${nodes}" && "${nodes}" == "${pods}" ]]
}

cmd_up() {
  require_cmds go setsid
  mkdir -p "${DEMO_DIR}"
  exec 9>"${LOCK}"
  if ! flock -n 9; then
    log "another demo.sh is running; waiting for it to finish, then reusing its cluster"
    flock -w 600 9 || fatal "another demo.sh has held ${LOCK} for 10 minutes"
  fi

  build
  "${ROOT}/test/scripts/cluster.sh" up "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" "${NODES}" 9>&-

  log "applying deploy/crd.yaml, deploy/sa.yaml and deploy/rbac.yaml to namespace ${NAMESPACE}"
  kubectl apply -f "${ROOT}/deploy/crd.yaml" >&2
  kubectl wait --for=condition=Established --timeout=60s crd/memcacheds.cache.example.com >&2
  if ! kubectl get namespace "${NAMESPACE}" >/dev/null 2>&1; then
    kubectl create namespace "${NAMESPACE}" >&2
  fi
  kubectl apply -f "${ROOT}/deploy/sa.yaml" -f "${ROOT}/deploy/rbac.yaml" >&2

  stop_operator
  start_operator
  create_resources

  local name
  for name in "${RESOURCES[@]}"; do
    if ! wait_for "${TIMEOUT}" "${name} to have Running pods and status.nodes" converged "${name}"; then
      kubectl describe memcached "${name}" >&2 || true
      tail -n 30 "${OPERATOR_LOG}" >&2
      fatal "the demo did not converge; the cluster and operator are left running for inspection (make demo-down stops them)"
    fi
  done

  echo
  echo "\$ kubectl get memcached,deployments,pods"
  kubectl get memcached,deployments,pods
  for name in "${RESOURCES[@]}"; do
    echo
    echo "\$ kubectl get memcached/${name} -o jsonpath='{.status.nodes}'"
    kubectl get memcached "${name}" -o jsonpath='{.status.nodes}'
    echo
  done
  cat <<EOF

The cluster (Kubernetes $(kubectl version -o yaml | sed -n '/serverVersion/,$ s/^ *gitVersion: //p'), ${NODES} KWOK nodes) and the operator (pid $(<"${OPERATOR_PID}")) keep running.
Explore:
  export KUBECONFIG=${KUBECONFIG_FILE#"${ROOT}/"}
  export PATH=\$PWD/${TOOLS_BIN#"${ROOT}/"}:\$PATH   # this kubectl matches the cluster
  kubectl get memcached
  kubectl scale memcached/memcached-for-drupal --replicas=4
  kubectl patch memcached memcached-for-wordpress --type=merge -p '{"spec":{"size":1}}'
  tail -f ${OPERATOR_LOG#"${ROOT}/"}
Stop and remove everything:
  make demo-down
EOF
}

cmd_down() {
  mkdir -p "${OUTPUT}"
  exec 9>"${LOCK}"
  flock -w 300 9 || fatal "another demo.sh has held ${LOCK} for 5 minutes"
  stop_operator
  if [[ -x "${TOOLS_BIN}/kwokctl" ]]; then
    "${ROOT}/test/scripts/cluster.sh" down "${CLUSTER_NAME}" "${KUBECONFIG_FILE}" 9>&-
  fi
  rm -rf "${DEMO_DIR}"
  log "demo stopped and removed"
}

main() {
  case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    *) fatal "usage: demo.sh up|down" ;;
  esac
}

main "$@"
