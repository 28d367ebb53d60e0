package sidecar

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// statMetric is how one line of memcached's stats becomes a metric.
type statMetric struct {
	stat string
	kind prometheus.ValueType
	desc *prometheus.Desc
}

// statMetrics are the stats the sidecar exports: what tells whether a
// cache is up, how full it is and how well it serves.
var statMetrics = []statMetric{
	{"uptime", prometheus.GaugeValue, prometheus.NewDesc("memcached_uptime_seconds", "Seconds since memcached started.", nil, nil)},
	{"curr_connections", prometheus.GaugeValue, prometheus.NewDesc("memcached_current_connections", "Open client connections.", nil, nil)},
	{"total_connections", prometheus.CounterValue, prometheus.NewDesc("memcached_connections_total", "Client connections opened since memcached started.", nil, nil)},
	{"get_hits", prometheus.CounterValue, prometheus.NewDesc("memcached_get_hits_total", "Gets that found their key.", nil, nil)},
	{"get_misses", prometheus.CounterValue, prometheus.NewDesc("memcached_get_misses_total", "Gets that did not find their key.", nil, nil)},
	{"evictions", prometheus.CounterValue, prometheus.NewDesc("memcached_items_evicted_total", "Items removed before they expired to make room for new ones.", nil, nil)},
	{"bytes", prometheus.GaugeValue, prometheus.NewDesc("memcached_current_bytes", "Bytes the items take.", nil, nil)},
	{"limit_maxbytes", prometheus.GaugeValue, prometheus.NewDesc("memcached_limit_bytes", "Bytes memcached may use for items, its -m.", nil, nil)},
	{"curr_items", prometheus.GaugeValue, prometheus.NewDesc("memcached_current_items", "Items in the cache.", nil, nil)},
	{"listen_disabled_num", prometheus.CounterValue, prometheus.NewDesc("memcached_connections_listener_disabled_total", "Times memcached stopped accepting connections because it reached its connection limit.", nil, nil)},
}

var (
	upDesc      = prometheus.NewDesc("memcached_up", "Whether the last stats command to memcached succeeded.", nil, nil)
	versionDesc = prometheus.NewDesc("memcached_version", "The version of memcached, in the label version.", []string{"version"}, nil)
)

// StatsCollector reads memcached's stats on every scrape, so that a scrape
// shows memcached as it is, never a cached copy.
type StatsCollector struct {
	// Dialer reaches memcached, with TLS and login when it needs them.
	Dialer Dialer
	// Log receives why a scrape found memcached down.
	Log logrus.FieldLogger
}

// Describe implements prometheus.Collector.
func (s *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- versionDesc
	for _, m := range statMetrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: memcached_up and, when memcached
// answered, its stats.
func (s *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	stats, err := s.stats()
	if err != nil {
		s.Log.Errorf("failed to read memcached's stats: %v", err)
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	for _, m := range parseStats(stats) {
		ch <- m
	}
}

func (s *StatsCollector) stats() (map[string]string, error) {
	c, err := s.Dialer.Dial(context.Background())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Stats()
}

// parseStats turns stats into metrics, skipping any that are missing or
// not numbers, which memcached versions may differ in.
func parseStats(stats map[string]string) []prometheus.Metric {
	var out []prometheus.Metric
	if v, ok := stats["version"]; ok {
		out = append(out, prometheus.MustNewConstMetric(versionDesc, prometheus.GaugeValue, 1, v))
	}
	for _, m := range statMetrics {
		v, err := strconv.ParseFloat(stats[m.stat], 64)
		if err != nil {
			continue
		}
		out = append(out, prometheus.MustNewConstMetric(m.desc, m.kind, v))
	}
	return out
}
