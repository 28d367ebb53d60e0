//go:build tools

// Package tools records the command that test/scripts/build-tools.sh builds from this
// module, so that `go mod tidy` keeps its requirements and go.sum locks them. The build
// constraint keeps it out of every normal build.
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
