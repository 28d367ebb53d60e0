#!/usr/bin/env bash
# vulncheck.sh runs govulncheck (test/tools/vulncheck, built into tmp/_output/tools/bin)
# over the operator's binaries (./cmd/...) and the test module with its tests, and fails
# on a called vulnerability that test/vuln/reviewed.yaml does not explain, or on an entry
# there that no scan finds called any more (test/vuln has the rules).
#
# Usage: test/scripts/vulncheck.sh
#   GOVULNDB  the Go vulnerability database: a URL, or file:///ABSOLUTE/PATH of a copy
#             (a folder of OSV files, such as CI's ../shared/vulndb); empty or unset
#             means https://vuln.go.dev. govulncheck fails when it cannot read it, so
#             the check never passes without a database.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  if [[ $# -gt 0 ]]; then
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    [[ "$1" == -h || "$1" == --help ]] && exit 0
    exit 2
  fi
  require_cmds go
  local db="${GOVULNDB:-https://vuln.go.dev}"
  if [[ "${db}" == file://* && ! -d "${db#file://}" ]]; then
    fatal "GOVULNDB=${db}: no such folder (file:// takes an absolute path)"
  fi

  "${ROOT}/test/scripts/build-tools.sh" govulncheck
  require_tools govulncheck

  local out="${OUTPUT}/vulncheck"
  mkdir -p "${out}"
  rm -f "${out}"/*.json
  # CGO_ENABLED=0, as the binaries are built (tmp/build/build.sh) and the test module
  # is vetted and run (the Makefile's SHARED_ENV): the scans see the files they compile.
  log "govulncheck over the operator's binaries (./cmd/...), database ${db}"
  (cd "${ROOT}" && CGO_ENABLED=0 "${TOOLS_BIN}/govulncheck" -db "${db}" -format json ./cmd/...) >"${out}/operator.json"
  log "govulncheck over the test module and its tests"
  (cd "${ROOT}/test" && CGO_ENABLED=0 "${TOOLS_BIN}/govulncheck" -db "${db}" -format json -test ./...) >"${out}/test.json"

  (cd "${ROOT}/test" && CGO_ENABLED=0 go run -trimpath ./cmd/vulngate --reviewed vuln/reviewed.yaml \
    "operator binaries=${out}/operator.json" "test module=${out}/test.json")
}

main "$@"
