#!/usr/bin/env bash
# dockerd.sh runs a private Docker engine (Debian's docker.io) for the guide's
# `operator-sdk build` and `docker push` and for the image suite. Its state, socket
# and log live in tmp/_output/docker; it has no bridge, no iptables rules and no IP
# forwarding, so no traffic leaves the machine and `docker run` needs
# `--network none`. It pushes only where it is told: the tests push to the local
# registry on 127.0.0.1, which docker treats as insecure (plain HTTP) by default.
#
# dockerd still writes a few files outside its folders (its trust key
# /etc/docker/key.json, /opt/containerd, /run/docker, cgroups named docker): `start`
# records which of them exist, `stop` removes those it created and fails when the
# host is not as it found it.
#
# Suites in parallel (`go test ./...` runs packages at once) share one daemon: each
# `start` counts its caller (the parent process, e.g. a test binary) as a user, and
# `stop` stops the daemon only when no live user is left.
#
# Usage:
#   dockerd.sh start    start it unless it answers; the caller becomes a user
#   dockerd.sh stop     the caller stops using it; the last user stops it and restores the host
#   dockerd.sh down     stop it whoever uses it, and restore the host
#   dockerd.sh status   succeed when it answers
#   dockerd.sh env      print DOCKER_HOST, DOCKER_CONFIG and DOCKER_BUILDKIT, one KEY=VALUE a
#                       line: export $(test/scripts/dockerd.sh env)
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DOCKER_DIR="${OUTPUT}/docker"
PID_FILE="${DOCKER_DIR}/dockerd.pid"
LOG_FILE="${DOCKER_DIR}/dockerd.log"
# HOST_BEFORE lists the host paths that existed before `start`.
HOST_BEFORE="${DOCKER_DIR}/host-before"
# USERS_DIR holds one file per user, named by its pid.
USERS_DIR="${DOCKER_DIR}/users"
SOCKET="${DOCKER_DIR}/docker.sock"
export DOCKER_HOST="unix://${SOCKET}"
# DOCKER_CONFIG keeps the docker command's own files out of ~/.docker.
export DOCKER_CONFIG="${DOCKER_DIR}/config"
# DOCKER_BUILDKIT=0 keeps `docker build` (and so `operator-sdk build`) on the classic
# builder: a docker command newer than 23 otherwise wants the buildx plugin, which
# Debian's docker.io does not ship.
export DOCKER_BUILDKIT=0

# host_paths prints the paths outside DOCKER_DIR that dockerd 20.10 and its
# containerd may create: fixed ones, and a docker cgroup in each hierarchy.
host_paths() {
  printf '%s\n' /etc/docker/key.json /opt/containerd /run/docker /var/run/docker.sock /var/lib/docker
  local hierarchy
  for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    [[ -d "${hierarchy}" ]] && printf '%s\n' "${hierarchy%/}/docker"
  done
}

# existing prints the host paths that exist now.
existing() {
  local p
  while read -r p; do
    if [[ -e "${p}" || -L "${p}" ]]; then echo "${p}"; fi
  done < <(host_paths)
}

answers() {
  docker info >/dev/null 2>&1
}

# lock serializes start and stop; the daemon does not inherit the lock (3-9 closed).
lock() {
  mkdir -p "${USERS_DIR}"
  exec 9>"${DOCKER_DIR}/.lock"
  flock 9
}

# live_users drops the users whose process has ended and prints the count of the rest.
live_users() {
  local f n=0
  for f in "${USERS_DIR}"/*; do
    [[ -e "${f}" ]] || continue
    if kill -0 "${f##*/}" 2>/dev/null; then n=$((n + 1)); else rm -f "${f}"; fi
  done
  echo "${n}"
}

cmd_start() {
  require_cmds dockerd docker setsid flock
  lock
  touch "${USERS_DIR}/${PPID}"
  if answers; then
    pid_alive "${PID_FILE}" || fatal "something else answers on ${SOCKET}"
    return 0
  fi
  mkdir -p "${DOCKER_DIR}/data" "${DOCKER_DIR}/exec" "${DOCKER_CONFIG}"
  # A host record of a run that crashed before `stop` is the one to restore to.
  [[ -f "${HOST_BEFORE}" ]] || existing >"${HOST_BEFORE}"
  log "starting a private dockerd (socket ${SOCKET#"${ROOT}/"}, log ${LOG_FILE#"${ROOT}/"})"
  setsid dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --storage-driver=vfs --data-root "${DOCKER_DIR}/data" --exec-root "${DOCKER_DIR}/exec" \
    --host "${DOCKER_HOST}" --pidfile "${PID_FILE}" \
    >>"${LOG_FILE}" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  if ! wait_for 60 "dockerd on ${SOCKET}" answers; then
    tail -n 20 "${LOG_FILE}" >&2
    rm -f "${USERS_DIR}/${PPID}"
    down || true
    fatal "dockerd did not start"
  fi
}

cmd_stop() {
  lock
  rm -f "${USERS_DIR}/${PPID}"
  local n
  n="$(live_users)"
  if ((n > 0)); then
    log "dockerd keeps running for ${n} other user(s)"
    return 0
  fi
  down
}

# remove_path removes P: a cgroup with rmdir, bottom up (its files are not
# files), anything else with rm -rf.
remove_path() {
  local p="$1"
  if [[ "${p}" == /sys/fs/cgroup/* ]]; then
    find "${p}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  else
    rm -rf "${p}"
  fi
}

# down stops the daemon and restores the host.
down() {
  stop_pid_file "${PID_FILE}" dockerd 30
  # dockerd stops its containerd on SIGTERM; after a SIGKILL it may linger.
  stop_pid_file "${DOCKER_DIR}/exec/containerd/containerd.pid" "dockerd's containerd" 15
  local mnt
  while read -r mnt; do
    umount "${mnt}" 2>/dev/null || umount -l "${mnt}"
  done < <(findmnt -rno TARGET | grep -F "${DOCKER_DIR}/" | sort -r || true)
  rm -rf "${DOCKER_DIR}/exec" "${SOCKET}"
  [[ -f "${HOST_BEFORE}" ]] || return 0
  local p left=()
  while read -r p; do
    grep -qxF -- "${p}" "${HOST_BEFORE}" || remove_path "${p}"
  done < <(existing)
  while read -r p; do
    grep -qxF -- "${p}" "${HOST_BEFORE}" || left+=("${p}")
  done < <(existing)
  ((${#left[@]} == 0)) || fatal "dockerd left on the host: ${left[*]}"
  rm -f "${HOST_BEFORE}"
}

main() {
  case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    down) lock && rm -f "${USERS_DIR}"/* && down ;;
    status) answers ;;
    env) printf '%s\n' "DOCKER_HOST=${DOCKER_HOST}" "DOCKER_CONFIG=${DOCKER_CONFIG}" DOCKER_BUILDKIT=0 ;;
    -h | --help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) fatal "usage: dockerd.sh start|stop|down|status|env" ;;
  esac
}

main "$@"
