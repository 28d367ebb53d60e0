#!/usr/bin/env bash
# render-operator.sh prints deploy/operator.yaml with the memcached-operator
# container's image set to IMAGE, so nobody hand-edits the manifest.
#
# Usage: tmp/build/render-operator.sh IMAGE [MANIFEST]   (MANIFEST defaults to deploy/operator.yaml)
#
# Only the `image:` of the container named memcached-operator changes; the
# script fails unless exactly one such line was replaced.
set -o errexit -o nounset -o pipefail

die() {
	echo "render-operator.sh: $*" >&2
	exit 1
}

[[ $# -eq 1 || $# -eq 2 ]] || { echo "usage: $0 IMAGE [MANIFEST]" >&2; exit 2; }
image="$1"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
manifest="${2:-${repo_root}/deploy/operator.yaml}"

# Image references are [registry[:port]/]path[:tag][@digest]; anything else
# (spaces, quotes, YAML syntax) would corrupt the manifest.
[[ "${image}" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] || die "invalid image reference: '${image}'"
[[ -r "${manifest}" ]] || die "cannot read ${manifest}"

rendered="$(
	awk -v image="${image}" -v container="memcached-operator" '
	function indent(s) { match(s, /^ */); return RLENGTH }
	{
		line = $0
		if (line ~ ("^ *- name: *\"?" container "\"? *$")) {
			# A list item that names our container: its keys sit two columns
			# to the right of the dash.
			in_item = 1
			key_indent = indent(line) + 2
		} else if (in_item && line !~ /^ *(#.*)?$/ && indent(line) < key_indent) {
			in_item = 0
		} else if (in_item && indent(line) == key_indent && line ~ /^ *image:/) {
			line = substr(line, 1, key_indent) "image: " image
			replaced++
		}
		print line
	}
	END { if (replaced != 1) exit 3 }
	' "${manifest}"
)" || die "expected exactly one image of container memcached-operator in ${manifest}"

printf '%s\n' "${rendered}"
