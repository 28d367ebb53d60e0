// Command monitoring-gen writes the PrometheusRule manifests of deploy/monitoring
// (operator-prometheusrule.yaml, all-prometheusrule.yaml) from its rules.yaml, the one
// source of the alerts, so that users install them with kubectl apply.
//
// Usage:
//
//	monitoring-gen --root /path/to/memcached-operator
//	monitoring-gen --root /path/to/memcached-operator --verify
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/example-inc/memcached-operator/test/monitoring"
)

func main() {
	root := flag.String("root", ".", "root of the repository whose deploy/monitoring is rendered")
	verify := flag.Bool("verify", false, "compare the committed manifests with the rendered ones instead of writing them")
	flag.Parse()
	if err := monitoring.GeneratePrometheusRules(filepath.Join(*root, "deploy", "monitoring"), *verify); err != nil {
		fmt.Fprintf(os.Stderr, "monitoring-gen: %v\n", err)
		os.Exit(1)
	}
}
