#!/usr/bin/env bash
# image.sh builds or pushes the operator image, or the sidecar image that the
# memcached pods of Memcacheds with TLS, auth or monitoring run, with docker, podman
# or buildah.
#
# Usage:
#   tmp/build/image.sh build IMAGE   # docker build -f tmp/build/Dockerfile -t IMAGE . (repo root)
#   tmp/build/image.sh push IMAGE
#
# The binary must already be in tmp/_output/bin (tmp/build/build.sh, `make build`).
#
# Environment:
#   COMPONENT         operator (tmp/build/Dockerfile, the default) or sidecar
#                     (tmp/build/Dockerfile.sidecar).
#   CONTAINER_TOOL    docker, podman or buildah (default: docker if its daemon
#                     answers, else podman, else buildah).
#   VERSION           value of the operator image's org.opencontainers.image.version
#                     label (default: dev). The sidecar image's is always
#                     pkg/sidecar/VERSION, the sidecar's own release.
#   PUSH_TLS_VERIFY   true or false: verify TLS when podman or buildah push.
#                     Default: false for localhost/127.0.0.1/[::1] registries
#                     (plain-HTTP local registries), true otherwise. Docker's
#                     daemon decides this itself (insecure-registries).
#   BUILDAH_STORAGE_DRIVER  buildah --storage-driver (default: vfs, which needs
#                     no kernel overlay or fuse support).
#   BUILDAH_ROOT, BUILDAH_RUNROOT  buildah --root/--runroot (default: buildah's own).
set -o errexit -o nounset -o pipefail

usage() {
	echo "usage: $0 build|push IMAGE" >&2
	exit 2
}

die() {
	echo "image.sh: $*" >&2
	exit 1
}

[[ $# -eq 2 ]] || usage
action="$1"
image="$2"
[[ -n "${image}" ]] || die "IMAGE is empty"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${repo_root}"

case "${COMPONENT:-operator}" in
operator)
	readonly dockerfile="tmp/build/Dockerfile"
	readonly binary="tmp/_output/bin/memcached-operator"
	;;
sidecar)
	readonly dockerfile="tmp/build/Dockerfile.sidecar"
	readonly binary="tmp/_output/bin/memcached-sidecar"
	;;
*) die "COMPONENT=${COMPONENT} is not operator or sidecar" ;;
esac

# pick_tool prints the container tool to use.
pick_tool() {
	if [[ -n "${CONTAINER_TOOL:-}" ]]; then
		case "${CONTAINER_TOOL}" in
		docker | podman | buildah) ;;
		*) die "CONTAINER_TOOL=${CONTAINER_TOOL} is not one of docker, podman, buildah" ;;
		esac
		command -v "${CONTAINER_TOOL}" >/dev/null 2>&1 || die "CONTAINER_TOOL=${CONTAINER_TOOL} but ${CONTAINER_TOOL} is not on PATH"
		echo "${CONTAINER_TOOL}"
		return
	fi
	# A docker CLI without a reachable daemon cannot build; fall through to the
	# daemonless tools in that case.
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		echo docker
	elif command -v podman >/dev/null 2>&1; then
		echo podman
	elif command -v buildah >/dev/null 2>&1; then
		echo buildah
	else
		die "no container tool found: install docker (with a running daemon), podman or buildah, or set CONTAINER_TOOL"
	fi
}

# registry_host prints the registry part of an image reference, or nothing
# for a Docker Hub short name.
registry_host() {
	local first="${1%%/*}"
	if [[ "$1" == */* && ("${first}" == *.* || "${first}" == *:* || "${first}" == localhost) ]]; then
		echo "${first}"
	fi
}

# tls_verify prints true or false for podman/buildah push --tls-verify.
tls_verify() {
	if [[ -n "${PUSH_TLS_VERIFY:-}" ]]; then
		case "${PUSH_TLS_VERIFY}" in
		true | false) echo "${PUSH_TLS_VERIFY}" ;;
		*) die "PUSH_TLS_VERIFY=${PUSH_TLS_VERIFY} must be true or false" ;;
		esac
		return
	fi
	case "$(registry_host "${image}")" in
	localhost | localhost:* | 127.0.0.1 | 127.0.0.1:* | "[::1]" | "[::1]:"*) echo false ;;
	*) echo true ;;
	esac
}

tool="$(pick_tool)"
buildah_global=(--storage-driver="${BUILDAH_STORAGE_DRIVER:-vfs}")
if [[ -n "${BUILDAH_ROOT:-}" ]]; then
	buildah_global+=(--root "${BUILDAH_ROOT}")
fi
if [[ -n "${BUILDAH_RUNROOT:-}" ]]; then
	buildah_global+=(--runroot "${BUILDAH_RUNROOT}")
fi

case "${action}" in
build)
	[[ -f "${binary}" ]] || die "${binary} is missing: run 'make build' (tmp/build/build.sh) first"
	[[ "$(head -c 4 "${binary}" | od -An -c | tr -d ' ')" == '177ELF' ]] ||
		die "${binary} is not a Linux (ELF) binary: build it with GOOS=linux tmp/build/build.sh"
	case "${COMPONENT:-operator}" in
	operator)
		build_args=(
			--build-arg "VERSION=${VERSION:-dev}"
			--build-arg "GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
		)
		;;
	sidecar) build_args=(--build-arg "VERSION=$(cat pkg/sidecar/VERSION)") ;;
	esac
	echo "building ${image} with ${tool}"
	case "${tool}" in
	docker | podman) "${tool}" build "${build_args[@]}" -f "${dockerfile}" -t "${image}" . ;;
	buildah) buildah "${buildah_global[@]}" bud --isolation=chroot "${build_args[@]}" -f "${dockerfile}" -t "${image}" . ;;
	esac
	;;
push)
	verify="$(tls_verify)"
	echo "pushing ${image} with ${tool}"
	case "${tool}" in
	docker) docker push "${image}" ;;
	podman) podman push --tls-verify="${verify}" "${image}" ;;
	buildah) buildah "${buildah_global[@]}" push --tls-verify="${verify}" "${image}" ;;
	esac
	;;
*)
	usage
	;;
esac
