#!/usr/bin/env bash
# node.sh runs one real Kubernetes node on this machine and joins it to a local
# cluster (cluster.sh): containerd and runc from Debian, a CNI bridge, and the kubelet
# and kube-proxy that build-tools.sh builds. Pods scheduled to it run real containers,
# pulled from the local registry (registry.sh) with the images of images.sh.
#
# Usage:
#   node.sh check                    succeed when this machine can run the node; print
#                                    exactly what is missing otherwise
#   node.sh up CLUSTER KUBECONFIG    start the node for kwokctl cluster CLUSTER (whose
#                                    admin kubeconfig is KUBECONFIG) and wait for Ready
#   node.sh down                     stop everything and restore the host (below)
#   node.sh status                   print the cluster the node runs for; fail if none
#   node.sh logs COMPONENT           print containerd's, the kubelet's or kube-proxy's log
#   node.sh verify-clean             fail unless the host is as it was before `up`
#
# There is one real node per machine (it owns a bridge, iptables chains and ports
# 10248/10250): `up` fails while it runs for another cluster.
#
# Addresses come from 198.18.0.0/15, the range reserved for network tests: pods get
# 198.18.0.0/24 on the bridge mcbr0, whose own 198.18.0.1 is the node's IP; Services
# are 198.19.0.0/24 (cluster.sh). No packet leaves this machine.
#
# State lives in tmp/_output/node. The host changes that running a node makes (the
# sysctls the kubelet and the bridge set, iptables chains, the bridge, network
# namespaces, mounts, and /run, /var/lib and /etc directories that containerd, CNI
# and the kubelet create) are recorded before `up` and undone by `down`, which then
# checks the host against the record (verify-clean) and fails if anything is left.
# Must run as root.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODE_DIR="${OUTPUT}/node"
NODE_NAME="${NODE_NAME:-real-node}"
BRIDGE="mcbr0"
NODE_IP="198.18.0.1"
POD_CIDR="198.18.0.0/24"
KUBECTL="${TOOLS_BIN}/kubectl"
SOCKET="${NODE_DIR}/run/containerd.sock"
HOST_DIR="${NODE_DIR}/host"
PKI_DIR="${NODE_DIR}/pki"
LOG_DIR="${NODE_DIR}/logs"
PID_DIR="${NODE_DIR}/pids"
OWNER_FILE="${NODE_DIR}/owner"
COMPONENTS=(containerd kubelet kube-proxy)
# SYSCTLS are the kernel settings the node's components may change.
SYSCTLS=(net.ipv4.ip_forward vm.overcommit_memory kernel.panic kernel.panic_on_oops
  net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables)
# HOST_PATHS are the host directories that containerd, CNI and the kubelet create
# whatever their configured roots. Not /opt/containerd: the node's containerd runs
# without the opt plugin that makes it, and the private dockerd of dockerd.sh, whose
# containerd does make it, may start before the node or after it (the image suite
# runs beside this one), so that path is dockerd.sh's to record and remove.
HOST_PATHS=(/run/containerd /run/netns /var/run/netns /var/lib/cni /var/lib/kubelet
  /var/lib/containerd /etc/cni /etc/kubernetes)
CNI_BIN_DIR="/usr/lib/cni"

# preflight prints one line for each reason this machine cannot run the node.
preflight() {
  [[ "$(id -u)" == 0 ]] || echo "not root: the kubelet, containerd and the CNI bridge need root (run as root, or use fake nodes)"
  local cmd
  for cmd in containerd containerd-shim-runc-v2 runc ctr iptables iptables-save ip6tables-save nft ip openssl findmnt curl; do
    command -v "${cmd}" >/dev/null 2>&1 || echo "'${cmd}' is not installed (apt-get install -y containerd runc iptables nftables iproute2 openssl util-linux curl)"
  done
  for cmd in bridge host-local loopback; do
    [[ -x "${CNI_BIN_DIR}/${cmd}" ]] || echo "CNI plugin ${CNI_BIN_DIR}/${cmd} is missing (apt-get install -y containernetworking-plugins)"
  done
  for cmd in kubelet kube-proxy; do
    [[ -x "${TOOLS_BIN}/${cmd}" ]] || echo "${TOOLS_BIN}/${cmd} is missing (make tools)"
  done
  [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || echo "no memory cgroup under /sys/fs/cgroup: containers cannot be limited"
  ((${#SOCKET} < 100)) || echo "the containerd socket path ${SOCKET} is longer than a unix socket allows: clone the repository to a shorter path"
}

cmd_check() {
  local problems
  problems="$(preflight)"
  if [[ -n "${problems}" ]]; then
    printf 'this machine cannot run a real node:\n' >&2
    printf '  %s\n' "${problems}" >&2
    return 1
  fi
}

# ---- host state: record before, restore after ----

# iptables_state prints the rules of every table without counters or comments, so
# two snapshots compare equal when the rules are.
iptables_state() {
  local family
  for family in iptables ip6tables; do
    echo "### ${family}"
    "${family}-save" 2>/dev/null | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//'
  done
}

# nft_tables_state prints the nftables tables ("ip filter"...), which iptables-nft
# creates on first use and never removes.
nft_tables_state() {
  nft list tables 2>/dev/null | sed -n 's/^table //p' | sort
}

# remove_new_tables deletes the tables that did not exist before `up` and that hold
# no rule any more, once remove_iptables_additions has run.
remove_new_tables() {
  local family name
  while read -r family name; do
    [[ -n "${name}" ]] || continue
    grep -qxF -- "${family} ${name}" "${HOST_DIR}/nft-tables" && continue
    case "${family}" in
      ip) [[ -z "$(iptables-save -t "${name}" 2>/dev/null | grep '^-A ')" ]] || continue ;;
      ip6) [[ -z "$(ip6tables-save -t "${name}" 2>/dev/null | grep '^-A ')" ]] || continue ;;
      *) continue ;;
    esac
    nft delete table "${family}" "${name}" 2>/dev/null || true
  done < <(nft_tables_state)
}

# host_paths_state prints each HOST_PATH that exists.
host_paths_state() {
  local p
  for p in "${HOST_PATHS[@]}"; do
    if [[ -e "${p}" || -L "${p}" ]]; then echo "${p}"; fi
  done
}

# sysctl_state prints KEY=VALUE for every SYSCTL this kernel has.
sysctl_state() {
  local key file
  for key in "${SYSCTLS[@]}"; do
    file="/proc/sys/${key//.//}"
    if [[ -r "${file}" ]]; then echo "${key}=$(<"${file}")"; fi
  done
}

netns_state() {
  ip netns list 2>/dev/null | awk '{print $1}' | sort
}

# mounts_state prints mount points under the node's own and the host's paths.
mounts_state() {
  findmnt -rn -o TARGET | grep -E "^(${NODE_DIR}|/run/containerd|/run/netns|/var/run/netns|/var/lib/kubelet|/var/lib/containerd)(/|$)" | sort || true
}

record_host() {
  [[ -f "${HOST_DIR}/recorded" ]] && return 0
  mkdir -p "${HOST_DIR}"
  sysctl_state >"${HOST_DIR}/sysctl"
  host_paths_state >"${HOST_DIR}/paths"
  iptables_state >"${HOST_DIR}/iptables"
  nft_tables_state >"${HOST_DIR}/nft-tables"
  netns_state >"${HOST_DIR}/netns"
  mounts_state >"${HOST_DIR}/mounts"
  touch "${HOST_DIR}/recorded"
}

# remove_iptables_additions deletes, in every table, the rules and chains that were
# not there before `up` and that belong to Kubernetes or CNI (KUBE-*, CNI-*).
remove_iptables_additions() {
  local family table chain rule
  for family in iptables ip6tables; do
    command -v "${family}-save" >/dev/null 2>&1 || continue
    local before
    before="$(sed -n "/^### ${family}\$/,/^### /p" "${HOST_DIR}/iptables")"
    for table in $("${family}-save" 2>/dev/null | sed -n 's/^\*//p'); do
      # Rules added to chains that existed before (jumps into our chains) go first...
      while IFS= read -r rule; do
        grep -qxF -- "${rule}" <<<"${before}" && continue
        # shellcheck disable=SC2086 # the saved rule is a list of arguments
        eval "${family} -w -t ${table} -D ${rule#-A }" 2>/dev/null || true
      done < <("${family}-save" -t "${table}" 2>/dev/null | grep -E '^-A ' | grep -E -- '(-j|-g) (KUBE|CNI)-|kubernetes|KUBE-|CNI-' | grep -vE '^-A (KUBE|CNI)-')
      # ...then the chains themselves, flushed before they are deleted.
      for chain in $("${family}-save" -t "${table}" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
        grep -q "^:${chain} " <<<"${before}" && continue
        "${family}" -w -t "${table}" -F "${chain}" 2>/dev/null || true
      done
      for chain in $("${family}-save" -t "${table}" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
        grep -q "^:${chain} " <<<"${before}" && continue
        "${family}" -w -t "${table}" -X "${chain}" 2>/dev/null || true
      done
    done
  done
}

restore_host() {
  [[ -f "${HOST_DIR}/recorded" ]] || return 0
  local target ns line p
  # Mounts first (container rootfs, pod volumes, network namespaces), deepest first.
  while read -r target; do
    grep -qxF -- "${target}" "${HOST_DIR}/mounts" && continue
    umount -l "${target}" 2>/dev/null || true
  done < <(mounts_state | sort -r)
  while read -r ns; do
    [[ -n "${ns}" ]] || continue
    grep -qxF -- "${ns}" "${HOST_DIR}/netns" || ip netns delete "${ns}" 2>/dev/null || true
  done < <(netns_state)
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then
    ip link delete "${BRIDGE}"
  fi
  remove_iptables_additions
  remove_new_tables
  while IFS= read -r line; do
    [[ -n "${line}" ]] || continue
    echo "${line#*=}" >"/proc/sys/$(tr . / <<<"${line%%=*}")"
  done <"${HOST_DIR}/sysctl"
  for p in "${HOST_PATHS[@]}"; do
    grep -qxF -- "${p}" "${HOST_DIR}/paths" && continue
    if [[ -e "${p}" || -L "${p}" ]]; then rm -rf "${p}"; fi
  done
}

# host_diff prints how the host differs from the record; nothing when it is clean.
host_diff() {
  diff <(cat "${HOST_DIR}/sysctl") <(sysctl_state) | sed -n 's/^[<>]/sysctl &/p' || true
  diff <(cat "${HOST_DIR}/paths") <(host_paths_state) | sed -n 's/^[<>]/path &/p' || true
  diff <(cat "${HOST_DIR}/iptables") <(iptables_state) | sed -n 's/^[<>]/iptables &/p' || true
  diff <(cat "${HOST_DIR}/nft-tables") <(nft_tables_state) | sed -n 's/^[<>]/nft table &/p' || true
  diff <(cat "${HOST_DIR}/netns") <(netns_state) | sed -n 's/^[<>]/netns &/p' || true
  diff <(cat "${HOST_DIR}/mounts") <(mounts_state) | sed -n 's/^[<>]/mount &/p' || true
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then echo "link > ${BRIDGE}"; fi
  local c
  for c in "${COMPONENTS[@]}"; do
    if pid_alive "${PID_DIR}/${c}.pid"; then echo "process > ${c} (pid $(<"${PID_DIR}/${c}.pid"))"; fi
  done
  shims | sed 's/^/process > containerd-shim pid /'
}

cmd_verify_clean() {
  [[ -f "${HOST_DIR}/recorded" ]] || return 0
  local diff
  diff="$(host_diff)"
  if [[ -n "${diff}" ]]; then
    printf 'the host is not as it was before node.sh up (< before, > now):\n%s\n' "${diff}" >&2
    return 1
  fi
}

# ---- certificates and kubeconfigs ----

# cluster_pki prints the directory of kwokctl's CA for CLUSTER.
cluster_pki() {
  echo "${KWOK_WORKDIR}/clusters/$1/pki"
}

# sign writes NAME.key and NAME.crt, signed by the cluster CA, for SUBJECT with the
# optional subjectAltName SAN; EXT is clientAuth or serverAuth.
sign() {
  local pki="$1" name="$2" subject="$3" ext="$4" san="${5:-}"
  local extfile="${PKI_DIR}/${name}.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=${ext}"
    if [[ -n "${san}" ]]; then echo "subjectAltName=${san}"; fi
  } >"${extfile}"
  openssl req -new -newkey rsa:2048 -nodes -keyout "${PKI_DIR}/${name}.key" -subj "${subject}" -out "${PKI_DIR}/${name}.csr" 2>/dev/null
  openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${pki}/ca.crt" -CAkey "${pki}/ca.key" -CAcreateserial \
    -days 7 -extfile "${extfile}" -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  chmod 600 "${PKI_DIR}/${name}.key"
}

# write_kubeconfig writes FILE for the client certificate NAME against SERVER.
write_kubeconfig() {
  local file="$1" server="$2" name="$3"
  cat >"${file}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: ${server}
    certificate-authority: ${PKI_DIR}/ca.crt
users:
- name: ${name}
  user:
    client-certificate: ${PKI_DIR}/${name}.crt
    client-key: ${PKI_DIR}/${name}.key
contexts:
- name: ${name}
  context: {cluster: local, user: ${name}}
current-context: ${name}
EOF
  chmod 600 "${file}"
}

# ---- components ----

# start COMPONENT ARGS... runs a component detached, with its log and pid file.
start() {
  local name="$1"
  shift
  log "starting ${name} (log: ${LOG_DIR#"${ROOT}/"}/${name}.log)"
  setsid "$@" >>"${LOG_DIR}/${name}.log" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo "$!" >"${PID_DIR}/${name}.pid"
}

# stop COMPONENT sends SIGTERM, then SIGKILL after 20 seconds.
stop() {
  stop_pid_file "${PID_DIR}/$1.pid" "$1" 20
}

# shims prints the pids of the containerd shims that belong to this node.
shims() {
  pgrep -f -- "containerd-shim-runc-v2 .*-address ${SOCKET}" || true
}

write_containerd_config() {
  local dir="${NODE_DIR}/containerd"
  mkdir -p "${dir}/certs.d/${REGISTRY_ADDR}" "${NODE_DIR}/cni/net.d" "${NODE_DIR}/run"
  cat >"${dir}/certs.d/${REGISTRY_ADDR}/hosts.toml" <<EOF
server = "http://${REGISTRY_ADDR}"

[host."http://${REGISTRY_ADDR}"]
  capabilities = ["pull", "resolve"]
EOF
  # The guide's manifests name public images (deploy/operator.yaml's
  # quay.io/example/memcached-operator, the operator's default memcached:1.6-alpine
  # on Docker Hub). This machine cannot reach them: the node pulls those names from
  # the local registry instead, so a manifest applied as written runs a local build.
  local public
  for public in quay.io docker.io; do
    mkdir -p "${dir}/certs.d/${public}"
    cat >"${dir}/certs.d/${public}/hosts.toml" <<EOF
server = "https://${public}"

[host."http://${REGISTRY_ADDR}"]
  capabilities = ["pull", "resolve"]
EOF
  done
  # restrict_oom_score_adj: this machine drops CAP_SYS_RESOURCE, so runc cannot
  # lower a container's oom_score_adj below its own. The opt plugin would create
  # /opt/containerd, and the node has no use for it.
  cat >"${dir}/config.toml" <<EOF
version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${SOCKET}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$("${ROOT}/test/scripts/images.sh" ref pause)"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${NODE_DIR}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${dir}/certs.d"
EOF
  cat >"${NODE_DIR}/cni/net.d/10-${BRIDGE}.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "memcached-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${NODE_DIR}/cni/ipam",
        "ranges": [[{"subnet": "${POD_CIDR}", "rangeStart": "198.18.0.10", "gateway": "${NODE_IP}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
  local dir="${NODE_DIR}/kubelet"
  mkdir -p "${dir}/root" "${dir}/pod-logs"
  # Pods resolve names through a resolver that is not there (loopback inside the
  # pod), so no DNS query leaves the machine; nothing here needs DNS.
  echo "nameserver 127.0.0.1" >"${dir}/resolv.conf"
  cat >"${dir}/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI_DIR}/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${PKI_DIR}/kubelet-serving.crt
tlsPrivateKeyFile: ${PKI_DIR}/kubelet-serving.key
containerRuntimeEndpoint: unix://${SOCKET}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: ${dir}/pod-logs
resolvConf: ${dir}/resolv.conf
serializeImagePulls: false
# A Secret volume is rewritten at the kubelet's next sync of the pod, every
# syncFrequency plus up to half of it: 30 s (default 1m) brings a rotated
# certificate to the sidecar within 45 s (TestTLSAuthRotationAndMetrics).
syncFrequency: 30s
maxPods: 110
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
EOF
}

write_kube_proxy_config() {
  local dir="${NODE_DIR}/kube-proxy"
  mkdir -p "${dir}"
  # conntrack settings of 0 leave the host's conntrack sysctls alone.
  cat >"${dir}/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${dir}/kubeconfig}
mode: iptables
clusterCIDR: ${POD_CIDR}
hostnameOverride: ${NODE_NAME}
bindAddress: ${NODE_IP}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

containerd_answers() {
  ctr --address "${SOCKET}" version >/dev/null 2>&1
}

# node_ready succeeds when the node reports Ready=True.
node_ready() {
  [[ "$("${KUBECTL}" --kubeconfig "$1" get node "${NODE_NAME}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

running() {
  pid_alive "${PID_DIR}/kubelet.pid"
}

cmd_up() {
  (($# == 2)) || fatal "usage: node.sh up CLUSTER KUBECONFIG"
  local cluster="$1" kubeconfig="$2" pki server
  cmd_check || exit 1
  mkdir -p "${NODE_DIR}"
  exec 8>"${NODE_DIR}/.lock"
  flock -w 120 8 || fatal "another node.sh has held ${NODE_DIR}/.lock for 2 minutes"

  if running; then
    local owner
    owner="$(cat "${OWNER_FILE}" 2>/dev/null || echo unknown)"
    if [[ "${owner}" != "${cluster}" ]]; then
      fatal "the real node is running for cluster ${owner}; there is one per machine (stop it with: make demo-down, or test/scripts/node.sh down)"
    fi
    if node_ready "${kubeconfig}"; then
      log "real node ${NODE_NAME} is already running for ${cluster}"
      return 0
    fi
    log "real node ${NODE_NAME} is not Ready; restarting it"
  fi
  # A bridge that this checkout has no record of belongs to a real node started
  # elsewhere (another clone of the repository): there is one per machine.
  if [[ ! -f "${HOST_DIR}/recorded" ]] && ip link show "${BRIDGE}" >/dev/null 2>&1; then
    fatal "bridge ${BRIDGE} exists, but not from this checkout: another real node runs on this machine; stop it with its own node.sh down"
  fi
  # Whatever an earlier run left (a crash, a killed test) goes first.
  teardown
  pki="$(cluster_pki "${cluster}")"
  [[ -r "${pki}/ca.key" ]] || fatal "no CA key for cluster ${cluster} at ${pki} (cluster.sh up creates it)"
  server="$("${KUBECTL}" --kubeconfig "${kubeconfig}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')"

  record_host
  mkdir -p "${PKI_DIR}" "${LOG_DIR}" "${PID_DIR}"
  cp "${pki}/ca.crt" "${PKI_DIR}/ca.crt"
  sign "${pki}" kubelet "/O=system:nodes/CN=system:node:${NODE_NAME}" clientAuth
  sign "${pki}" kubelet-serving "/CN=${NODE_NAME}" serverAuth "IP:${NODE_IP},DNS:${NODE_NAME}"
  sign "${pki}" kube-proxy "/CN=system:kube-proxy" clientAuth
  mkdir -p "${NODE_DIR}/kubelet" "${NODE_DIR}/kube-proxy"
  write_kubeconfig "${NODE_DIR}/kubelet/kubeconfig" "${server}" kubelet
  write_kubeconfig "${NODE_DIR}/kube-proxy/kubeconfig" "${server}" kube-proxy
  echo "${cluster}" >"${OWNER_FILE}"
  realpath "${kubeconfig}" >"${NODE_DIR}/cluster-kubeconfig"

  "${ROOT}/test/scripts/registry.sh" up
  local pause
  pause="$("${ROOT}/test/scripts/images.sh" ref pause)"
  if ! curl -fsS -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://${REGISTRY_ADDR}/v2/local/pause/manifests/${pause##*:}"; then
    "${ROOT}/test/scripts/images.sh" build pause
  fi

  # The bridge exists before any pod, so the node has its IP from the start.
  ip link add "${BRIDGE}" type bridge
  ip addr add "${NODE_IP}/24" dev "${BRIDGE}"
  ip link set "${BRIDGE}" up

  write_containerd_config
  start containerd containerd --config "${NODE_DIR}/containerd/config.toml"
  wait_for 30 "containerd to answer on ${SOCKET}" containerd_answers || {
    tail -n 30 "${LOG_DIR}/containerd.log" >&2
    fatal "containerd did not start"
  }

  write_kubelet_config
  start kubelet "${TOOLS_BIN}/kubelet" \
    --config="${NODE_DIR}/kubelet/config.yaml" \
    --kubeconfig="${NODE_DIR}/kubelet/kubeconfig" \
    --root-dir="${NODE_DIR}/kubelet/root" \
    --cert-dir="${PKI_DIR}" \
    --hostname-override="${NODE_NAME}" \
    --node-ip="${NODE_IP}" \
    --v=1
  write_kube_proxy_config
  start kube-proxy "${TOOLS_BIN}/kube-proxy" --config="${NODE_DIR}/kube-proxy/config.yaml" --v=1

  if ! wait_for 90 "node ${NODE_NAME} to be Ready" node_ready "${kubeconfig}"; then
    tail -n 30 "${LOG_DIR}/kubelet.log" >&2
    fatal "the kubelet did not register a Ready node (logs: ${LOG_DIR})"
  fi
  # A node object left cordoned by an earlier `down` (drain) takes pods again.
  "${KUBECTL}" --kubeconfig "${kubeconfig}" uncordon "${NODE_NAME}" >/dev/null
  log "real node ${NODE_NAME} is Ready in cluster ${cluster} (pods on ${POD_CIDR})"
}

# drain asks the kubelet to stop every pod while the API server still answers, so
# that CNI and volume teardown run the normal way.
drain() {
  local kubeconfig
  kubeconfig="$(cluster_kubeconfig)" || return 0
  "${KUBECTL}" --kubeconfig "${kubeconfig}" --request-timeout=5s cordon "${NODE_NAME}" >/dev/null 2>&1 || return 0
  "${KUBECTL}" --kubeconfig "${kubeconfig}" --request-timeout=10s delete pods --all-namespaces \
    --field-selector "spec.nodeName=${NODE_NAME}" --grace-period=2 --wait=false >/dev/null 2>&1 || return 0
  wait_for 30 "the kubelet to stop the node's pods" no_tasks || true
}

# cluster_kubeconfig prints the admin kubeconfig of the node's cluster, if it exists.
cluster_kubeconfig() {
  local file
  file="$(cat "${NODE_DIR}/cluster-kubeconfig" 2>/dev/null)" || return 1
  [[ -s "${file}" ]] || return 1
  echo "${file}"
}

no_tasks() {
  [[ -z "$(ctr --address "${SOCKET}" -n k8s.io tasks ls -q 2>/dev/null)" ]]
}

# teardown stops the node's processes and containers and restores the host.
teardown() {
  local id pid
  if running && containerd_answers; then
    drain
  fi
  stop kubelet
  stop kube-proxy
  if containerd_answers; then
    for id in $(ctr --address "${SOCKET}" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "${SOCKET}" -n k8s.io tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true
    done
    wait_for 10 "containers to exit" no_running_tasks || true
    for id in $(ctr --address "${SOCKET}" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "${SOCKET}" -n k8s.io tasks delete --force "${id}" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  for pid in $(shims); do
    kill -KILL "${pid}" 2>/dev/null || true
  done
  if [[ -x "${TOOLS_BIN}/kube-proxy" && -f "${HOST_DIR}/recorded" ]]; then
    "${TOOLS_BIN}/kube-proxy" --cleanup >>"${LOG_DIR}/kube-proxy.log" 2>&1 || true
  fi
  restore_host
  rm -rf "${NODE_DIR}/containerd" "${NODE_DIR}/kubelet" "${NODE_DIR}/kube-proxy" "${NODE_DIR}/cni" \
    "${NODE_DIR}/run" "${PKI_DIR}" "${OWNER_FILE}" "${NODE_DIR}/cluster-kubeconfig"
}

no_running_tasks() {
  ! ctr --address "${SOCKET}" -n k8s.io tasks ls 2>/dev/null | grep RUNNING >/dev/null
}

cmd_down() {
  mkdir -p "${NODE_DIR}"
  exec 8>"${NODE_DIR}/.lock"
  flock -w 120 8 || fatal "another node.sh has held ${NODE_DIR}/.lock for 2 minutes"
  [[ -f "${HOST_DIR}/recorded" ]] || running || return 0
  log "stopping real node ${NODE_NAME} and restoring the host"
  teardown
  cmd_verify_clean || fatal "teardown left the host changed (see above)"
  rm -rf "${HOST_DIR}"
}

cmd_status() {
  running || return 1
  cat "${OWNER_FILE}"
}

cmd_logs() {
  (($# == 1)) || fatal "usage: node.sh logs containerd|kubelet|kube-proxy"
  [[ " ${COMPONENTS[*]} " == *" $1 "* ]] || fatal "unknown component $1 (${COMPONENTS[*]})"
  cat "${LOG_DIR}/$1.log"
}

main() {
  (($# >= 1)) || fatal "usage: node.sh check|up|down|status|logs|verify-clean (see the header)"
  local cmd="$1"
  shift
  case "${cmd}" in
    check) cmd_check ;;
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    logs) cmd_logs "$@" ;;
    verify-clean) cmd_verify_clean ;;
    -h | --help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) fatal "unknown command ${cmd}" ;;
  esac
}

main "$@"
