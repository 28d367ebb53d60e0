package sidecar

import (
	_ "embed" // for Version
	"strings"
)

// versionFile is pkg/sidecar/VERSION, the one place that names the sidecar's
// release: the Makefile, tmp/build/build.sh, test/scripts/images.sh and the
// CSVs read it too.
//
//go:embed VERSION
var versionFile string

// Version is the sidecar's own release, which tags its image
// (quay.io/example/memcached-sidecar:v<Version>) and which the operator's
// default --sidecar-image names. It is not the operator's release: an
// operator release that leaves the sidecar's code alone keeps this version,
// so the pods' template keeps its image and an upgrade restarts none of
// them. It changes only with the sidecar's sources; test/dep's
// TestSidecarVersionFollowsItsSources fails when they change without it.
var Version = strings.TrimSpace(versionFile)
