#!/usr/bin/env bash
# lib.sh holds the paths and small helpers that the test/scripts share. Source it; it
# defines functions and variables only and runs nothing.
# shellcheck disable=SC2034 # the variables are for the scripts that source this file

# ROOT is the repository root, whatever directory the caller runs from.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# OUTPUT is the ignored folder for everything built or started locally.
OUTPUT="${ROOT}/tmp/_output"
# TOOLS_DIR holds the tool binaries (bin/) and their cache keys (stamps/).
TOOLS_DIR="${OUTPUT}/tools"
TOOLS_BIN="${TOOLS_DIR}/bin"
# OPERATOR_BIN is the operator binary that `make build` writes.
OPERATOR_BIN="${OUTPUT}/bin/memcached-operator"

# KWOK_WORKDIR keeps kwokctl's cluster state under tmp/_output instead of ~/.kwok.
export KWOK_WORKDIR="${KWOK_WORKDIR:-${OUTPUT}/kwok}"
# KUBECACHEDIR keeps kubectl's discovery cache out of ~/.kube as well.
export KUBECACHEDIR="${KUBECACHEDIR:-${OUTPUT}/kube-cache}"
# KWOK_KUBECTL_BINARY makes kwokctl use our kubectl instead of downloading one.
export KWOK_KUBECTL_BINARY="${TOOLS_BIN}/kubectl"

# REGISTRY_ADDR is the local image registry (test/scripts/registry.sh) that the real
# node pulls from. It listens on loopback only.
export REGISTRY_ADDR="${REGISTRY_ADDR:-127.0.0.1:5000}"

# A pipeline that ends in `grep -q` fails under pipefail when grep exits before the
# writer is done (SIGPIPE, status 141): the scripts let grep read everything and
# send its output to /dev/null instead.

# log prints a progress line to stderr.
log() {
  printf '==> %s\n' "$*" >&2
}

# fatal prints an error to stderr and exits.
fatal() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# require_cmds fails unless every named command is on PATH.
require_cmds() {
  local cmd
  for cmd in "$@"; do
    command -v "${cmd}" >/dev/null 2>&1 || fatal "'${cmd}' is required but not on PATH"
  done
}

# require_tools fails unless every named tool binary exists in TOOLS_BIN.
require_tools() {
  local tool missing=()
  for tool in "$@"; do
    [[ -x "${TOOLS_BIN}/${tool}" ]] || missing+=("${tool}")
  done
  if ((${#missing[@]} > 0)); then
    fatal "missing tools in ${TOOLS_BIN}: ${missing[*]} (run: make tools)"
  fi
}

# wait_for polls "$@" every second until it succeeds or DEADLINE seconds pass.
# Usage: wait_for SECONDS DESCRIPTION COMMAND [ARGS...]
wait_for() {
  local seconds="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      printf 'error: timed out after %ss waiting for %s\n' "${seconds}" "${what}" >&2
      return 1
    fi
    sleep 1
  done
}

# Daemons that the scripts start (containerd, the kubelet, kube-proxy, the registry)
# close descriptors 3 to 9 first, so that none keeps a lock its starter held (a
# suite's or a user's flock on the real node) for as long as it runs.

# stop_pid_file stops the process whose pid FILE holds, if it runs: SIGTERM, then
# SIGKILL after SECONDS. It removes FILE. Usage: stop_pid_file FILE NAME SECONDS
stop_pid_file() {
  local file="$1" name="$2" seconds="$3" pid
  if pid_alive "${file}"; then
    pid="$(<"${file}")"
    log "stopping ${name} (pid ${pid})"
    kill -TERM "${pid}" 2>/dev/null || true
    wait_for "${seconds}" "${name} to exit" bash -c "! kill -0 ${pid} 2>/dev/null" || kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${file}"
}

# pid_alive succeeds when the pid in FILE belongs to a running process.
pid_alive() {
  local file="$1" pid
  [[ -s "${file}" ]] || return 1
  pid="$(<"${file}")"
  kill -0 "${pid}" 2>/dev/null
}
