#!/usr/bin/env bash
# Fails when the committed generated code differs from what
# update-generated.sh produces: it regenerates into a scratch copy of the
# module and diffs, so the work tree is never modified.
set -o errexit -o nounset -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT

cp "${repo_root}/go.mod" "${repo_root}/go.sum" "${scratch}/"
mkdir -p "${scratch}/pkg"
cp -R "${repo_root}/pkg/apis" "${scratch}/pkg/"
rm -f "${scratch}"/pkg/apis/*/*/zz_generated.deepcopy.go

"${repo_root}/tmp/codegen/update-generated.sh" "${scratch}"

if ! diff -ru "${repo_root}/pkg/apis" "${scratch}/pkg/apis"; then
	echo "generated code is stale: run 'make generate' and commit the result" >&2
	exit 1
fi
echo "generated code is up to date"
