#!/usr/bin/env bash
# npm-client.sh installs the npm client that the discovery tests drive, memcached-elasticache
# with its dependencies exactly as test/npm/package-lock.json pins them, into
# tmp/_output/npm, and prints that folder. It installs only when the lock changed since the
# last install, so a second run is instant and asks the registry nothing.
#
# Usage: test/scripts/npm-client.sh
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  require_cmds node npm
  local src="${ROOT}/test/npm" dir="${OUTPUT}/npm"
  local stamp="${dir}/.installed-lock"
  if [[ -f "${stamp}" ]] && cmp -s "${stamp}" "${src}/package-lock.json" && [[ -d "${dir}/node_modules/memcached-elasticache" ]]; then
    echo "${dir}"
    return
  fi
  log "installing the npm client of test/npm/package-lock.json into ${dir}"
  mkdir -p "${dir}"
  cp "${src}/package.json" "${src}/package-lock.json" "${dir}/"
  # npm ci installs what the lock names, nothing newer, and runs no package's scripts.
  (cd "${dir}" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  cp "${src}/package-lock.json" "${stamp}"
  echo "${dir}"
}

main "$@"
