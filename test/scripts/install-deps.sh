#!/usr/bin/env bash
# install-deps.sh installs the Debian packages that the real node, the images and the
# tests need, when some are missing. It runs apt-get only as root and only when a
# package is missing, so a second run is instant and changes nothing.
#
# Usage:
#   install-deps.sh node    what `make demo` needs for the real node and its images
#   install-deps.sh test    that, plus what `make test` needs (gcc for -race, git, make)
#   install-deps.sh --list node|test   print the package names and exit
#
# Exits non-zero, saying which packages are missing, when it cannot install them (not
# root, or no apt-get).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# NODE_PACKAGES run the real node (containerd, runc, CNI plugins, iptables and
# nftables, iproute2, openssl for its certificates, util-linux for findmnt) and build
# and serve its images (buildah, docker.io for the guide's `operator-sdk build` and
# `docker push` through test/scripts/dockerd.sh, docker-registry, memcached, curl).
NODE_PACKAGES=(containerd runc containernetworking-plugins iptables nftables iproute2 openssl
  util-linux curl buildah docker.io docker-registry memcached ca-certificates)

# POLICY_RC_D is where invoke-rc.d asks whether a package script may start a service.
POLICY_RC_D=/usr/sbin/policy-rc.d

# TEST_PACKAGES add gcc and libc6-dev for `go test -race`, make and git; prometheus
# (2.42: prometheus, promtool, the console libraries and the graphing scripts they load)
# for the promtool of test/monitoring (`promtool check rules`, `promtool test rules`)
# and the real-node suite's Prometheus; chromium, with fonts-liberation for its text,
# for that suite's headless screenshot of the console page; and Node.js for the npm
# client of the discovery tests (test/scripts/npm-client.sh), with npm too unless the
# nodejs installed already brings it, as NodeSource's does, whose nodejs conflicts with
# Debian's npm package; and ipset, which kube-router's network policy firewall, run by
# the real-node suite (framework.KubeRouter), drives and the suite reads back.
TEST_PACKAGES=("${NODE_PACKAGES[@]}" gcc libc6-dev make git prometheus chromium fonts-liberation nodejs ipset)
command -v npm >/dev/null 2>&1 || TEST_PACKAGES+=(npm)

packages() {
  case "$1" in
    node) echo "${NODE_PACKAGES[@]}" ;;
    test) echo "${TEST_PACKAGES[@]}" ;;
    *) fatal "usage: install-deps.sh [--list] node|test" ;;
  esac
}

# missing prints the packages of the list that dpkg does not report as installed.
missing() {
  local pkg
  for pkg in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null)" == "install ok installed" ]] || echo "${pkg}"
  done
}

main() {
  if [[ "${1:-}" == --list ]]; then
    packages "${2:-}"
    return
  fi
  local -a wanted todo
  read -r -a wanted <<<"$(packages "${1:-}")"
  command -v dpkg-query >/dev/null 2>&1 || fatal "not a Debian-like system (no dpkg-query); install these yourself: ${wanted[*]}"
  mapfile -t todo < <(missing "${wanted[@]}")
  ((${#todo[@]} > 0)) || return 0
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    fatal "missing Debian packages: ${todo[*]} (as root: apt-get install -y ${todo[*]})"
  fi
  log "installing Debian packages: ${todo[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [[ ! -e "${POLICY_RC_D}" ]]; then
    printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs packages.\nexit 101\n' >"${POLICY_RC_D}"
    chmod 0755 "${POLICY_RC_D}"
    trap 'rm -f "${POLICY_RC_D}"' EXIT
  fi
  apt-get update >&2
  apt-get install -y --no-install-recommends "${todo[@]}" >&2
}

main "$@"
