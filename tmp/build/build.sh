#!/usr/bin/env bash
# build.sh compiles the operator into tmp/_output/bin/memcached-operator as a
# static binary, the layout that operator-sdk v0.0.x's `operator-sdk build`
# expects before it runs `docker build -f tmp/build/Dockerfile .`, and the
# memcached pods' sidecar into tmp/_output/bin/memcached-sidecar, for
# `docker build -f tmp/build/Dockerfile.sidecar .`.
#
# The sidecar carries its own release (pkg/sidecar/VERSION, embedded) and no
# stamp of the operator's version or commit: its binary is the same for every
# operator release built from the same sidecar sources, as its image tag is.
#
# Environment:
#   VERSION  operator version stamped into pkg/version.Version of the operator
#            (unset: keep the default compiled into pkg/version).
#   GOOS, GOARCH  target platform (default: the host's; the image needs linux).
#   OUT      where to write the binary (default: tmp/_output/bin/memcached-operator),
#            so that an image of another version can be built beside a running one.
#   SIDECAR_OUT  where to write the sidecar (default: memcached-sidecar beside OUT).
set -o errexit -o nounset -o pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${repo_root}"

command -v go >/dev/null 2>&1 || { echo "build.sh: go is not installed or not on PATH" >&2; exit 1; }

readonly pkg="github.com/example-inc/memcached-operator"
readonly out="${OUT:-tmp/_output/bin/memcached-operator}"
readonly sidecar_out="${SIDECAR_OUT:-$(dirname "${out}")/memcached-sidecar}"

git_commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
ldflags="-s -w -X ${pkg}/pkg/version.GitCommit=${git_commit}"
if [[ -n "${VERSION:-}" ]]; then
	ldflags+=" -X ${pkg}/pkg/version.Version=${VERSION}"
fi

mkdir -p "$(dirname "${out}")"
echo "building ${out} (version ${VERSION:-<default>}, commit ${git_commit})"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "${ldflags}" -o "${out}" ./cmd/memcached-operator
echo "building ${sidecar_out} (sidecar version $(cat pkg/sidecar/VERSION))"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${sidecar_out}" ./cmd/memcached-sidecar
