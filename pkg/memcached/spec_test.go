package memcached_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// withMemoryLimit returns resources with only a memory limit.
func withMemoryLimit(limit string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
}

func TestCacheMB(t *testing.T) {
	tests := []struct {
		name      string
		resources *corev1.ResourceRequirements
		memoryMB  *int32
		want      int32
	}{
		{name: "default resources", want: 64},
		{name: "derived from 256Mi", resources: withMemoryLimit("256Mi"), want: 176},
		{name: "derived from 1Gi", resources: withMemoryLimit("1Gi"), want: 848},
		{name: "derived from 1G, not a whole number of MiB", resources: withMemoryLimit("1G"), want: 786},
		{name: "derived from the smallest limit", resources: withMemoryLimit("64Mi"), want: 8},
		{name: "no memory limit", resources: &corev1.ResourceRequirements{}, want: 64},
		{name: "explicit", resources: withMemoryLimit("1Gi"), memoryMB: memcachedtest.Int32p(100), want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			m.Spec.Resources, m.Spec.MemoryMB = tt.resources, tt.memoryMB
			if got := memcached.CacheMB(m); got != tt.want {
				t.Errorf("cacheMB: got %d, want %d", got, tt.want)
			}
			if err := memcached.ValidateSpec(m); err != nil {
				t.Errorf("validateSpec: %v, want the spec valid", err)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	seconds := int64(30)
	tests := []struct {
		name         string
		extraArgs    []string
		resources    *corev1.ResourceRequirements
		memoryMB     *int32
		tolerations  []corev1.Toleration
		nodeSelector map[string]string
		priority     string
		window       *v1alpha1.MaintenanceWindow
		monitoring   map[string]string
		wantErr      string
	}{
		{name: "maintenance window", window: &v1alpha1.MaintenanceWindow{Day: "Sunday", Start: "03:00", Duration: metav1.Duration{Duration: 2 * time.Hour}}},
		{name: "maintenance window on no weekday", window: &v1alpha1.MaintenanceWindow{Day: "Sun", Start: "03:00", Duration: metav1.Duration{Duration: 2 * time.Hour}}, wantErr: `spec.maintenanceWindow: day "Sun" must be a weekday from Monday to Sunday`},
		{name: "maintenance window at 24:00", window: &v1alpha1.MaintenanceWindow{Day: "Sunday", Start: "24:00", Duration: metav1.Duration{Duration: 2 * time.Hour}}, wantErr: `spec.maintenanceWindow: start "24:00" must be a time of day`},
		{name: "maintenance window of 25h", window: &v1alpha1.MaintenanceWindow{Day: "Sunday", Start: "03:00", Duration: metav1.Duration{Duration: 25 * time.Hour}}, wantErr: "spec.maintenanceWindow: duration 25h0m0s must be whole minutes from 1h to 24h"},
		{name: "allowed options", extraArgs: []string{"--conn-limit=2048", "--threads=2", "--extended=hashpower=20,no_lru_crawler", "--disable-cas"}},
		{name: "largest cache that fits", resources: withMemoryLimit("256Mi"), memoryMB: memcachedtest.Int32p(176)},
		{name: "short option", extraArgs: []string{"-c", "10"}, wantErr: `spec.extraArgs[0]: "-c" is not one of`},
		{name: "port", extraArgs: []string{"--port=1"}, wantErr: `"--port=1"`},
		{name: "memory", extraArgs: []string{"--memory-limit=10"}, wantErr: `"--memory-limit=10"`},
		{name: "daemon", extraArgs: []string{"--daemon"}, wantErr: `"--daemon"`},
		{name: "two options in one", extraArgs: []string{"--threads=2 --port=1"}, wantErr: `"--threads=2 --port=1"`},
		{name: "flag with a value", extraArgs: []string{"--disable-cas=yes"}, wantErr: `"--disable-cas=yes"`},
		{name: "option without a value", extraArgs: []string{"--threads"}, wantErr: `"--threads"`},
		{name: "cache one MiB too large", resources: withMemoryLimit("256Mi"), memoryMB: memcachedtest.Int32p(177), wantErr: "spec.memoryMB 177 does not fit the memory limit 256Mi: at most 176"},
		{name: "limit too small", resources: withMemoryLimit("32Mi"), wantErr: "below 64Mi"},

		// Values memcached 1.6.18 exits on, and the edges it accepts.
		{name: "threads 0", extraArgs: []string{"--threads=0"}, wantErr: `spec.extraArgs[0]: "--threads=0": ` + memcached.MsgThreads},
		{name: "threads 1 and 64", extraArgs: []string{"--threads=1", "--threads=64"}},
		{name: "threads 65", extraArgs: []string{"--threads=65"}, wantErr: memcached.MsgThreads},
		{name: "threads with a unit", extraArgs: []string{"--threads=4x"}, wantErr: memcached.MsgThreads},
		{name: "threads with a leading zero", extraArgs: []string{"--threads=04"}, wantErr: memcached.MsgThreads},
		{name: "every protocol", extraArgs: []string{"--protocol=auto", "--protocol=ascii", "--protocol=binary"}},
		{name: "protocol x", extraArgs: []string{"--protocol=x"}, wantErr: `"--protocol=x": ` + memcached.MsgProtocol},
		{name: "protocol in upper case", extraArgs: []string{"--protocol=ASCII"}, wantErr: memcached.MsgProtocol},
		{name: "conn limit 0", extraArgs: []string{"--conn-limit=0"}, wantErr: memcached.MsgConnLimit},
		{name: "conn limit at its maximum", extraArgs: []string{"--conn-limit=1048576"}},
		{name: "conn limit above its maximum", extraArgs: []string{"--conn-limit=1048577"}, wantErr: memcached.MsgConnLimit},
		{name: "conn limit of eight digits", extraArgs: []string{"--conn-limit=10000000"}, wantErr: memcached.MsgConnLimit},
		{name: "conn limit of 16 per default thread", extraArgs: []string{"--conn-limit=64"}},
		{name: "conn limit below 16 per default thread", extraArgs: []string{"--conn-limit=63"}, wantErr: "spec.extraArgs: " + memcached.MsgConnsPerThread},
		{name: "conn limit of 16 per thread", extraArgs: []string{"--threads=2", "--conn-limit=32"}},
		{name: "conn limit of 16 with 1 thread, below 32", extraArgs: []string{"--threads=1", "--conn-limit=31"}, wantErr: memcached.MsgConnsPerThread},
		{name: "conn limit below 16 per thread", extraArgs: []string{"--conn-limit=1000", "--threads=64"}, wantErr: memcached.MsgConnsPerThread},
		{name: "hashpower 40", extraArgs: []string{"--extended=hashpower=40"}, wantErr: `"--extended=hashpower=40": ` + memcached.MsgHashpower},
		{name: "hashpower 11", extraArgs: []string{"--extended=hashpower=11"}, wantErr: memcached.MsgHashpower},
		{name: "hashpower without a number", extraArgs: []string{"--extended=no_lru_crawler,hashpower"}, wantErr: memcached.MsgHashpower},
		{name: "hashpower with a leading zero", extraArgs: []string{"--extended=hashpower=016"}, wantErr: memcached.MsgHashpower},
		{name: "a bad hashpower after a good one", extraArgs: []string{"--extended=hashpower=20,hashpower=33"}, wantErr: memcached.MsgHashpower},
		{name: "hashpower 32", extraArgs: []string{"--extended=hashpower=32"}},
		{name: "hashpower 12 with 3 threads", extraArgs: []string{"--threads=3", "--extended=hashpower=12"}},
		{name: "hashpower 12 with the default 4 threads", extraArgs: []string{"--extended=hashpower=12"}, wantErr: memcached.MsgHashpowerThreads},
		{name: "hashpower 13 with 4 threads", extraArgs: []string{"--threads=4", "--extended=hashpower=13"}},
		{name: "hashpower 13 with 5 threads", extraArgs: []string{"--threads=5", "--extended=hashpower=13"}, wantErr: memcached.MsgHashpowerThreads},
		{name: "hashpower 14 with 10 threads", extraArgs: []string{"--threads=10", "--extended=hashpower=14"}},
		{name: "hashpower 14 with 11 threads", extraArgs: []string{"--threads=11", "--extended=hashpower=14"}, wantErr: memcached.MsgHashpowerThreads},
		{name: "hashpower 15 with 20 threads", extraArgs: []string{"--threads=20", "--extended=hashpower=15"}},
		{name: "hashpower 15 with 21 threads", extraArgs: []string{"--threads=21", "--extended=hashpower=15"}, wantErr: memcached.MsgHashpowerThreads},
		{name: "hashpower 16 with 64 threads", extraArgs: []string{"--extended=hashpower=16", "--threads=64"}},
		{name: "item size in KiB, MiB and bytes", extraArgs: []string{"--max-item-size=512k", "--max-item-size=2M", "--max-item-size=1572864"}},
		{name: "item size below a slab chunk", extraArgs: []string{"--max-item-size=511k"}, wantErr: memcached.MsgItemSize},
		{name: "item size not a multiple of a slab chunk", extraArgs: []string{"--max-item-size=768k"}, wantErr: memcached.MsgItemSize},
		{name: "item size with a fraction", extraArgs: []string{"--max-item-size=1.5m"}, wantErr: memcached.MsgItemSize},
		{name: "item size in GiB", extraArgs: []string{"--max-item-size=1g"}, wantErr: memcached.MsgItemSize},
		{name: "item size of 1024m", extraArgs: []string{"--max-item-size=1024m"}, resources: withMemoryLimit("3Gi")},
		{name: "item size above 1024m", extraArgs: []string{"--max-item-size=1025m"}, resources: withMemoryLimit("3Gi"), wantErr: memcached.MsgItemSize},
		{name: "item size 64m with memoryMB 16", extraArgs: []string{"--max-item-size=64m"}, memoryMB: memcachedtest.Int32p(16), wantErr: "spec.extraArgs: " + memcached.MsgItemSizeFits},
		{name: "item size half of memoryMB 16", extraArgs: []string{"--max-item-size=8m"}, memoryMB: memcachedtest.Int32p(16)},
		{name: "item size above half of memoryMB 16", extraArgs: []string{"--max-item-size=8704k"}, memoryMB: memcachedtest.Int32p(16), wantErr: memcached.MsgItemSizeFits},
		{name: "item size above half of the derived cache", extraArgs: []string{"--max-item-size=33m"}, wantErr: memcached.MsgItemSizeFits},
		{name: "item size half of the derived cache", extraArgs: []string{"--max-item-size=32m"}},
		{name: "default item size with memoryMB 1", memoryMB: memcachedtest.Int32p(1), wantErr: memcached.MsgItemSizeFits},
		{name: "small item size with memoryMB 1", extraArgs: []string{"--max-item-size=512k"}, memoryMB: memcachedtest.Int32p(1)},

		{name: "growth factor above 1", extraArgs: []string{"--slab-growth-factor=1.01", "--slab-growth-factor=2"}},
		{name: "growth factor 0.5", extraArgs: []string{"--slab-growth-factor=0.5"}, wantErr: `"--slab-growth-factor=0.5": ` + memcached.MsgGrowthFactor},
		{name: "growth factor 1", extraArgs: []string{"--slab-growth-factor=1.0"}, wantErr: memcached.MsgGrowthFactor},
		{name: "growth factor with letters", extraArgs: []string{"--slab-growth-factor=2x"}, wantErr: memcached.MsgGrowthFactor},
		{name: "slab min size 0", extraArgs: []string{"--slab-min-size=0"}, wantErr: memcached.MsgSlabMinSize},
		{name: "slab min size at its maximum", extraArgs: []string{"--slab-min-size=2147483647"}},
		{name: "slab min size above its maximum", extraArgs: []string{"--slab-min-size=2147483648"}, wantErr: memcached.MsgSlabMinSize},
		{name: "requests per event 0", extraArgs: []string{"--max-reqs-per-event=0"}, wantErr: memcached.MsgReqsPerEvent},
		{name: "requests per event 1", extraArgs: []string{"--max-reqs-per-event=1"}},
		{name: "negative requests per event", extraArgs: []string{"--max-reqs-per-event=-1"}, wantErr: memcached.MsgReqsPerEvent},
		{name: "listen backlog 0", extraArgs: []string{"--listen-backlog=0"}},
		{name: "listen backlog above int32", extraArgs: []string{"--listen-backlog=2147483648"}, wantErr: memcached.MsgListenBacklog},
		{name: "extended suboptions of the allow-list", extraArgs: []string{"--extended=hash_algorithm=xxh3,idle_timeout=2147483647,lru_crawler_tocrawl=4294967295,lru_crawler_sleep=1000000,track_sizes,slab_automove=2,hashpower=20"}},
		{name: "extended foo", extraArgs: []string{"--extended=foo"}, wantErr: `"--extended=foo": ` + memcached.MsgExtended},
		{name: "extended suboption the operator sets", extraArgs: []string{"--extended=ssl_verify_mode=0"}, wantErr: memcached.MsgExtended},
		{name: "extended sleep above a second", extraArgs: []string{"--extended=lru_crawler_sleep=1000001"}, wantErr: memcached.MsgExtended},
		{name: "extended flag with a value", extraArgs: []string{"--extended=track_sizes=1"}, wantErr: memcached.MsgExtended},
		{name: "extended trailing comma", extraArgs: []string{"--extended=track_sizes,"}, wantErr: memcached.MsgExtended},
		{name: "memoryMB 64 with the default limit", memoryMB: memcachedtest.Int32p(64)},
		{name: "memoryMB 96 with the default limit", memoryMB: memcachedtest.Int32p(96), wantErr: "spec.memoryMB 96 does not fit the memory limit 128Mi: at most 64"},
		{name: "memoryMB 96 without a memory limit", memoryMB: memcachedtest.Int32p(96), resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},

		// Pod fields the API server validates.
		{name: "tolerations the API server accepts", tolerations: []corev1.Toleration{
			{Operator: corev1.TolerationOpExists},
			{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			{Key: "dedicated", Value: "cache"},
		}},
		{name: "Exists with a value", tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Value: "x"}}, wantErr: "spec.tolerations[0]: " + memcached.MsgTolerationExistsValue},
		{name: "keyless Equal", tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}, wantErr: memcached.MsgTolerationKeyless},
		{name: "keyless without an operator", tolerations: []corev1.Toleration{{Effect: corev1.TaintEffectNoSchedule}}, wantErr: memcached.MsgTolerationKeyless},
		{name: "key that is no qualified name", tolerations: []corev1.Toleration{{Key: "bad key!", Operator: corev1.TolerationOpExists}}, wantErr: `spec.tolerations[0]: key "bad key!" is not a taint key`},
		{name: "value that is no label value", tolerations: []corev1.Toleration{{Key: "a", Value: "not a value"}}, wantErr: `value "not a value" is not a label value`},
		{name: "tolerationSeconds with NoSchedule", tolerations: []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: &seconds}}, wantErr: memcached.MsgTolerationSeconds},
		{name: "unknown effect", tolerations: []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: "NoRun"}}, wantErr: `effect "NoRun"`},
		{name: "unknown operator", tolerations: []corev1.Toleration{{Key: "a", Operator: "Maybe"}}, wantErr: `operator "Maybe"`},
		{name: "node selector of label keys and values", nodeSelector: map[string]string{"kubernetes.io/os": "linux", "disk": ""}},
		{name: "node selector key with a space", nodeSelector: map[string]string{"bad key!": "x"}, wantErr: `spec.nodeSelector: key "bad key!" is not a label key`},
		{name: "node selector value with a space", nodeSelector: map[string]string{"disk": "fast ssd"}, wantErr: `spec.nodeSelector[disk]: "fast ssd" is not a label value`},
		{name: "monitoring labels of label keys and values", monitoring: map[string]string{"release": "kube-prometheus-stack", "example.com/team": ""}},
		{name: "monitoring label key with a space", monitoring: map[string]string{"bad key!": "x"}, wantErr: `spec.monitoring.labels: key "bad key!" is not a label key`},
		{name: "monitoring label value with a space", monitoring: map[string]string{"release": "kube prometheus"}, wantErr: `spec.monitoring.labels[release]: "kube prometheus" is not a label value`},
		{name: "monitoring label app", monitoring: map[string]string{"app": "other"}, wantErr: "spec.monitoring.labels: app is the operator's own label"},
		{name: "monitoring label memcached_cr", monitoring: map[string]string{"memcached_cr": "other"}, wantErr: "spec.monitoring.labels: memcached_cr is the operator's own label"},
		{name: "priority class", priority: "high-priority.example.com"},
		{name: "priority class that is no DNS subdomain", priority: "Not_A_DNS_Name", wantErr: `spec.priorityClassName: "Not_A_DNS_Name" is not the name of a PriorityClass`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			m.Spec.ExtraArgs, m.Spec.Resources, m.Spec.MemoryMB = tt.extraArgs, tt.resources, tt.memoryMB
			m.Spec.Tolerations, m.Spec.NodeSelector, m.Spec.PriorityClassName = tt.tolerations, tt.nodeSelector, tt.priority
			m.Spec.MaintenanceWindow = tt.window
			if tt.monitoring != nil {
				m.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true, Labels: tt.monitoring}
			}
			err := memcached.ValidateSpec(m)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want the spec valid", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCRDHasTheSameRules checks that deploy/crd.yaml refuses extra arguments
// with the very pattern the operator checks, so that the two never drift.
func TestCRDHasTheSameRules(t *testing.T) {
	crd, err := os.ReadFile("../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "self.matches('" + memcached.ExtraArgPattern + "')"; !strings.Contains(string(crd), want) {
		t.Errorf("deploy/crd.yaml has no rule %s", want)
	}
	if want := "quantity('" + memcached.MinMemoryLimit + "')"; !strings.Contains(string(crd), want) {
		t.Errorf("deploy/crd.yaml has no rule with %s", want)
	}
	if want := "(self.memoryMB + 48) * 8 * 1048576 <= quantity(string(self.resources.limits['memory'])).asInteger() * 7"; !strings.Contains(string(crd), want) ||
		memcached.MemcachedOverheadMB != 48 || memcached.Mebibyte != 1048576 {
		t.Errorf("deploy/crd.yaml has no rule %s, the one derivedCacheMB follows", want)
	}
	for _, pattern := range []string{memcached.ThreadsPattern, memcached.ProtocolPattern, memcached.ConnLimitPattern, memcached.HashpowerPattern, memcached.ExtendedPattern} {
		if want := ".matches('" + pattern + "')"; !strings.Contains(string(crd), want) {
			t.Errorf("deploy/crd.yaml has no rule with %s", want)
		}
	}
	for _, message := range []string{
		memcached.MsgThreads, memcached.MsgProtocol, memcached.MsgConnLimit, memcached.MsgItemSize, memcached.MsgHashpower, memcached.MsgItemSizeFits, memcached.MsgHashpowerThreads, memcached.MsgConnsPerThread,
		memcached.MsgGrowthFactor, memcached.MsgSlabMinSize, memcached.MsgReqsPerEvent, memcached.MsgListenBacklog, memcached.MsgExtended,
		memcached.MsgTolerationKeyless, memcached.MsgTolerationSeconds, memcached.MsgTolerationExistsValue, memcached.MsgAuthProtocol,
	} {
		if want := `message: "` + message + `"`; !strings.Contains(string(crd), want) {
			t.Errorf("deploy/crd.yaml has no rule with %s", want)
		}
	}
	// The numbers of the rules that are not patterns.
	defaultLimit := resource.MustParse(memcached.DefaultMemoryLimit)
	for _, want := range []string{
		fmt.Sprintf("int(self.substring(13)) <= %d", memcached.MaxConnLimit),
		fmt.Sprintf("b >= %d && b <= %d && b %% %d == 0", memcached.SlabChunkBytes, memcached.MaxItemBytes, memcached.SlabChunkBytes),
		fmt.Sprintf("* 2 <= cache * %d) : cache >= %d", memcached.Mebibyte, 2*memcached.DefaultItemBytes/memcached.Mebibyte),
		fmt.Sprintf("ts.size() == 0 ? %d : ts.max()", memcached.DefaultThreads),
		fmt.Sprintf("int(c.substring(13)) >= %d * t && int(c.substring(13)) >= %d", memcached.ConnsPerThread, memcached.MinConnLimit),
		fmt.Sprintf(": (self.memoryMB + 48) * 8 * 1048576 <= %d * 7)", defaultLimit.Value()),
		"- 48 : 64]", // the cache without a memory limit: memcached.DefaultCacheMB
	} {
		if !strings.Contains(string(crd), want) {
			t.Errorf("deploy/crd.yaml has no rule with %s", want)
		}
	}
	var lockPowers []string
	for _, threads := range []int64{2, 3, 4, 10, 20} {
		lockPowers = append(lockPowers, fmt.Sprintf("t <= %d ? %d", threads, memcached.ItemLockPower(threads)))
	}
	if want := strings.Join(lockPowers, " : ") + fmt.Sprintf(" : %d", memcached.ItemLockPower(maxThreadsForTest)); !strings.Contains(string(crd), want) {
		t.Errorf("deploy/crd.yaml has no rule with %s, as itemLockPower computes it", want)
	}
}

// maxThreadsForTest is the largest --threads that memcached.ThreadsPattern
// allows.
const maxThreadsForTest = 64

func TestItemLockPower(t *testing.T) {
	// memcached 1.6.18's "Hash table power size (N) cannot be equal to or
	// less than item lock table (M)" names M for a thread count.
	for threads, want := range map[int64]int64{1: 10, 2: 10, 3: 11, 4: 12, 5: 13, 10: 13, 11: 14, 20: 14, 21: 15, 64: 15} {
		if got := memcached.ItemLockPower(threads); got != want {
			t.Errorf("%d threads: got %d, want %d", threads, got, want)
		}
	}
}

func TestSpecFieldsReachThePodTemplate(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	m.Spec.Image = "registry.local/memcached:1.6.99"
	m.Spec.Resources = withMemoryLimit("256Mi")
	m.Spec.ExtraArgs = []string{"--threads=2", "--conn-limit=77"}
	m.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	m.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
	m.Spec.PriorityClassName = "high"

	spec := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec

	c := spec.Containers[0]
	if c.Image != m.Spec.Image {
		t.Errorf("image: got %s, want %s", c.Image, m.Spec.Image)
	}
	if want := []string{"memcached", "--threads=2", "--conn-limit=77", "-m", "176", "-p", "11211", "-v"}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command: got %v, want %v: extra arguments first, so the operator's options win", c.Command, want)
	}
	if !reflect.DeepEqual(c.Resources, *m.Spec.Resources) {
		t.Errorf("resources: got %+v, want %+v", c.Resources, *m.Spec.Resources)
	}
	if !reflect.DeepEqual(spec.NodeSelector, m.Spec.NodeSelector) || !reflect.DeepEqual(spec.Tolerations, m.Spec.Tolerations) ||
		spec.PriorityClassName != "high" {
		t.Errorf("placement: got %v %v %q, want the spec's", spec.NodeSelector, spec.Tolerations, spec.PriorityClassName)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken: got %v, want false", spec.AutomountServiceAccountToken)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != memcached.TerminationGracePeriod {
		t.Errorf("terminationGracePeriodSeconds: got %v, want %d", spec.TerminationGracePeriodSeconds, memcached.TerminationGracePeriod)
	}
}

func TestDeploymentStrategyRollsOnePodAtATime(t *testing.T) {
	s := memcached.NewDeployment(memcachedtest.NewMemcached("example", 3), memcachedtest.Image, memcachedtest.SidecarImage).Spec.Strategy
	if s.RollingUpdate == nil || *s.RollingUpdate.MaxSurge != intstr.FromInt(1) || *s.RollingUpdate.MaxUnavailable != intstr.FromInt(0) {
		t.Errorf("strategy: got %+v, want a rolling update with maxSurge 1 and maxUnavailable 0", s)
	}
}

func TestTemplateHashFollowsThePodTemplateOnly(t *testing.T) {
	base := memcachedtest.NewMemcached("example", 2)
	tests := []struct {
		name     string
		change   func(m *v1alpha1.Memcached)
		image    string
		wantSame bool
	}{
		{name: "nothing", change: func(*v1alpha1.Memcached) {}, wantSame: true},
		{name: "size", change: func(m *v1alpha1.Memcached) { m.Spec.Size = 5 }, wantSame: true},
		{name: "status", change: func(m *v1alpha1.Memcached) { m.Status.Nodes = []string{"a"} }, wantSame: true},
		{name: "image", change: func(m *v1alpha1.Memcached) { m.Spec.Image = "other:1" }},
		{name: "operator's default image", change: func(*v1alpha1.Memcached) {}, image: "other:2"},
		{name: "memory", change: func(m *v1alpha1.Memcached) { m.Spec.MemoryMB = memcachedtest.Int32p(32) }},
		{name: "resources", change: func(m *v1alpha1.Memcached) { m.Spec.Resources = withMemoryLimit("1Gi") }},
		{name: "extra args", change: func(m *v1alpha1.Memcached) { m.Spec.ExtraArgs = []string{"--threads=8"} }},
		{name: "node selector", change: func(m *v1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"a": "b"} }},
		{name: "tolerations", change: func(m *v1alpha1.Memcached) {
			m.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}},
		{name: "priority class", change: func(m *v1alpha1.Memcached) { m.Spec.PriorityClassName = "high" }},
	}
	want := memcachedtest.ManifestHash(t, base, memcachedtest.Image)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base.DeepCopy()
			tt.change(m)
			image := memcachedtest.Image
			if tt.image != "" {
				image = tt.image
			}
			if got := memcachedtest.ManifestHash(t, m, image); (got == want) != tt.wantSame {
				t.Errorf("hash %s against %s: same = %v, want %v", got, want, got == want, tt.wantSame)
			}
		})
	}
}

func TestDeploymentManifestAddsModernPodFields(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}
	spread, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "topologySpreadConstraints")
	want := []interface{}{map[string]interface{}{
		"maxSkew":           int64(1),
		"topologyKey":       "kubernetes.io/hostname",
		"whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector":     map[string]interface{}{"matchLabels": map[string]interface{}{"app": "memcached", "memcached_cr": "example"}},
		"matchLabelKeys":    []interface{}{"pod-template-hash"},
	}}
	if !reflect.DeepEqual(spread, want) {
		t.Errorf("topologySpreadConstraints: got %v, want %v", spread, want)
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	sleep, _, _ := unstructured.NestedInt64(containers[0].(map[string]interface{}), "lifecycle", "preStop", "sleep", "seconds")
	if sleep != memcached.PreStopSleepSeconds {
		t.Errorf("preStop sleep: got %d, want %d", sleep, memcached.PreStopSleepSeconds)
	}
}

func TestJSONPatchSet(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]interface{}
		want   string
	}{
		{
			name:   "test the UID, then set and remove in path order",
			values: map[string]interface{}{"/b": map[string]interface{}{"x": "y"}, "/a": nil},
			want:   `[{"op":"test","path":"/metadata/uid","value":"uid-1"},{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":{"x":"y"}}]`,
		},
		{
			name:   "nothing to set still tests the UID",
			values: nil,
			want:   `[{"op":"test","path":"/metadata/uid","value":"uid-1"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memcached.JSONPatchSet("uid-1", tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewServiceForMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	s := memcached.NewService(m)
	if s.Name != "example" || s.Namespace != "test" || !reflect.DeepEqual(s.Labels, memcached.Labels("example")) {
		t.Errorf("metadata: got %s/%s %v", s.Namespace, s.Name, s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != m.UID || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references: got %+v, want one controller reference to the memcached", s.OwnerReferences)
	}
	if s.Spec.ClusterIP != "None" || !reflect.DeepEqual(s.Spec.Selector, memcached.Labels("example")) {
		t.Errorf("spec: got clusterIP %q selector %v, want a headless Service selecting the pods", s.Spec.ClusterIP, s.Spec.Selector)
	}
	want := []corev1.ServicePort{{Name: "memcached", Port: 11211, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP}}
	if !reflect.DeepEqual(s.Spec.Ports, want) {
		t.Errorf("ports: got %+v, want %+v", s.Spec.Ports, want)
	}
}

func TestNewPodDisruptionBudgetForMemcached(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	p := memcached.NewPodDisruptionBudget(m)
	if p.APIVersion != "policy/v1" || p.Kind != "PodDisruptionBudget" || p.Name != "example" {
		t.Errorf("identity: got %s %s %s", p.APIVersion, p.Kind, p.Name)
	}
	if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt(1) || p.Spec.MinAvailable != nil {
		t.Errorf("budget: got maxUnavailable %v minAvailable %v, want maxUnavailable 1 alone", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	if p.Spec.Selector == nil || !reflect.DeepEqual(p.Spec.Selector.MatchLabels, memcached.Labels("example")) {
		t.Errorf("selector: got %v", p.Spec.Selector)
	}
	for size, want := range map[int32]bool{0: false, 1: false, 2: true, 100: true} {
		if got := memcached.WantsPodDisruptionBudget(memcachedtest.NewMemcached("example", size)); got != want {
			t.Errorf("size %d: wants a budget = %v, want %v", size, got, want)
		}
	}
}
