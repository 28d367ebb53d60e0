#!/usr/bin/env bash
# Regenerates deploy/monitoring's PrometheusRule manifests (operator-prometheusrule.yaml,
# all-prometheusrule.yaml) from deploy/monitoring/rules.yaml with test/cmd/monitoring-gen.
# rules.yaml is the source of truth; never edit the manifests by hand.
#
# Usage: tmp/codegen/update-monitoring.sh [--verify]
# --verify writes nothing and fails when the committed manifests are stale (the same
# check as `cd test && go test ./monitoring/`).
set -o errexit -o nounset -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if ! command -v go >/dev/null 2>&1; then
	echo "update-monitoring.sh: the go command is required" >&2
	exit 1
fi

cd "${repo_root}/test"
# CGO_ENABLED=0 and -trimpath are the Makefile's SHARED_ENV and SHARED_FLAGS, as in
# update-gopkg.sh.
GOWORK=off CGO_ENABLED=0 go run -trimpath ./cmd/monitoring-gen --root "${repo_root}" "$@"
