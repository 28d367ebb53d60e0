package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/sidecarpoll"
	"github.com/example-inc/memcached-operator/pkg/stub"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
)

// options are the operator's command-line settings.
type options struct {
	version        bool
	resync         time.Duration
	logFormat      string
	logLevel       string
	memcachedImage string
	// maxRolls is --max-concurrent-rolls, parsed by validate.
	maxRolls       string
	maxRollsParsed intstr.IntOrString
	// window is --maintenance-window, parsed by validate into windowParsed,
	// nil for none.
	window       string
	windowParsed *memcached.Window
	sidecarImage string
	// sidecarPoll is how often the sidecars are asked for their reports.
	sidecarPoll    time.Duration
	kubeAPIQPS     float64
	kubeAPIBurst   int
	kubeAPITimeout time.Duration
	metricsAddr    string
	workers        int
	childBatch     time.Duration
	progressEvery  time.Duration
	// serviceMonitorCheck is how long discovery's answer on ServiceMonitors and
	// PrometheusRules holds.
	serviceMonitorCheck time.Duration
	leaderElect         bool
	// identity is this candidate's name in the election: POD_NAME, set by
	// deploy/operator.yaml from the downward API; empty means the host name.
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	// cpuProfile and memProfile are files for pprof profiles of the whole
	// run, written when the operator shuts down (see profile.go).
	cpuProfile string
	memProfile string
	// imagePrefixes and priorityClasses are the comma-separated lists of
	// the policy flags; validate parses them into policy.
	imagePrefixes   string
	priorityClasses string
	policy          memcached.Policy
	// namespaceSelector is --namespace-selector; validate parses it into
	// namespaces, nil when it is empty.
	namespaceSelector string
	namespaces        labels.Selector
	// monitoringNamespaces is --monitoring-namespace-selector; validate
	// parses it into monitoringSelector, nil when it is empty.
	monitoringNamespaces string
	monitoringSelector   *metav1.LabelSelector
}

// defaultMonitoringNamespaces is --monitoring-namespace-selector's default:
// the namespace named monitoring, where kube-prometheus and
// kube-prometheus-stack's guides put Prometheus.
const defaultMonitoringNamespaces = memcached.NamespaceNameLabel + "=monitoring"

// parseOptions parses args (without the program name). Defaults come from
// the environment where an environment variable is documented.
func parseOptions(args []string, getenv func(string) string, output io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("memcached-operator", flag.ContinueOnError)
	fs.SetOutput(output)
	image := getenv("MEMCACHED_IMAGE")
	if image == "" {
		image = stub.DefaultImage
	}
	fs.BoolVar(&o.version, "version", false, "Print the operator, SDK and Go versions and exit.")
	fs.DurationVar(&o.resync, "resync", 5*time.Minute, "How often every Memcached is reconciled even without changes, as a Go duration (0 disables; at least 1s otherwise).")
	fs.StringVar(&o.logFormat, "log-format", "text", "Log format: text or json.")
	fs.StringVar(&o.logLevel, "log-level", "info", "Log level: panic, fatal, error, warning, info, debug or trace.")
	fs.StringVar(&o.memcachedImage, "memcached-image", image, "Image of the memcached containers of every Memcached without spec.image (env MEMCACHED_IMAGE). A change, like an operator upgrade that changes the pod template, rolls all of them, one pod at a time each and at most --max-concurrent-rolls resources at once.")
	maxRolls := getenv("MAX_CONCURRENT_ROLLS")
	if maxRolls == "" {
		maxRolls = stub.DefaultMaxConcurrentRolls
	}
	fs.StringVar(&o.maxRolls, "max-concurrent-rolls", maxRolls, "How many Memcacheds at most roll at once because the operator's pod template changed (a new --memcached-image or operator version): a number, at least 1, or a percentage of all Memcacheds, rounded up. The next starts once one of them has only Ready pods of the new template. Rolls that a resource's own spec change asks for, and new resources, never wait (env MAX_CONCURRENT_ROLLS, which an OLM Subscription's spec.config.env can set).")
	fs.StringVar(&o.window, "maintenance-window", getenv("MAINTENANCE_WINDOW"), "Maintenance window of every Memcached without spec.maintenanceWindow, as a weekday, a start time in UTC and a duration from 1h to 24h, such as \"Sunday 03:00 2h\": the rolls that the operator's own changes cause (a new --memcached-image or --sidecar-image, or an operator version that changes the pod template) start only inside it, paced by --max-concurrent-rolls, and finish even after it closes. Empty means no window: they start at once. Spec changes never wait (env MAINTENANCE_WINDOW).")
	sidecar := getenv("SIDECAR_IMAGE")
	if sidecar == "" {
		sidecar = memcached.DefaultSidecarImage
	}
	fs.StringVar(&o.sidecarImage, "sidecar-image", sidecar, "Image of the sidecar that refreshes certificates, reloads passwords and serves metrics in the pods of Memcacheds with spec.tls, spec.auth or spec.monitoring (env SIDECAR_IMAGE). A change rolls those pods like a change of --memcached-image, paced by --max-concurrent-rolls.")
	fs.DurationVar(&o.sidecarPoll, "sidecar-poll-interval", sidecarpoll.DefaultInterval, "How often the leader asks the sidecar of every pod that runs one, at http://<pod IP>:9150/status, what it could not make memcached do (a certificate refresh, a password reload), for the Memcached's Degraded condition (0 asks never; at least 1s otherwise).")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "Sustained requests per second to the API server from the reconcile.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "Burst of requests to the API server from the reconcile.")
	fs.DurationVar(&o.kubeAPITimeout, "kube-api-timeout", 15*time.Second, "How long one request of the reconcile (a write, a read, discovery, an Event) may take; one the API server or the network leaves unanswered then fails and the Memcached is retried, instead of holding a worker. Watches are not limited.")
	fs.IntVar(&o.workers, "workers", 4, "How many Memcached resources are reconciled at once; one resource is never reconciled by two workers.")
	fs.DurationVar(&o.childBatch, "child-updates-batch-period", 500*time.Millisecond, "How long a reconcile that a change of a Memcached's Deployment or pods asks for waits, so that the burst of pod changes as pods start costs one status write; status.nodes lags that much (0 disables).")
	fs.DurationVar(&o.progressEvery, "progress-status-interval", 5*time.Second, "How often, at most, the status of a Memcached whose pods are still starting, scaling or rolling is written; a new Memcached's first status waits this long after its Deployment's creation unless its pods are all Ready first. The start of a roll, the end of the progress, failures and spec changes are written at once (0 writes every change).")
	fs.DurationVar(&o.serviceMonitorCheck, "servicemonitor-check-interval", kube.DefaultServiceMonitorCheckInterval, "How long the answer of discovery on whether ServiceMonitors and PrometheusRules are served holds, while a Memcached has spec.monitoring: a CRD installed later is noticed by the first reconcile after that (at least 1s).")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "Address (host:port) of the HTTP server for /metrics, /healthz and /readyz, such as :8080; empty serves none. deploy/operator.yaml sets :8080.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Run as one of several replicas: only the holder of the Lease memcached-operator in the operator's own namespace, POD_NAMESPACE, reconciles, the others stand by to take over. Out of a cluster POD_NAMESPACE may be left unset while WATCH_NAMESPACE names a single namespace, which then holds the Lease. Off for a single local process; deploy/operator.yaml turns it on.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 12*time.Second, "How long a standby waits, after it last saw the leader renew the Lease, before it takes over.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 8*time.Second, "How long the leader tries to renew the Lease before it gives up leading, stops its workers and stands by; shorter than the lease duration by at least a quarter of the retry period plus 1s, the time the leader is given to stop.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", time.Second, "How often the leader renews the Lease and standbys try to take it.")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "Write a pprof CPU profile of the whole run to this file when the operator stops; empty writes none. For measuring, as `make bench` does.")
	fs.StringVar(&o.memProfile, "memprofile", "", "Write a pprof heap profile to this file when the operator stops; empty writes none.")
	fs.StringVar(&o.imagePrefixes, "allowed-image-prefixes", getenv("ALLOWED_IMAGE_PREFIXES"), "Policy: comma-separated prefixes one of which spec.image must start with, each ending in '/', ':' or '@', such as registry.example.com/cache/; empty allows any image. A Memcached without spec.image runs --memcached-image, which is always allowed (env ALLOWED_IMAGE_PREFIXES).")
	fs.StringVar(&o.priorityClasses, "allowed-priority-classes", getenv("ALLOWED_PRIORITY_CLASSES"), "Policy: comma-separated priority classes that spec.priorityClassName may name; empty allows any. A Memcached without one is always allowed (env ALLOWED_PRIORITY_CLASSES).")
	forbidKeyless, err := envBool(getenv, "FORBID_KEYLESS_TOLERATIONS")
	if err != nil {
		return nil, err
	}
	fs.BoolVar(&o.policy.ForbidKeylessTolerations, "forbid-keyless-tolerations", forbidKeyless, "Policy: refuse tolerations with no key and operator Exists, which tolerate every taint, including those of control-plane and dedicated nodes (env FORBID_KEYLESS_TOLERATIONS).")
	fs.StringVar(&o.namespaceSelector, "namespace-selector", getenv("NAMESPACE_SELECTOR"), "Serve only the Memcacheds of namespaces whose labels match this label selector, such as memcached.example.com/tenant=true or 'tier in (gold,silver)'; empty serves every watched namespace. Only with WATCH_NAMESPACE=\"\" (every namespace): a list names its namespaces already. A Memcached elsewhere is left alone, with no children and no status (env NAMESPACE_SELECTOR).")
	monitoring := getenv("MONITORING_NAMESPACE_SELECTOR")
	if monitoring == "" {
		monitoring = defaultMonitoringNamespaces
	}
	fs.StringVar(&o.monitoringNamespaces, "monitoring-namespace-selector", monitoring, "Label selector of the namespaces whose pods the NetworkPolicy of a Memcached with spec.networkPolicy admits to its metrics port (9150) when its spec.networkPolicy.monitoringFrom is empty, such as kubernetes.io/metadata.name=monitoring, the default; \"none\" admits none of them. Only equality and set-based terms that a NetworkPolicy's namespaceSelector can hold. A change reaches every such policy at its Memcached's next reconcile and rolls no pod (env MONITORING_NAMESPACE_SELECTOR).")
	o.identity = getenv("POD_NAME")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, o.validate()
}

// validate rejects settings that would make the operator misbehave quietly.
func (o *options) validate() error {
	if o.resync < 0 || (o.resync > 0 && o.resync < time.Second) {
		return fmt.Errorf("--resync=%v must be 0 or at least 1s (a bare number is not seconds: write 5s, not 5)", o.resync)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("--log-format=%q must be text or json", o.logFormat)
	}
	if _, err := logrus.ParseLevel(o.logLevel); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	if o.memcachedImage == "" {
		return fmt.Errorf("--memcached-image must not be empty")
	}
	rolls, err := stub.ParseMaxConcurrentRolls(o.maxRolls)
	if err != nil {
		return fmt.Errorf("--max-concurrent-rolls=%v", err)
	}
	o.maxRollsParsed = rolls
	if o.window != "" {
		w, err := memcached.ParseWindow(o.window)
		if err != nil {
			return fmt.Errorf("--maintenance-window=%v", err)
		}
		o.windowParsed = &w
	}
	if o.sidecarImage == "" {
		return fmt.Errorf("--sidecar-image must not be empty")
	}
	if o.sidecarPoll < 0 || (o.sidecarPoll > 0 && o.sidecarPoll < time.Second) {
		return fmt.Errorf("--sidecar-poll-interval=%v must be 0 or at least 1s", o.sidecarPoll)
	}
	if o.childBatch < 0 {
		return fmt.Errorf("--child-updates-batch-period=%v must not be negative", o.childBatch)
	}
	if o.progressEvery < 0 {
		return fmt.Errorf("--progress-status-interval=%v must not be negative", o.progressEvery)
	}
	if o.workers < 1 {
		return fmt.Errorf("--workers=%d must be at least 1", o.workers)
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.serviceMonitorCheck < time.Second {
		return fmt.Errorf("--servicemonitor-check-interval=%v must be at least 1s", o.serviceMonitorCheck)
	}
	if o.kubeAPITimeout < time.Second {
		return fmt.Errorf("--kube-api-timeout=%v must be at least 1s: every request needs a timeout, and one that short would fail requests the API server is still answering", o.kubeAPITimeout)
	}
	if err := o.parsePolicy(); err != nil {
		return err
	}
	if o.namespaceSelector != "" {
		sel, err := labels.Parse(o.namespaceSelector)
		if err != nil {
			return fmt.Errorf("--namespace-selector=%q: %v", o.namespaceSelector, err)
		}
		o.namespaces = sel
	}
	if o.monitoringNamespaces != noMonitoringNamespaces {
		sel, err := metav1.ParseToLabelSelector(o.monitoringNamespaces)
		if err != nil {
			return fmt.Errorf("--monitoring-namespace-selector=%q: %v", o.monitoringNamespaces, err)
		}
		if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
			return fmt.Errorf("--monitoring-namespace-selector=%q selects every namespace: name the monitoring namespaces, or write %q for none", o.monitoringNamespaces, noMonitoringNamespaces)
		}
		// The parser's empty map or list stands for none, which nil says.
		if len(sel.MatchLabels) == 0 {
			sel.MatchLabels = nil
		}
		if len(sel.MatchExpressions) == 0 {
			sel.MatchExpressions = nil
		}
		o.monitoringSelector = sel
	}
	if o.leaderElect {
		return o.validateElection()
	}
	return nil
}

// noMonitoringNamespaces is the --monitoring-namespace-selector that admits
// no namespace by default: an empty selector would select every one.
const noMonitoringNamespaces = "none"

// parsePolicy fills o.policy's lists from the policy flags. An image
// prefix must end where a part of an image reference ends: a bare
// "registry.example.com" would also allow
// "registry.example.com.attacker.example/miner".
func (o *options) parsePolicy() error {
	o.policy.ImagePrefixes = splitList(o.imagePrefixes)
	for _, p := range o.policy.ImagePrefixes {
		if !strings.HasSuffix(p, "/") && !strings.HasSuffix(p, ":") && !strings.HasSuffix(p, "@") {
			return fmt.Errorf("--allowed-image-prefixes: %q must end in '/', ':' or '@', or it allows any image whose name merely begins the same way", p)
		}
	}
	o.policy.PriorityClasses = splitList(o.priorityClasses)
	for _, c := range o.policy.PriorityClasses {
		if errs := validation.IsDNS1123Subdomain(c); len(errs) > 0 {
			return fmt.Errorf("--allowed-priority-classes: %q is not the name of a PriorityClass: %s", c, strings.Join(errs, "; "))
		}
	}
	return nil
}

// splitList returns the comma-separated items of s, without blanks around
// them; none for an empty s.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// envBool returns the boolean in the environment variable key, false when it
// is empty.
func envBool(getenv func(string) string, key string) (bool, error) {
	v := getenv(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean", key, v)
	}
	return b, nil
}

// validateElection checks the leader election timings as client-go does,
// with the flags' names in the messages, plus the whole second that the
// Lease's leaseDurationSeconds can hold, and the margin that pkg/leader's
// guarantee of one leader at a time needs (see leader.Elector.Run).
func (o *options) validateElection() error {
	switch {
	case o.leaseDuration < time.Second:
		return fmt.Errorf("--leader-elect-lease-duration=%v must be at least 1s", o.leaseDuration)
	case o.renewDeadline >= o.leaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline=%v must be shorter than --leader-elect-lease-duration=%v, or a leader could still act after a standby took over", o.renewDeadline, o.leaseDuration)
	case o.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period=%v must be positive", o.retryPeriod)
	case float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline=%v must be longer than %v times --leader-elect-retry-period=%v", o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod)
	case o.leaseDuration-o.renewDeadline-o.retryPeriod/4 < leaderStopTime:
		return fmt.Errorf("--leader-elect-lease-duration=%v must exceed --leader-elect-renew-deadline=%v by at least %v: a quarter of --leader-elect-retry-period=%v, for the leader to notice its deadline passed, plus %v for it to stop; otherwise a leader cut off from the API server could still be writing when a standby takes over",
			o.leaseDuration, o.renewDeadline, o.retryPeriod/4+leaderStopTime, o.retryPeriod, leaderStopTime)
	}
	return nil
}

// configureLogging applies the log settings to logrus's standard logger,
// which the SDK logs through too.
func (o *options) configureLogging() {
	level, _ := logrus.ParseLevel(o.logLevel) // validate has checked it
	logrus.SetLevel(level)
	logrus.SetOutput(os.Stderr)
	if o.logFormat == "json" {
		logrus.SetFormatter(&logrus.JSONFormatter{})
	} else {
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
}
