#!/usr/bin/env bash
# images.sh builds the images that the local cluster's real node runs and pushes
# them to the local registry (test/scripts/registry.sh, started when needed). All of
# them build offline, FROM scratch, with buildah (vfs storage in tmp/_output/buildah):
#   pause      the pod sandbox image (test/images/pause, a static Go program);
#   tenant     what the real-node suite's hostile tenant runs in its pods, and the
#              client of its network policy test (test/images/tenant, a static Go
#              program; tag 1.1 added its idle and probe modes);
#   memcached  Debian's memcached package: the binary, the libraries ldd lists and a
#              memcache user with uid 11211 (test/images/memcached/Dockerfile);
#   operator   the operator image (tmp/build/Dockerfile), once per release under
#              deploy/olm-catalog (0.0.1, 0.0.2...), each binary stamped with its
#              version, so OLM upgrades between two real images;
#   sidecar    the memcached pods' sidecar (tmp/build/Dockerfile.sidecar), once, at
#              its own release (pkg/sidecar/VERSION), which every catalog release
#              names, at the path the operator's default
#              (quay.io/example/memcached-sidecar) has in the node's quay.io mirror.
# These are local builds, not the upstream images: their names say so (local/...,
# and the registry's address).
#
# Usage:
#   images.sh build [IMAGE...]      build and push IMAGE (pause, tenant, memcached,
#                                   operator, sidecar; default: all)
#   images.sh ref pause|tenant|memcached   print the image reference
#   images.sh ref operator VERSION  print the operator image of release VERSION
#   images.sh ref sidecar           print the sidecar image of pkg/sidecar/VERSION
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD_DIR="${OUTPUT}/images"
BUILDAH=(buildah --storage-driver=vfs --root "${OUTPUT}/buildah/root" --runroot "${OUTPUT}/buildah/runroot")

# memcached_version prints the upstream version of the installed memcached (1.6.18).
memcached_version() {
  memcached -V | awk '{print $2}'
}

ref() {
  case "$1" in
    pause) echo "${REGISTRY_ADDR}/local/pause:1.0" ;;
    tenant) echo "${REGISTRY_ADDR}/local/tenant:1.1" ;;
    memcached) echo "${REGISTRY_ADDR}/local/memcached:$(memcached_version)" ;;
    operator)
      (($# == 2)) || fatal "usage: images.sh ref operator VERSION"
      echo "${REGISTRY_ADDR}/example/memcached-operator:v$2"
      ;;
    sidecar)
      (($# == 1)) || fatal "usage: images.sh ref sidecar (its version is pkg/sidecar/VERSION)"
      echo "${REGISTRY_ADDR}/example/memcached-sidecar:v$(sidecar_version)"
      ;;
    *) fatal "unknown image $1 (pause, tenant, memcached, operator, sidecar)" ;;
  esac
}

# sidecar_version prints the sidecar's own release.
sidecar_version() {
  tr -d '[:space:]' <"${ROOT}/pkg/sidecar/VERSION"
}

# catalog_versions prints the operator releases that deploy/olm-catalog holds.
catalog_versions() {
  find "${ROOT}/deploy/olm-catalog/memcached-operator" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V
}

# build_push builds DOCKERFILE with CONTEXT as IMAGE and pushes it.
build_push() {
  local image="$1" dockerfile="$2" context="$3"
  shift 3
  log "building ${image}"
  "${BUILDAH[@]}" bud --quiet --isolation=chroot --cni-config-dir="${OUTPUT}/buildah/cni" "$@" -f "${dockerfile}" -t "${image}" "${context}" >/dev/null
  "${BUILDAH[@]}" push --quiet --tls-verify=false "${image}"
}

build_pause() {
  local ctx="${BUILD_DIR}/pause"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  (cd "${ROOT}/test" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "${ctx}/pause" ./images/pause)
  build_push "$(ref pause)" "${ROOT}/test/images/pause/Dockerfile" "${ctx}"
}

# build_tenant builds test/images/tenant, the hostile tenant's programs of the
# real-node suite's TestHostileTenant.
build_tenant() {
  local ctx="${BUILD_DIR}/tenant"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  (cd "${ROOT}/test" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "${ctx}/tenant" ./images/tenant)
  build_push "$(ref tenant)" "${ROOT}/test/images/tenant/Dockerfile" "${ctx}"
}

build_memcached() {
  require_cmds memcached ldd
  local ctx="${BUILD_DIR}/memcached" bin lib
  bin="$(command -v memcached)"
  rm -rf "${ctx}" && mkdir -p "${ctx}/rootfs/usr/local/bin" "${ctx}/rootfs/etc"
  cp -L "${bin}" "${ctx}/rootfs/usr/local/bin/memcached"
  # Every library with an absolute path (the vdso has none), at the path the
  # dynamic linker looks for it.
  while read -r lib; do
    mkdir -p "${ctx}/rootfs$(dirname "${lib}")"
    cp -L "${lib}" "${ctx}/rootfs${lib}"
  done < <(ldd "${bin}" | grep -o '/[^ ]*' | sort -u)
  echo 'memcache:x:11211:11211:memcached:/nonexistent:/usr/sbin/nologin' >"${ctx}/rootfs/etc/passwd"
  echo 'memcache:x:11211:' >"${ctx}/rootfs/etc/group"
  build_push "$(ref memcached)" "${ROOT}/test/images/memcached/Dockerfile" "${ctx}"
}

# build_operator builds one operator binary per catalog release into its own folder
# (never over tmp/_output/bin, which running tests use) and an image from each.
build_operator() {
  local version ctx
  for version in $(catalog_versions); do
    ctx="${BUILD_DIR}/operator-${version}"
    rm -rf "${ctx}" && mkdir -p "${ctx}/tmp/_output/bin"
    GOOS=linux VERSION="${version}" OUT="${ctx}/tmp/_output/bin/memcached-operator" "${ROOT}/tmp/build/build.sh" >&2
    build_push "$(ref operator "${version}")" "${ROOT}/tmp/build/Dockerfile" "${ctx}" \
      --build-arg "VERSION=${version}" \
      --build-arg "GIT_COMMIT=$(git -C "${ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  done
}

# build_sidecar builds the sidecar image of its one release, which every catalog
# release's CSV names, in a folder of its own so that it never depends on
# build_operator.
build_sidecar() {
  local ctx="${BUILD_DIR}/sidecar"
  rm -rf "${ctx}" && mkdir -p "${ctx}/tmp/_output/bin"
  GOOS=linux OUT="${ctx}/operator" SIDECAR_OUT="${ctx}/tmp/_output/bin/memcached-sidecar" "${ROOT}/tmp/build/build.sh" >&2
  rm -f "${ctx}/operator"
  build_push "$(ref sidecar)" "${ROOT}/tmp/build/Dockerfile.sidecar" "${ctx}" \
    --build-arg "VERSION=$(sidecar_version)"
}

cmd_build() {
  require_cmds buildah go
  local images=("$@") image
  ((${#images[@]} > 0)) || images=(pause tenant memcached operator sidecar)
  for image in "${images[@]}"; do
    [[ "${image}" =~ ^(pause|tenant|memcached|operator|sidecar)$ ]] || fatal "unknown image ${image} (pause, tenant, memcached, operator, sidecar)"
  done
  "${ROOT}/test/scripts/registry.sh" up
  mkdir -p "${BUILD_DIR}"
  for image in "${images[@]}"; do
    "build_${image}"
  done
}

main() {
  (($# >= 1)) || fatal "usage: images.sh build [IMAGE...] | ref IMAGE [VERSION]"
  local cmd="$1"
  shift
  case "${cmd}" in
    build) cmd_build "$@" ;;
    ref) ref "$@" ;;
    -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) fatal "unknown command ${cmd}" ;;
  esac
}

main "$@"
