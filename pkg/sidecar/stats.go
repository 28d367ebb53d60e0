package sidecar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// statMetric is how one line of memcached's stats becomes a metric: the
// value of stat, with labels when desc has them.
type statMetric struct {
	stat   string
	kind   prometheus.ValueType
	desc   *prometheus.Desc
	labels []string
}

// The metrics of memcached's stats take the names and labels of
// prometheus/memcached_exporter wherever it exports the stat, so that the
// dashboards and alerts written for it work on the sidecar unchanged;
// pkg/sidecar/METRICS.md lists each with its stat. The exporter types
// uptime a counter; here it stays a gauge, as counters without _total fail
// promtool check metrics and a query of the name cannot tell.
var (
	upDesc       = prometheus.NewDesc("memcached_up", "Whether the sidecar's last stats command to memcached got a reply: 1 yes, 0 no.", nil, nil)
	versionDesc  = prometheus.NewDesc("memcached_version", "Always 1; the label version is the version memcached reports.", []string{"version"}, nil)
	commandsDesc = prometheus.NewDesc("memcached_commands_total", "Commands memcached served since it started, by command and by status (hit, miss, badval).", []string{"command", "status"}, nil)
)

// statMetrics are the stats of memcached's stats command that the sidecar
// exports: every one of 1.6's general stats that memcached_exporter
// exports, and those alerts need that it does not (the unfetched items and
// TLS handshake errors), under names of the same form. A stat memcached
// does not print, such as ssl_handshake_errors without TLS, is left out.
var statMetrics = append(commandMetrics(),
	gauge("uptime", "memcached_uptime_seconds", "Seconds since memcached started."),
	gauge("time", "memcached_time_seconds", "The Unix time on memcached's clock."),
	counter("rusage_user", "memcached_process_user_cpu_seconds_total", "CPU seconds memcached's process spent in user mode."),
	counter("rusage_system", "memcached_process_system_cpu_seconds_total", "CPU seconds memcached's process spent in the kernel."),
	gauge("max_connections", "memcached_max_connections", "How many client connections memcached takes at most, its -c."),
	gauge("curr_connections", "memcached_current_connections", "Client connections open now, the sidecar's own included."),
	counter("total_connections", "memcached_connections_total", "Client connections memcached accepted since it started."),
	counter("rejected_connections", "memcached_connections_rejected_total", "Connections memcached closed at once because it had max_connections open already."),
	counter("conn_yields", "memcached_connections_yielded_total", "Times a connection gave up its worker thread after the requests one event may serve, memcached's -R."),
	counter("listen_disabled_num", "memcached_connections_listener_disabled_total", "Times memcached stopped accepting connections because it reached its connection limit."),
	gauge("accepting_conns", "memcached_accepting_conns", "Whether memcached accepts new connections now: 1 yes, 0 no."),
	counter("bytes_read", "memcached_read_bytes_total", "Bytes memcached read from its clients."),
	counter("bytes_written", "memcached_written_bytes_total", "Bytes memcached sent to its clients."),
	gauge("bytes", "memcached_current_bytes", "Bytes the items take now."),
	gauge("limit_maxbytes", "memcached_limit_bytes", "Bytes memcached may use for items, its -m."),
	gauge("curr_items", "memcached_current_items", "Items in the cache now."),
	counter("total_items", "memcached_items_total", "Items stored since memcached started."),
	counter("evictions", "memcached_items_evicted_total", "Items removed before they expired to make room for new ones."),
	counter("reclaimed", "memcached_items_reclaimed_total", "Items stored in the memory of an item that had expired."),
	counter("store_too_large", "memcached_item_too_large_total", "Stores refused because the item was larger than the largest memcached takes, its -I."),
	counter("store_no_memory", "memcached_item_no_memory_total", "Stores refused because memcached found no memory for the item."),
	counter("direct_reclaims", "memcached_direct_reclaims_total", "Times a worker thread had to free memory itself to store an item."),
	counter("lru_crawler_starts", "memcached_lru_crawler_starts_total", "Runs of the LRU crawler."),
	counter("crawler_items_checked", "memcached_lru_crawler_items_checked_total", "Items the LRU crawler looked at."),
	counter("crawler_reclaimed", "memcached_lru_crawler_reclaimed_total", "Expired items the LRU crawler freed."),
	counter("moves_to_cold", "memcached_lru_crawler_moves_to_cold_total", "Items moved from the HOT or WARM LRU to the COLD one."),
	counter("moves_to_warm", "memcached_lru_crawler_moves_to_warm_total", "Items moved from the COLD LRU to the WARM one."),
	counter("moves_within_lru", "memcached_lru_crawler_moves_within_lru_total", "Items moved up within the HOT or WARM LRU."),
	// Not exported by memcached_exporter, which has these per slab only.
	counter("evicted_unfetched", "memcached_items_evicted_unfetched_total", "Evicted items that no command had read since they were stored."),
	counter("expired_unfetched", "memcached_items_expired_unfetched_total", "Expired items that no command had read since they were stored."),
	// Not exported by memcached_exporter; memcached prints it only with TLS.
	counter("ssl_handshake_errors", "memcached_tls_handshake_errors_total", "TLS handshakes memcached failed, as with a plaintext client or one without a required client certificate."),
)

// commandMetrics are memcached_commands_total's series that one stat each
// gives, as memcached_exporter labels them; set's comes from several (see
// setCommand).
func commandMetrics() []statMetric {
	var out []statMetric
	for _, cmd := range []string{"get", "delete", "incr", "decr", "cas", "touch"} {
		out = append(out,
			statMetric{cmd + "_hits", prometheus.CounterValue, commandsDesc, []string{cmd, "hit"}},
			statMetric{cmd + "_misses", prometheus.CounterValue, commandsDesc, []string{cmd, "miss"}})
	}
	return append(out,
		statMetric{"cas_badval", prometheus.CounterValue, commandsDesc, []string{"cas", "badval"}},
		statMetric{"cmd_flush", prometheus.CounterValue, commandsDesc, []string{"flush", "hit"}})
}

func gauge(stat, name, help string) statMetric {
	return statMetric{stat, prometheus.GaugeValue, prometheus.NewDesc(name, help, nil, nil), nil}
}

func counter(stat, name, help string) statMetric {
	return statMetric{stat, prometheus.CounterValue, prometheus.NewDesc(name, help, nil, nil), nil}
}

// casStats are the stats that memcached counts in cmd_set too.
var casStats = []string{"cas_hits", "cas_misses", "cas_badval"}

// The reasons of memcached_sidecar_stats_lines_skipped_total.
const (
	// skippedMalformed: a line of the reply that is not "STAT name value".
	skippedMalformed = "malformed"
	// skippedNotANumber: a stat the sidecar exports whose value is not a
	// number.
	skippedNotANumber = "not_a_number"
)

// StatsCollector reads memcached's stats on every scrape, so that a scrape
// shows memcached as it is, never a cached copy.
//
// It keeps one connection for its scrapes, so that the scraper is one of
// memcached_current_connections rather than one more of
// memcached_connections_total at every scrape. A scrape whose reused
// connection fails, as after memcached restarted, tries once more on a new
// one, so that memcached_up says whether memcached answers now; one that
// timed out does not, since a second wait would outlast the scrape's. With
// auth, a connection stays logged in after memcached drops its user (it
// checks a password only at the login), so the collector dials anew when
// its Credentials give another credential: memcached_up then says whether
// the credential memcached loaded last logs in, as a new client's would.
type StatsCollector struct {
	// Dialer reaches memcached, with TLS and login when it needs them.
	Dialer Dialer
	// Log receives why a scrape found memcached down.
	Log logrus.FieldLogger

	skipped *prometheus.CounterVec

	mu   sync.Mutex
	conn *Conn
}

// NewStatsCollector returns a StatsCollector of the memcached d reaches.
func NewStatsCollector(d Dialer, log logrus.FieldLogger) *StatsCollector {
	s := &StatsCollector{
		Dialer: d,
		Log:    log,
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_sidecar_stats_lines_skipped_total",
			Help: "Lines of memcached's stats replies that the sidecar skipped, by reason: malformed, not STAT with a name and a value; not_a_number, the value of a stat it exports.",
		}, []string{"reason"}),
	}
	s.skipped.WithLabelValues(skippedMalformed)
	s.skipped.WithLabelValues(skippedNotANumber)
	return s
}

// Describe implements prometheus.Collector.
func (s *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- versionDesc
	seen := map[*prometheus.Desc]bool{}
	for _, m := range statMetrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
	s.skipped.Describe(ch)
}

// Collect implements prometheus.Collector: memcached_up and, when memcached
// answered, its stats.
func (s *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.skipped.Collect(ch)
	reply, err := s.stats(context.Background())
	if err != nil {
		s.Log.Errorf("failed to read memcached's stats: %v", err)
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	s.skipped.WithLabelValues(skippedMalformed).Add(float64(len(reply.Malformed)))
	metrics, notNumbers := parseStats(reply.Values)
	s.skipped.WithLabelValues(skippedNotANumber).Add(float64(notNumbers))
	for _, m := range metrics {
		ch <- m
	}
}

// stats returns the reply to stats on the collector's connection, which it
// dials when it has none or its credential changed (see StatsCollector).
func (s *StatsCollector) stats(ctx context.Context) (StatsReply, error) {
	if s.conn != nil && !s.loggedInAsNow() {
		s.closeConn()
	}
	if s.conn != nil {
		reply, err := s.conn.Stats()
		if err == nil {
			return reply, nil
		}
		s.closeConn()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return reply, err
		}
	}
	c, err := s.Dialer.Dial(ctx)
	if err != nil {
		return StatsReply{}, err
	}
	reply, err := c.Stats()
	if err != nil {
		c.Close()
		return reply, err
	}
	s.conn = c
	return reply, nil
}

// loggedInAsNow reports whether the collector's connection logged in with
// the credential its Dialer would log in with now.
func (s *StatsCollector) loggedInAsNow() bool {
	if s.Dialer.Credentials == nil {
		return true
	}
	cred, err := s.Dialer.Credentials.Credential()
	return err == nil && cred == s.conn.login
}

func (s *StatsCollector) closeConn() {
	s.conn.Close()
	s.conn = nil
}

// parseStats turns stats into metrics, skipping those that memcached did
// not print, which versions and settings differ in, and counting those of
// an exported stat that are not numbers.
func parseStats(stats map[string]string) (metrics []prometheus.Metric, notNumbers int) {
	if v, ok := stats["version"]; ok {
		metrics = append(metrics, prometheus.MustNewConstMetric(versionDesc, prometheus.GaugeValue, 1, v))
	}
	number := func(stat string) (float64, bool) {
		s, ok := stats[stat]
		if !ok {
			return 0, false
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			notNumbers++
			return 0, false
		}
		return v, true
	}
	for _, m := range statMetrics {
		if v, ok := number(m.stat); ok {
			metrics = append(metrics, prometheus.MustNewConstMetric(m.desc, m.kind, v, m.labels...))
		}
	}
	if v, ok := setCommands(stats); ok {
		metrics = append(metrics, prometheus.MustNewConstMetric(commandsDesc, prometheus.CounterValue, v, "set", "hit"))
	}
	return metrics, notNumbers
}

// setCommands returns the sets that were not cas: memcached counts cas
// commands in cmd_set too, and memcached_exporter's set series leaves them
// out, so that the command series add up to the commands.
func setCommands(stats map[string]string) (float64, bool) {
	sets, err := strconv.ParseFloat(stats["cmd_set"], 64)
	if err != nil {
		return 0, false
	}
	for _, stat := range casStats {
		v, err := strconv.ParseFloat(stats[stat], 64)
		if err != nil {
			return 0, false
		}
		sets -= v
	}
	return sets, true
}

// StatsReply is memcached's reply to stats.
type StatsReply struct {
	// Values are the stats by name.
	Values map[string]string
	// Malformed are the lines that were not "STAT name value", which
	// readStats skipped.
	Malformed []string
}

// readStats reads a reply to stats up to its END. A line that is not
// "STAT name value" is kept in Malformed and skipped, so that one odd line,
// as a later memcached may print, costs one stat, not the scrape; an error
// reply, such as CLIENT_ERROR unauthenticated, ends the reply and is an
// error.
func readStats(r *bufio.Reader) (StatsReply, error) {
	reply := StatsReply{Values: map[string]string{}}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return reply, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return reply, nil
		}
		if isErrorReply(line) {
			return reply, fmt.Errorf("memcached replied to stats: %s", line)
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "STAT" {
			reply.Malformed = append(reply.Malformed, line)
			continue
		}
		reply.Values[fields[1]] = fields[2]
	}
}

// isErrorReply reports whether line is one of the error replies of
// memcached's ASCII protocol, each the whole reply to its command.
func isErrorReply(line string) bool {
	for _, prefix := range []string{"ERROR", "CLIENT_ERROR", "SERVER_ERROR"} {
		if line == prefix || strings.HasPrefix(line, prefix+" ") {
			return true
		}
	}
	return false
}
