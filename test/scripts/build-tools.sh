#!/usr/bin/env bash
# build-tools.sh builds the local-cluster tools from their pinned Go modules into
# tmp/_output/tools/bin, skipping every tool that is already built from the same
# module state (go.mod + go.sum + Go version). A second run is instant.
#
# Usage: test/scripts/build-tools.sh [--force] [TOOL...]
#   With no TOOL, builds every tool of every module. TOOL is a binary name such as
#   kubectl or deepcopy-gen. --force rebuilds even fresh tools.
#
# Each tool module under test/tools/<module> has:
#   tools_<module>    prints "BINARY GO-PACKAGE" lines, one per tool it provides;
#   ldflags_<module>  prints the -ldflags for its builds (version stamps).
# To add a module, write those two functions and append its name to MODULES.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODULES=(kube kwok olm operator-sdk kube-score vulncheck kube-router)

# tools_kube: Kubernetes control plane and kubectl, the real node's kubelet and
# kube-proxy, etcd, and deepcopy-gen for tmp/codegen.
tools_kube() {
  cat <<'EOF'
kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
kubelet k8s.io/kubernetes/cmd/kubelet
kube-proxy k8s.io/kubernetes/cmd/kube-proxy
kubectl k8s.io/kubernetes/cmd/kubectl
etcd go.etcd.io/etcd/server/v3
deepcopy-gen k8s.io/code-generator/cmd/deepcopy-gen
EOF
}

# ldflags_kube stamps the k8s.io/kubernetes version into component-base and client-go,
# as the Kubernetes release build does; unstamped binaries say v0.0.0-master and
# `kubectl version` rejects them.
ldflags_kube() {
  local version major minor date flags=(-s -w) pkg
  version="$(module_version kube k8s.io/kubernetes)"
  major="${version#v}" && major="${major%%.*}"
  minor="${version#v*.}" && minor="${minor%%.*}"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=("-X ${pkg}.gitVersion=${version}"
      "-X ${pkg}.gitMajor=${major}"
      "-X ${pkg}.gitMinor=${minor}"
      "-X ${pkg}.gitTreeState=clean"
      "-X ${pkg}.buildDate=${date}")
  done
  echo "${flags[*]}"
}

# tools_kwok: the KWOK controller and kwokctl, which runs the cluster.
tools_kwok() {
  cat <<'EOF'
kwok sigs.k8s.io/kwok/cmd/kwok
kwokctl sigs.k8s.io/kwok/cmd/kwokctl
EOF
}

# ldflags_kwok stamps kwok's own version (its default already matches the module).
ldflags_kwok() {
  local version
  version="$(module_version kwok sigs.k8s.io/kwok)"
  echo "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version#v}"
}

# tools_olm: the Operator Lifecycle Manager's olm operator, for the OLM e2e.
tools_olm() {
  echo "olm github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
}

# ldflags_olm stamps OLM's version, which olm logs at start.
ldflags_olm() {
  local version
  version="$(module_version olm github.com/operator-framework/operator-lifecycle-manager)"
  echo "-s -w -X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=${version#v}"
}

# tools_operator-sdk: operator-sdk v0.0.7's own command-line tool, for the guide's
# `operator-sdk generate k8s` and `operator-sdk build` (test/realnode's guide test).
tools_operator-sdk() {
  echo "operator-sdk github.com/operator-framework/operator-sdk/commands/operator-sdk"
}

# ldflags_operator-sdk strips the binary; the CLI's version (0.0.7) is a constant of its
# module, so `operator-sdk --version` reports the pinned release without a stamp.
ldflags_operator-sdk() {
  echo "-s -w"
}

# tools_kube-score: kube-score, the outside linter of test/e2e's TestKubeScore.
tools_kube-score() {
  echo "kube-score github.com/zegl/kube-score/cmd/kube-score"
}

# ldflags_kube-score stamps kube-score's version, which `kube-score version` prints.
ldflags_kube-score() {
  local version
  version="$(module_version kube-score github.com/zegl/kube-score)"
  echo "-s -w -X main.version=${version#v}"
}

# tools_vulncheck: govulncheck, which `make vulncheck` (test/scripts/vulncheck.sh) runs.
tools_vulncheck() {
  echo "govulncheck golang.org/x/vuln/cmd/govulncheck"
}

# ldflags_vulncheck strips the binary; govulncheck reports its own version (the pinned
# golang.org/x/vuln) from the build information, without a stamp.
ldflags_vulncheck() {
  echo "-s -w"
}

# tools_kube-router: kube-router, whose network policy firewall test/realnode runs on
# the real node (framework.KubeRouter) so that NetworkPolicies are enforced there.
# v2.1.0 has known security advisories: it is built for the tests only, never shipped.
tools_kube-router() {
  echo "kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
}

# ldflags_kube-router stamps kube-router's version, which `kube-router --version` prints.
ldflags_kube-router() {
  local version
  version="$(module_version kube-router github.com/cloudnativelabs/kube-router/v2)"
  echo "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${version}"
}

# module_dir prints the directory of a tool module.
module_dir() {
  echo "${ROOT}/test/tools/$1"
}

# module_version prints the version of dependency DEP in tool module MODULE.
module_version() {
  (cd "$(module_dir "$1")" && go list -m -f '{{.Version}}' "$2")
}

# cache_key identifies what a module's tools are built from.
cache_key() {
  local dir
  dir="$(module_dir "$1")"
  cat "${dir}/go.mod" "${dir}/go.sum" <(go env GOVERSION) | sha256sum | cut -d' ' -f1
}

# fresh succeeds when TOOL exists and was built with cache key KEY.
fresh() {
  local tool="$1" key="$2"
  [[ -x "${TOOLS_BIN}/${tool}" && -f "${TOOLS_DIR}/stamps/${tool}" ]] &&
    [[ "$(<"${TOOLS_DIR}/stamps/${tool}")" == "${key}" ]]
}

# go_bin_name prints the file name `go build -o DIR` gives package PKG: its last path
# element, skipping a major-version suffix such as /v3.
go_bin_name() {
  local pkg="$1" base
  base="${pkg##*/}"
  if [[ "${base}" =~ ^v[0-9]+$ ]]; then
    pkg="${pkg%/*}"
    base="${pkg##*/}"
  fi
  echo "${base}"
}

# build_module builds the requested, stale tools of MODULE in one `go build`, so they
# share compilation, then moves each into TOOLS_BIN and records its cache key.
build_module() {
  local module="$1" key tool pkg tmp
  local -a tools=() pkgs=()
  key="$(cache_key "${module}")"
  while read -r tool pkg; do
    wanted "${tool}" || continue
    if [[ "${FORCE}" != true ]] && fresh "${tool}" "${key}"; then
      continue
    fi
    tools+=("${tool}")
    pkgs+=("${pkg}")
  done < <("tools_${module}")
  ((${#tools[@]} > 0)) || return 0

  log "building ${tools[*]} from test/tools/${module} (the first, cold build takes minutes)"
  tmp="$(mktemp -d "${TOOLS_DIR}/build.XXXXXX")"
  BUILD_TMP="${tmp}"
  (cd "$(module_dir "${module}")" &&
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$("ldflags_${module}")" -o "${tmp}/" "${pkgs[@]}")
  local i
  for i in "${!tools[@]}"; do
    mv -f "${tmp}/$(go_bin_name "${pkgs[i]}")" "${TOOLS_BIN}/${tools[i]}"
    echo "${key}" >"${TOOLS_DIR}/stamps/${tools[i]}"
  done
  rm -rf "${tmp}"
}

# wanted succeeds when TOOL was requested (or no tool was named).
wanted() {
  ((${#REQUESTED[@]} == 0)) && return 0
  local t
  for t in "${REQUESTED[@]}"; do
    [[ "${t}" == "$1" ]] && return 0
  done
  return 1
}

main() {
  FORCE=false
  REQUESTED=()
  local arg
  for arg in "$@"; do
    case "${arg}" in
      --force) FORCE=true ;;
      -h | --help)
        sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
      -*) fatal "unknown flag ${arg}" ;;
      *) REQUESTED+=("${arg}") ;;
    esac
  done

  require_cmds go sha256sum flock
  local module tool known=()
  for module in "${MODULES[@]}"; do
    while read -r tool _; do known+=("${tool}"); done < <("tools_${module}")
  done
  for tool in "${REQUESTED[@]}"; do
    [[ " ${known[*]} " == *" ${tool} "* ]] || fatal "unknown tool '${tool}' (known: ${known[*]})"
  done

  mkdir -p "${TOOLS_BIN}" "${TOOLS_DIR}/stamps"
  BUILD_TMP=""
  trap 'rm -rf "${BUILD_TMP}"' EXIT
  # Serialize concurrent runs (make demo and make e2e at once): the second waits, then
  # finds everything fresh.
  exec 9>"${TOOLS_DIR}/.lock"
  flock 9
  for module in "${MODULES[@]}"; do
    build_module "${module}"
  done
}

main "$@"
