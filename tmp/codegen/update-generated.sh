#!/usr/bin/env bash
# Regenerates zz_generated.deepcopy.go for every API package with deepcopy-gen
# from k8s.io/code-generator, built by test/scripts/build-tools.sh.
#
# Usage: tmp/codegen/update-generated.sh [MODULE_ROOT]
# MODULE_ROOT defaults to this repository; verify-generated.sh passes a copy.
set -o errexit -o nounset -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
module_root=${1:-${repo_root}}
deepcopy_gen=${DEEPCOPY_GEN:-${repo_root}/tmp/_output/tools/bin/deepcopy-gen}

if [[ ! -x ${deepcopy_gen} ]]; then
	"${repo_root}/test/scripts/build-tools.sh" deepcopy-gen
fi

cd "${module_root}"
"${deepcopy_gen}" \
	--go-header-file "${repo_root}/tmp/codegen/boilerplate.go.txt" \
	--output-file zz_generated.deepcopy.go \
	./pkg/apis/cache/v1alpha1
