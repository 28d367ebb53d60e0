#!/usr/bin/env bash
# build-olm.sh builds OLM's `olm` operator from the operator-lifecycle-manager module pinned
# in test/tools/olm into tmp/_output/tools/bin/olm. Like build-tools.sh, it skips the build
# when the binary was built from the same module state (go.mod + go.sum + Go version), so a
# second run is instant, and it records that state in tmp/_output/tools/stamps/olm.
#
# Usage: test/scripts/build-olm.sh [--force] [--print-crds-dir]
#   --force           rebuild even when the binary is fresh.
#   --print-crds-dir  print the directory of OLM's CRD manifests: the crds/ folder of the
#                     github.com/operator-framework/api version that OLM requires, in the Go
#                     module cache (downloaded if missing). Nothing is copied into the repo.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODULE_DIR="${ROOT}/test/tools/olm"
OLM_PKG=github.com/operator-framework/operator-lifecycle-manager

# cache_key identifies what the olm binary is built from; it matches build-tools.sh.
cache_key() {
  cat "${MODULE_DIR}/go.mod" "${MODULE_DIR}/go.sum" <(go env GOVERSION) | sha256sum | cut -d' ' -f1
}

# build builds the olm binary unless it is fresh, stamping OLM's version into it.
build() {
  local force="$1" key version tmp
  key="$(cache_key)"
  if [[ "${force}" != true && -x "${TOOLS_BIN}/olm" && -f "${TOOLS_DIR}/stamps/olm" &&
    "$(<"${TOOLS_DIR}/stamps/olm")" == "${key}" ]]; then
    return 0
  fi
  version="$(cd "${MODULE_DIR}" && go list -m -f '{{.Version}}' "${OLM_PKG}")"
  log "building olm ${version} from test/tools/olm (the first, cold build takes about 3 minutes)"
  tmp="$(mktemp -d "${TOOLS_DIR}/build.XXXXXX")"
  BUILD_TMP="${tmp}"
  (cd "${MODULE_DIR}" &&
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X ${OLM_PKG}/pkg/version.OLMVersion=${version#v}" \
      -o "${tmp}/olm" "${OLM_PKG}/cmd/olm")
  mv -f "${tmp}/olm" "${TOOLS_BIN}/olm"
  echo "${key}" >"${TOOLS_DIR}/stamps/olm"
  rm -rf "${tmp}"
}

# crds_dir prints the crds/ folder of the operator-framework/api module that OLM builds with.
crds_dir() {
  local dir
  dir="$(cd "${MODULE_DIR}" && go mod download -json github.com/operator-framework/api |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "${dir}/crds" ]] || fatal "no crds/ folder in '${dir}'"
  echo "${dir}/crds"
}

main() {
  local force=false print_crds=false arg
  for arg in "$@"; do
    case "${arg}" in
      --force) force=true ;;
      --print-crds-dir) print_crds=true ;;
      -h | --help)
        sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
      *) fatal "unknown argument ${arg}" ;;
    esac
  done

  require_cmds go sha256sum flock
  mkdir -p "${TOOLS_BIN}" "${TOOLS_DIR}/stamps"
  BUILD_TMP=""
  trap 'rm -rf "${BUILD_TMP}"' EXIT
  # Share build-tools.sh's lock so concurrent builds (make e2e and a test) serialize.
  exec 9>"${TOOLS_DIR}/.lock"
  flock 9
  build "${force}"
  exec 9>&-
  if [[ "${print_crds}" == true ]]; then
    crds_dir
  fi
}

main "$@"
