#!/usr/bin/env bash
# olm-catalog.sh renders the OLM ClusterServiceVersion of one operator release from deploy/
# into deploy/olm-catalog/memcached-operator/VERSION/ (the CSV and a copy of deploy/crd.yaml),
# and points the package's alpha channel at the newest release. The CSV's permissions, service
# account and deployment come from deploy/rbac.yaml, deploy/sa.yaml and deploy/operator.yaml;
# never edit the catalog by hand.
#
# Usage: test/scripts/olm-catalog.sh VERSION [REPLACES]
#        test/scripts/olm-catalog.sh --verify
#   VERSION   the release to render, such as 0.0.2 (image quay.io/example/memcached-operator:vVERSION).
#   REPLACES  the release it upgrades from, such as 0.0.1; empty for the first release.
#   --verify  render every committed release into a temporary directory and fail if the
#             committed catalog differs from it.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
  require_cmds go
  local args=(--deploy-dir "${ROOT}/deploy" --catalog-dir "${ROOT}/deploy/olm-catalog/memcached-operator")
  case "${1:-}" in
    "" | -h | --help)
      usage
      [[ -n "${1:-}" ]] || exit 2
      exit 0
      ;;
    --verify) args+=(--verify) ;;
    *) args+=(--version "$1" --replaces "${2:-}") ;;
  esac
  # The Makefile's SHARED_ENV and SHARED_FLAGS, so `make verify` compiles nothing twice.
  (cd "${ROOT}/test" && CGO_ENABLED=0 go run -trimpath ./cmd/csvgen "${args[@]}")
}

main "$@"
