// Package monitoring holds what users install beside the operator to watch their
// caches: rules.yaml, the alerting rules, dashboards/ for Grafana and consoles/ for
// Prometheus's own console pages, and for a Prometheus Operator the operator's
// PodMonitor and the PrometheusRules that test/cmd/monitoring-gen generates from
// rules.yaml (make generate). It is a Go package only so that the operator can
// embed rules.yaml, which stays the one source of the alerts: the PrometheusRule the
// operator creates for a Memcached carries its memcached group, scoped to that
// Memcached's pods (see memcached.NewPrometheusRule).
package monitoring

import _ "embed"

// Rules is rules.yaml, a Prometheus rule file.
//
//go:embed rules.yaml
var Rules []byte
