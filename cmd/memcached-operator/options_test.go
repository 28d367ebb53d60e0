package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/stub"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*options) bool
		wantErr string
	}{
		{
			name: "defaults",
			check: func(o *options) bool {
				return o.resync == 5*time.Minute && o.logFormat == "text" && o.logLevel == "info" &&
					o.memcachedImage == stub.DefaultImage && o.kubeAPIQPS == 50 && o.kubeAPIBurst == 100 &&
					o.metricsAddr == "" && !o.leaderElect && o.identity == "" &&
					o.leaseDuration == 12*time.Second && o.renewDeadline == 8*time.Second && o.retryPeriod == time.Second &&
					o.progressEvery == 5*time.Second && o.maxRollsParsed == intstr.FromString("10%") && o.kubeAPITimeout == 15*time.Second &&
					o.policy.ImagePrefixes == nil && o.policy.PriorityClasses == nil && !o.policy.ForbidKeylessTolerations
			},
		},
		{name: "resync as a duration", args: []string{"--resync=30s"}, check: func(o *options) bool { return o.resync == 30*time.Second }},
		{name: "resync disabled", args: []string{"--resync=0"}, check: func(o *options) bool { return o.resync == 0 }},
		{name: "resync of 5ns is refused", args: []string{"--resync=5ns"}, wantErr: "must be 0 or at least 1s"},
		{name: "bare number is refused", args: []string{"--resync=5"}, wantErr: "invalid value"},
		{name: "negative resync is refused", args: []string{"--resync=-1s"}, wantErr: "must be 0 or at least 1s"},
		{name: "json logs", args: []string{"--log-format=json", "--log-level=debug"}, check: func(o *options) bool { return o.logFormat == "json" && o.logLevel == "debug" }},
		{name: "unknown log format", args: []string{"--log-format=xml"}, wantErr: "must be text or json"},
		{name: "unknown log level", args: []string{"--log-level=loud"}, wantErr: "--log-level"},
		{name: "image from env", env: map[string]string{"MEMCACHED_IMAGE": "mirror/memcached:1"}, check: func(o *options) bool { return o.memcachedImage == "mirror/memcached:1" }},
		{name: "flag beats env", args: []string{"--memcached-image=a:1"}, env: map[string]string{"MEMCACHED_IMAGE": "b:2"}, check: func(o *options) bool { return o.memcachedImage == "a:1" }},
		{name: "empty image", args: []string{"--memcached-image="}, wantErr: "must not be empty"},
		{name: "max concurrent rolls as a number", args: []string{"--max-concurrent-rolls=3"}, check: func(o *options) bool { return o.maxRollsParsed == intstr.FromInt(3) }},
		{name: "max concurrent rolls as a percentage", args: []string{"--max-concurrent-rolls=25%"}, check: func(o *options) bool { return o.maxRollsParsed == intstr.FromString("25%") }},
		{name: "no concurrent rolls", args: []string{"--max-concurrent-rolls=0"}, wantErr: "must be at least 1"},
		{name: "max concurrent rolls from env", env: map[string]string{"MAX_CONCURRENT_ROLLS": "2"}, check: func(o *options) bool { return o.maxRollsParsed == intstr.FromInt(2) }},
		{name: "max concurrent rolls flag beats env", args: []string{"--max-concurrent-rolls=5"}, env: map[string]string{"MAX_CONCURRENT_ROLLS": "2"}, check: func(o *options) bool { return o.maxRollsParsed == intstr.FromInt(5) }},
		{name: "bad max concurrent rolls from env", env: map[string]string{"MAX_CONCURRENT_ROLLS": "0"}, wantErr: "must be at least 1"},
		{name: "a percentage over 100", args: []string{"--max-concurrent-rolls=150%"}, wantErr: "percentage from 1% to 100%"},
		{name: "no percent sign", args: []string{"--max-concurrent-rolls=ten"}, wantErr: "percentage from 1% to 100%"},
		{name: "the monitoring namespace by default", check: func(o *options) bool {
			return reflect.DeepEqual(o.monitoringSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}})
		}},
		{name: "monitoring namespaces by a set", args: []string{"--monitoring-namespace-selector=team in (obs,sre)"}, check: func(o *options) bool {
			return reflect.DeepEqual(o.monitoringSelector, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"obs", "sre"}}}})
		}},
		{name: "monitoring namespaces from env", env: map[string]string{"MONITORING_NAMESPACE_SELECTOR": "prometheus=true"}, check: func(o *options) bool {
			return reflect.DeepEqual(o.monitoringSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"prometheus": "true"}})
		}},
		{name: "no monitoring namespaces", args: []string{"--monitoring-namespace-selector=none"}, check: func(o *options) bool { return o.monitoringSelector == nil }},
		{name: "every namespace is refused", args: []string{"--monitoring-namespace-selector="}, wantErr: "selects every namespace"},
		{name: "a malformed monitoring selector", args: []string{"--monitoring-namespace-selector=a in b"}, wantErr: "--monitoring-namespace-selector"},
		{name: "no maintenance window by default", check: func(o *options) bool { return o.windowParsed == nil }},
		{name: "maintenance window", args: []string{"--maintenance-window=Sunday 03:00 2h"}, check: func(o *options) bool {
			return *o.windowParsed == memcached.Window{Day: time.Sunday, Start: 3 * time.Hour, Duration: 2 * time.Hour}
		}},
		{name: "maintenance window from env", env: map[string]string{"MAINTENANCE_WINDOW": "Friday 22:30 1h30m"}, check: func(o *options) bool {
			return *o.windowParsed == memcached.Window{Day: time.Friday, Start: 22*time.Hour + 30*time.Minute, Duration: 90 * time.Minute}
		}},
		{name: "maintenance window flag beats env", args: []string{"--maintenance-window="}, env: map[string]string{"MAINTENANCE_WINDOW": "Friday 22:30 1h"}, check: func(o *options) bool { return o.windowParsed == nil }},
		{name: "maintenance window without a duration", args: []string{"--maintenance-window=Sunday 03:00"}, wantErr: `--maintenance-window="Sunday 03:00" must be a weekday, a start time in UTC and a duration`},
		{name: "maintenance window of 30m", args: []string{"--maintenance-window=Sunday 03:00 30m"}, wantErr: "duration 30m0s must be whole minutes from 1h to 24h"},
		{name: "default sidecar image", check: func(o *options) bool { return o.sidecarImage == memcached.DefaultSidecarImage }},
		{name: "sidecar image from env", env: map[string]string{"SIDECAR_IMAGE": "mirror/sidecar:1"}, check: func(o *options) bool { return o.sidecarImage == "mirror/sidecar:1" }},
		{name: "sidecar flag beats env", args: []string{"--sidecar-image=a:1"}, env: map[string]string{"SIDECAR_IMAGE": "b:2"}, check: func(o *options) bool { return o.sidecarImage == "a:1" }},
		{name: "empty sidecar image", args: []string{"--sidecar-image="}, wantErr: "--sidecar-image must not be empty"},
		{name: "sidecar poll by default", check: func(o *options) bool { return o.sidecarPoll == 20*time.Second }},
		{name: "sidecars never asked", args: []string{"--sidecar-poll-interval=0"}, check: func(o *options) bool { return o.sidecarPoll == 0 }},
		{name: "sidecar poll below 1s is refused", args: []string{"--sidecar-poll-interval=100ms"}, wantErr: "--sidecar-poll-interval=100ms must be 0 or at least 1s"},
		{name: "zero qps", args: []string{"--kube-api-qps=0"}, wantErr: "must be positive"},
		{name: "request timeout", args: []string{"--kube-api-timeout=3s"}, check: func(o *options) bool { return o.kubeAPITimeout == 3*time.Second }},
		{name: "servicemonitor check", args: []string{"--servicemonitor-check-interval=5s"}, check: func(o *options) bool { return o.serviceMonitorCheck == 5*time.Second }},
		{name: "servicemonitor check by default", args: nil, check: func(o *options) bool { return o.serviceMonitorCheck == time.Minute }},
		{name: "servicemonitor check below 1s is refused", args: []string{"--servicemonitor-check-interval=500ms"}, wantErr: "--servicemonitor-check-interval=500ms must be at least 1s"},
		{name: "no request timeout is refused", args: []string{"--kube-api-timeout=0"}, wantErr: "--kube-api-timeout=0s must be at least 1s"},
		{name: "every progress written", args: []string{"--progress-status-interval=0"}, check: func(o *options) bool { return o.progressEvery == 0 }},
		{name: "negative progress interval", args: []string{"--progress-status-interval=-1s"}, wantErr: "must not be negative"},
		{name: "metrics address", args: []string{"--metrics-addr=:8080"}, check: func(o *options) bool { return o.metricsAddr == ":8080" }},
		{name: "leader election as deploy/operator.yaml runs it", args: []string{"--leader-elect"}, env: map[string]string{"POD_NAME": "memcached-operator-7d9f-abcde"}, check: func(o *options) bool {
			return o.leaderElect && o.identity == "memcached-operator-7d9f-abcde"
		}},
		{name: "leader election timings", args: []string{"--leader-elect", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=5s"}, check: func(o *options) bool {
			return o.leaseDuration == 30*time.Second && o.renewDeadline == 20*time.Second && o.retryPeriod == 5*time.Second
		}},
		{name: "renew deadline as long as the lease", args: []string{"--leader-elect", "--leader-elect-renew-deadline=12s"}, wantErr: "must be shorter than --leader-elect-lease-duration"},
		{name: "lease under a second", args: []string{"--leader-elect", "--leader-elect-lease-duration=900ms", "--leader-elect-renew-deadline=500ms", "--leader-elect-retry-period=100ms"}, wantErr: "at least 1s"},
		{name: "retry period too long for the deadline", args: []string{"--leader-elect", "--leader-elect-retry-period=7s"}, wantErr: "must be longer than 1.2 times"},
		{name: "no margin to stop after the renew deadline", args: []string{"--leader-elect", "--leader-elect-lease-duration=12s", "--leader-elect-renew-deadline=11s"}, wantErr: "must exceed --leader-elect-renew-deadline=11s by at least 1.25s"},
		{name: "margin just enough", args: []string{"--leader-elect", "--leader-elect-lease-duration=12s", "--leader-elect-renew-deadline=10750ms"}, check: func(o *options) bool { return o.renewDeadline == 10750*time.Millisecond }},
		{name: "zero retry period", args: []string{"--leader-elect", "--leader-elect-retry-period=0s"}, wantErr: "must be positive"},
		{name: "timings unchecked without leader election", args: []string{"--leader-elect-renew-deadline=1h"}, check: func(o *options) bool { return !o.leaderElect }},
		{name: "policy flags", args: []string{"--allowed-image-prefixes=registry.example.com/cache/, docker.io/library/memcached:", "--allowed-priority-classes=cache-low,cache-high", "--forbid-keyless-tolerations"}, check: func(o *options) bool {
			return reflect.DeepEqual(o.policy, memcached.Policy{
				ImagePrefixes:            []string{"registry.example.com/cache/", "docker.io/library/memcached:"},
				PriorityClasses:          []string{"cache-low", "cache-high"},
				ForbidKeylessTolerations: true,
			})
		}},
		{name: "policy from env", env: map[string]string{"ALLOWED_IMAGE_PREFIXES": "registry.example.com/", "ALLOWED_PRIORITY_CLASSES": "cache", "FORBID_KEYLESS_TOLERATIONS": "true"}, check: func(o *options) bool {
			return reflect.DeepEqual(o.policy, memcached.Policy{ImagePrefixes: []string{"registry.example.com/"}, PriorityClasses: []string{"cache"}, ForbidKeylessTolerations: true})
		}},
		{name: "policy flags beat env", args: []string{"--allowed-image-prefixes=", "--forbid-keyless-tolerations=false"}, env: map[string]string{"ALLOWED_IMAGE_PREFIXES": "registry.example.com/", "FORBID_KEYLESS_TOLERATIONS": "true"}, check: func(o *options) bool {
			return o.policy.ImagePrefixes == nil && !o.policy.ForbidKeylessTolerations
		}},
		{name: "image prefix with an image digest", args: []string{"--allowed-image-prefixes=registry.example.com/memcached@"}, check: func(o *options) bool {
			return len(o.policy.ImagePrefixes) == 1
		}},
		{name: "image prefix that ends mid-name", args: []string{"--allowed-image-prefixes=registry.example.com"}, wantErr: `"registry.example.com" must end in '/', ':' or '@'`},
		{name: "priority class that is no name", args: []string{"--allowed-priority-classes=Cache_High"}, wantErr: `--allowed-priority-classes: "Cache_High" is not the name of a PriorityClass`},
		{name: "keyless tolerations env that is no boolean", env: map[string]string{"FORBID_KEYLESS_TOLERATIONS": "yes please"}, wantErr: `FORBID_KEYLESS_TOLERATIONS="yes please" is not a boolean`},
		{name: "no namespace selector by default", check: func(o *options) bool { return o.namespaces == nil }},
		{name: "namespace selector", args: []string{"--namespace-selector=tier in (gold,silver),!legacy"}, check: func(o *options) bool {
			return o.namespaces.String() == "!legacy,tier in (gold,silver)"
		}},
		{name: "namespace selector from env", env: map[string]string{"NAMESPACE_SELECTOR": "memcached.example.com/tenant=true"}, check: func(o *options) bool {
			return o.namespaces.String() == "memcached.example.com/tenant=true"
		}},
		{name: "namespace selector flag beats env", args: []string{"--namespace-selector="}, env: map[string]string{"NAMESPACE_SELECTOR": "tenant=true"}, check: func(o *options) bool { return o.namespaces == nil }},
		{name: "namespace selector that does not parse", args: []string{"--namespace-selector=tier in gold"}, wantErr: `--namespace-selector="tier in gold": `},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "version", args: []string{"--version"}, check: func(o *options) bool { return o.version }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }

			o, err := parseOptions(tt.args, getenv, io.Discard)

			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tt.check(o) {
				t.Errorf("options %+v do not match", o)
			}
		})
	}
}
