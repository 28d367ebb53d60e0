#!/usr/bin/env bash
# registry.sh runs the local image registry that the real node pulls from: Debian's
# docker-registry on 127.0.0.1 only, plain HTTP, storage in tmp/_output/registry.
# One registry serves every local cluster; it keeps running until `down`.
#
# Usage:
#   registry.sh up       start it unless it already answers (idempotent)
#   registry.sh down     stop it (the stored images stay; `make clean-images` drops them)
#   registry.sh status   succeed when it answers /v2/
#   registry.sh require-free
#                        fail, saying what to do, when something other than this
#                        checkout's registry answers on its address (`up` would)
#   registry.sh addr     print its address (REGISTRY_ADDR, default 127.0.0.1:5000)
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY_DIR="${OUTPUT}/registry"
PID_FILE="${REGISTRY_DIR}/registry.pid"
LOG_FILE="${REGISTRY_DIR}/registry.log"

# answers succeeds when the registry's API root answers.
answers() {
  curl -fsS --max-time 2 "http://${REGISTRY_ADDR}/v2/" >/dev/null 2>&1
}

# cmd_require_free fails when something answers on REGISTRY_ADDR that this
# checkout's registry.sh did not start.
cmd_require_free() {
  if answers && ! pid_alive "${PID_FILE}"; then
    fatal "something else answers on ${REGISTRY_ADDR}, perhaps the registry of make demo, or of a test run, in another checkout: stop it there (\`make demo-down\` for a demo), or set REGISTRY_ADDR"
  fi
}

cmd_up() {
  require_cmds docker-registry curl setsid
  [[ "${REGISTRY_ADDR}" == 127.0.0.1:* ]] || fatal "REGISTRY_ADDR=${REGISTRY_ADDR} must be on 127.0.0.1: the registry is for this machine only"
  cmd_require_free
  if answers; then
    return 0
  fi
  mkdir -p "${REGISTRY_DIR}/storage"
  cat >"${REGISTRY_DIR}/config.yml" <<CONFIG
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ${REGISTRY_DIR}/storage
  delete:
    enabled: true
http:
  addr: ${REGISTRY_ADDR}
CONFIG
  log "starting docker-registry on ${REGISTRY_ADDR} (log: ${LOG_FILE#"${ROOT}/"})"
  setsid docker-registry serve "${REGISTRY_DIR}/config.yml" >>"${LOG_FILE}" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo "$!" >"${PID_FILE}"
  if ! wait_for 30 "docker-registry on ${REGISTRY_ADDR}" answers; then
    tail -n 20 "${LOG_FILE}" >&2
    fatal "docker-registry did not start"
  fi
}

cmd_down() {
  stop_pid_file "${PID_FILE}" docker-registry 15
}

main() {
  case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) answers ;;
    require-free) cmd_require_free ;;
    addr) echo "${REGISTRY_ADDR}" ;;
    -h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) fatal "usage: registry.sh up|down|status|require-free|addr" ;;
  esac
}

main "$@"
