#!/usr/bin/env bash
# cluster.sh runs local Kubernetes clusters with kwokctl's binary runtime: a real
# kube-apiserver, etcd, kube-controller-manager and kube-scheduler (RBAC and admission
# on) from tmp/_output/tools/bin, plus KWOK fake nodes on which pods go Running.
# Cluster state lives in tmp/_output/kwok (KWOK_WORKDIR); kubeconfigs go where the
# caller says, never to ~/.kube/config.
#
# Usage:
#   cluster.sh up NAME KUBECONFIG [NODES]   create NAME, or reuse it when it is healthy
#                                           and has today's configuration, or restart
#                                           it cleanly; write an admin
#                                           kubeconfig; ensure NODES fake nodes (3; 0
#                                           for a cluster whose only node is the real
#                                           one of node.sh).
#   cluster.sh recreate NAME KUBECONFIG [NODES]
#                                           delete NAME if it exists, then create it
#                                           fresh (test suites: no leftover objects).
#   cluster.sh scale NAME KUBECONFIG NODES  ensure NODES fake nodes in running cluster
#                                           NAME, each as up makes them (make bench).
#   cluster.sh down NAME KUBECONFIG         delete NAME and its kubeconfig.
#   cluster.sh status NAME KUBECONFIG       succeed when NAME answers /readyz and all
#                                           its components run.
#   cluster.sh logs NAME COMPONENT          print a component's log (kube-apiserver,
#                                           kube-controller-manager, kwok-controller...).
#   cluster.sh sa-kubeconfig ADMIN_KUBECONFIG NAMESPACE SERVICEACCOUNT OUT [DURATION]
#                                           write a kubeconfig that authenticates as the
#                                           ServiceAccount with a token (default 24h).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KWOKCTL="${TOOLS_BIN}/kwokctl"
KUBECTL="${TOOLS_BIN}/kubectl"
CLUSTER_TOOLS=(kwokctl kwok kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)
# Addresses from 198.18.0.0/15, the range reserved for network tests (see write_config).
SERVICE_CIDR="198.19.0.0/24"
SERVICE_IP="198.19.0.1"
ADVERTISE_IP="198.18.0.1"
FAKE_POD_CIDR="198.18.64.0/18"
# NODE_STORAGE is the ephemeral storage that every fake node offers: kwokctl's node
# template offers none, and the scheduler places no pod that requests some (every
# container the operator builds does) on a node that offers none.
NODE_STORAGE="100Gi"

# exists succeeds when kwokctl knows cluster NAME.
exists() {
  "${KWOKCTL}" get clusters 2>/dev/null | grep -x -- "$1" >/dev/null
}

# healthy succeeds when the API server behind KUBECONFIG is ready.
healthy() {
  [[ -s "$1" ]] && "${KUBECTL}" --kubeconfig "$1" --request-timeout=5s get --raw /readyz >/dev/null 2>&1
}

# dead_components prints the components of cluster NAME (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok-controller) whose process has exited.
# The API server answering /readyz says nothing about the controller manager, without
# which no Deployment gets pods.
dead_components() {
  local file
  for file in "${KWOK_WORKDIR}/clusters/$1/pids/"*.pid; do
    [[ -e "${file}" ]] || continue
    pid_alive "${file}" || basename "${file}" .pid
  done
}

# serving succeeds when cluster NAME answers /readyz at KUBECONFIG and every one of its
# components runs.
serving() {
  healthy "$2" && [[ -z "$(dead_components "$1")" ]]
}

# write_kubeconfig writes NAME's admin kubeconfig to FILE, alone in that file.
write_kubeconfig() {
  local name="$1" file="$2"
  mkdir -p "$(dirname "${file}")"
  "${KWOKCTL}" get kubeconfig --name "${name}" >"${file}.tmp"
  chmod 600 "${file}.tmp"
  mv -f "${file}.tmp" "${file}"
}

# write_config writes the kwokctl configuration of cluster NAME to FILE:
#   - Services get 198.19.0.0/24 and the API server advertises 198.18.0.1, the real
#     node's bridge (node.sh): addresses reserved for network tests, so that nothing
#     a pod sends to the `kubernetes` Service goes to a private or public range; the
#     serving certificate names the Service's IP for in-cluster clients;
#   - the API server reaches kubelets with the admin certificate, by InternalIP, so
#     `kubectl logs` and `exec` work on the real node;
#   - kwok-controller manages only the nodes `kwokctl scale node` creates (annotated
#     kwok.x-k8s.io/node=fake), never the real node, and gives their pods IPs from
#     198.18.64.0/18;
#   - kube-controller-manager and kube-scheduler run without leader election: each is
#     alone, and with election on they exit for good when an API server outage
#     outlasts their lease;
#   - OwnerReferencesPermissionEnforcement is on besides the API server's default
#     admission plugins, as on OpenShift: an owner reference with blockOwnerDeletion
#     needs update on the owner's finalizers (test/e2e/admission_test.go).
#   - the API server deletes a collection with 4 workers instead of 1, so that
#     TestMassDelete's DELETE of 1,000 Memcacheds does not run into its 60 s
#     request timeout, one object at a time, on a busy 2-core machine;
#   - a closing comment names the fake nodes' ephemeral storage, so that
#     config_current also tells a cluster whose nodes `up` made without it.
write_config() {
  local name="$1" file="$2" pki="${KWOK_WORKDIR}/clusters/$1/pki"
  cat >"${file}" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  kubeApiserverCertSANs:
    - ${SERVICE_IP}
componentsPatches:
  - name: kube-apiserver
    extraArgs:
      - {key: service-cluster-ip-range, value: ${SERVICE_CIDR}}
      - {key: advertise-address, value: ${ADVERTISE_IP}}
      - {key: kubelet-client-certificate, value: ${pki}/admin.crt}
      - {key: kubelet-client-key, value: ${pki}/admin.key}
      - {key: kubelet-preferred-address-types, value: "InternalIP,Hostname"}
      - {key: enable-admission-plugins, value: OwnerReferencesPermissionEnforcement}
      - {key: delete-collection-workers, value: "4"}
  - name: kube-controller-manager
    extraArgs:
      - {key: leader-elect, value: "false"}
  - name: kube-scheduler
    extraArgs:
      - {key: leader-elect, value: "false"}
  - name: kwok-controller
    extraArgs:
      - {key: manage-all-nodes, value: "false", override: true}
      - {key: manage-nodes-with-annotation-selector, value: "kwok.x-k8s.io/node=fake"}
      - {key: cidr, value: ${FAKE_POD_CIDR}}
# The fake nodes offer ephemeral-storage ${NODE_STORAGE} (cmd_up): a cluster whose
# nodes were made without it is recreated.
EOF
}

# config_current succeeds when cluster NAME was created with the configuration that
# write_config writes today, so that `up` never reuses a cluster that lacks, say, an
# admission plugin turned on since.
config_current() {
  local stored="${KWOK_WORKDIR}/${1}.kwokctl.yaml" fresh
  [[ -f "${stored}" ]] || return 1
  fresh="$(mktemp)"
  write_config "$1" "${fresh}"
  if cmp -s "${stored}" "${fresh}"; then
    rm -f "${fresh}"
    return 0
  fi
  rm -f "${fresh}"
  return 1
}

create() {
  local name="$1" kubeconfig="$2" config="${KWOK_WORKDIR}/${1}.kwokctl.yaml"
  log "creating cluster ${name} (Kubernetes $("${KUBECTL}" version --client -o yaml | sed -n 's/^ *gitVersion: //p'))"
  mkdir -p "$(dirname "${kubeconfig}")"
  write_config "${name}" "${config}"
  # --kubeconfig is where kwokctl adds the cluster's context; we give it the cluster's
  # own file so the user's ~/.kube/config is never read or changed.
  "${KWOKCTL}" -v WARN create cluster \
    --config "${config}" \
    --name "${name}" \
    --runtime binary \
    --kubeconfig "${kubeconfig}" \
    --kube-apiserver-binary "${TOOLS_BIN}/kube-apiserver" \
    --kube-controller-manager-binary "${TOOLS_BIN}/kube-controller-manager" \
    --kube-scheduler-binary "${TOOLS_BIN}/kube-scheduler" \
    --etcd-binary "${TOOLS_BIN}/etcd" \
    --kwok-controller-binary "${TOOLS_BIN}/kwok" \
    --kube-authorization=true \
    --kube-admission=true \
    --disable-qps-limits \
    --wait 2m
}

cmd_up() {
  (($# >= 2)) || fatal "usage: cluster.sh up NAME KUBECONFIG [NODES]"
  local name="$1" kubeconfig="$2" nodes="${3:-3}"
  require_tools "${CLUSTER_TOOLS[@]}"
  mkdir -p "${KWOK_WORKDIR}"

  if exists "${name}" && ! config_current "${name}"; then
    log "cluster ${name} was created with another configuration; recreating it"
    "${KWOKCTL}" -v WARN delete cluster --name "${name}" --kubeconfig "${kubeconfig}" >&2 || true
  fi
  if exists "${name}"; then
    if serving "${name}" "${kubeconfig}"; then
      log "reusing running cluster ${name}"
    else
      local dead
      dead="$(dead_components "${name}" | paste -sd' ')"
      log "cluster ${name} exists but is not serving${dead:+ (exited: ${dead})}; restarting it"
      "${KWOKCTL}" -v WARN stop cluster --name "${name}" >&2 || true
      if ! "${KWOKCTL}" -v WARN start cluster --name "${name}" --wait 1m >&2 ||
        ! { write_kubeconfig "${name}" "${kubeconfig}" && wait_for 60 "cluster ${name}" healthy "${kubeconfig}"; }; then
        log "restart failed; recreating cluster ${name}"
        "${KWOKCTL}" -v WARN delete cluster --name "${name}" --kubeconfig "${kubeconfig}" >&2 || true
        create "${name}" "${kubeconfig}" >&2
      fi
    fi
  else
    create "${name}" "${kubeconfig}" >&2
  fi
  write_kubeconfig "${name}" "${kubeconfig}"
  wait_for 60 "cluster ${name} to answer /readyz" healthy "${kubeconfig}"

  if ((nodes > 0)); then
    scale_nodes "${name}" "${kubeconfig}" "${nodes}"
  fi
  log "cluster ${name} is ready (KUBECONFIG=${kubeconfig})"
}

# scale_nodes ensures COUNT fake nodes in cluster NAME, each offering
# NODE_STORAGE, and waits until they are Ready.
scale_nodes() {
  local name="$1" kubeconfig="$2" nodes="$3"
  log "ensuring ${nodes} fake nodes"
  "${KWOKCTL}" -v WARN scale node --name "${name}" --replicas "${nodes}" \
    --param ".allocatable[\"ephemeral-storage\"]=\"${NODE_STORAGE}\"" >&2
  wait_for 120 "${nodes} Ready nodes" nodes_ready "${kubeconfig}" "${nodes}"
}

cmd_scale() {
  (($# == 3)) || fatal "usage: cluster.sh scale NAME KUBECONFIG NODES"
  require_tools kwokctl kubectl
  scale_nodes "$@"
}

# nodes_ready succeeds when at least COUNT nodes report Ready=True.
nodes_ready() {
  local ready
  ready="$("${KUBECTL}" --kubeconfig "$1" get nodes \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -cx True)" || return 1
  ((ready >= $2))
}

cmd_down() {
  (($# == 2)) || fatal "usage: cluster.sh down NAME KUBECONFIG"
  local name="$1" kubeconfig="$2"
  require_tools kwokctl
  if exists "${name}"; then
    log "deleting cluster ${name}"
    "${KWOKCTL}" -v WARN delete cluster --name "${name}" --kubeconfig "${kubeconfig}" >&2
  fi
  rm -f "${kubeconfig}" "${KWOK_WORKDIR}/${name}.kwokctl.yaml"
}

cmd_recreate() {
  (($# >= 2)) || fatal "usage: cluster.sh recreate NAME KUBECONFIG [NODES]"
  require_tools "${CLUSTER_TOOLS[@]}"
  cmd_down "$1" "$2"
  cmd_up "$@"
}

cmd_status() {
  (($# == 2)) || fatal "usage: cluster.sh status NAME KUBECONFIG"
  require_tools kwokctl kubectl
  exists "$1" && serving "$1" "$2"
}

cmd_logs() {
  (($# == 2)) || fatal "usage: cluster.sh logs NAME COMPONENT"
  require_tools kwokctl
  "${KWOKCTL}" logs --name "$1" "$2"
}

cmd_sa_kubeconfig() {
  (($# >= 4)) || fatal "usage: cluster.sh sa-kubeconfig ADMIN_KUBECONFIG NAMESPACE SERVICEACCOUNT OUT [DURATION]"
  local admin="$1" namespace="$2" sa="$3" out="$4" duration="${5:-24h}"
  local server ca token tmp
  require_tools kubectl
  server="$("${KUBECTL}" --kubeconfig "${admin}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$("${KUBECTL}" --kubeconfig "${admin}" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  token="$("${KUBECTL}" --kubeconfig "${admin}" -n "${namespace}" create token "${sa}" --duration "${duration}")"
  mkdir -p "$(dirname "${out}")"
  tmp="${out}.tmp"
  rm -f "${tmp}"
  {
    cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: ${server}
EOF
    if [[ -n "${ca}" ]]; then
      echo "    certificate-authority-data: ${ca}"
    else
      echo "    insecure-skip-tls-verify: true"
    fi
    cat <<EOF
users:
- name: ${namespace}-${sa}
  user:
    token: ${token}
contexts:
- name: ${namespace}-${sa}
  context:
    cluster: local
    namespace: ${namespace}
    user: ${namespace}-${sa}
current-context: ${namespace}-${sa}
EOF
  } >"${tmp}"
  chmod 600 "${tmp}"
  mv -f "${tmp}" "${out}"
}

main() {
  (($# >= 1)) || fatal "usage: cluster.sh up|recreate|scale|down|status|logs|sa-kubeconfig ... (see the header)"
  local cmd="$1"
  shift
  case "${cmd}" in
    up) cmd_up "$@" ;;
    recreate) cmd_recreate "$@" ;;
    scale) cmd_scale "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    logs) cmd_logs "$@" ;;
    sa-kubeconfig) cmd_sa_kubeconfig "$@" ;;
    -h | --help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) fatal "unknown command ${cmd}" ;;
  esac
}

main "$@"
