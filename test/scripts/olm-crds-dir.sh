#!/usr/bin/env bash
# olm-crds-dir.sh prints the directory of OLM's CRD manifests: the crds/ folder of the
# github.com/operator-framework/api version that test/tools/olm's OLM requires, in the Go
# module cache (downloaded if missing). Nothing third-party is copied into the repository.
#
# Usage: test/scripts/olm-crds-dir.sh
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_cmds go
dir="$(cd "${ROOT}/test/tools/olm" && go mod download -json github.com/operator-framework/api |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "${dir}/crds" ]] || fatal "no crds/ folder in '${dir}'"
echo "${dir}/crds"
