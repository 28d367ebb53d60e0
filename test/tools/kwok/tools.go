//go:build tools

// Package tools records the commands that test/scripts/build-tools.sh builds from
// this module, so that `go mod tidy` keeps their requirements and go.sum locks them.
// The build constraint keeps it out of every normal build.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
