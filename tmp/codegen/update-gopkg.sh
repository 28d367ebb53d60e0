#!/usr/bin/env bash
# Regenerates Gopkg.toml and Gopkg.lock, for dep users, from go.mod's build list with
# test/cmd/gopkg-gen. go.mod is the source of truth; never edit the Gopkg files by hand.
#
# Usage: tmp/codegen/update-gopkg.sh [--verify]
# --verify writes nothing and fails, with a diff, when the committed files are stale
# (the same check as `cd test && go test ./dep/`).
set -o errexit -o nounset -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if ! command -v go >/dev/null 2>&1; then
	echo "update-gopkg.sh: the go command is required" >&2
	exit 1
fi

cd "${repo_root}/test"
# CGO_ENABLED=0 and -trimpath are the Makefile's SHARED_ENV and SHARED_FLAGS: `make verify`
# then compiles nothing for this run that its go vet does not.
GOWORK=off CGO_ENABLED=0 go run -trimpath ./cmd/gopkg-gen --root "${repo_root}" "$@"
