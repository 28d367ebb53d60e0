package stub

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
)

// TestModel is a randomized model test of the handler. A generator draws,
// from a seed, a long sequence of events: users' edits of every spec field,
// the creation and deletion of Memcacheds, the operator's own changes (a
// new default or sidecar image, the template of an earlier release), the
// clock crossing maintenance windows, restarts and changes of leader, hand
// edits and deletions of every child, pods becoming Ready or not, being
// replaced, and the Deployment controller and the garbage collector doing
// their part (see modelcluster_test.go). After each event the active
// handler reconciles everything queued, as its workers would, and the
// model checks its invariants (see model.check and the checks of the
// model's client):
//
//   - windowed: a change of the operator's own starts rolling a Deployment
//     only while its maintenance window is open, and only as a paced roll;
//   - paced: at most --max-concurrent-rolls Memcacheds are in a paced roll;
//   - applied: a user's spec change is in the Deployment once the event's
//     reconciles are done, and status.observedGeneration says so;
//   - discovery: the discovery version of a Memcached name never goes
//     back, across deletion and creation too, is never reused for another
//     membership, and the ConfigMap lists the Ready pods;
//   - observed: status.observedGeneration of a Memcached never goes back;
//   - conditions: Available, the counts and Progressing=Complete match the
//     pods;
//   - owned: a reconcile writes only the children of its own Memcached.
//
// By default it runs modelSeeds fixed seeds and one random one, of
// modelSteps events each: 10,200 events in all, which take about 4 s, and
// about 25 s with -race on two cores (make unit); bound: 60 s with -race
// on two cores of their own. It runs single-threaded, so cores shared
// with other runs stretch it: 67 s and 80 s were measured with -race at
// loads of 9 and 20 on two cores, with one seed failing. A failure adds
// its shrinking, a few seconds per failing seed. A failure prints
// the seed, the shortest sequence of events found that still breaks the
// same invariant, and the command that replays it:
//
//	go test ./pkg/stub -run TestModel -args -seed=N
//
// (or MODEL_SEED=N), which runs that seed alone.
func TestModel(t *testing.T) {
	seeds := []int64{}
	switch {
	case *modelSeed != 0:
		seeds = append(seeds, *modelSeed)
	case os.Getenv("MODEL_SEED") != "":
		s, err := strconv.ParseInt(os.Getenv("MODEL_SEED"), 10, 64)
		if err != nil {
			t.Fatalf("MODEL_SEED: %v", err)
		}
		seeds = append(seeds, s)
	default:
		for i := range modelSeeds {
			seeds = append(seeds, int64(i+1))
		}
		seeds = append(seeds, time.Now().UnixNano())
	}
	steps := modelSteps
	if *modelStepsFlag > 0 {
		steps = *modelStepsFlag
	}
	start := time.Now()
	total := 0
	for _, seed := range seeds {
		cfg, events := generate(seed, steps)
		n, v := runModel(cfg, events)
		total += n
		if v == nil {
			continue
		}
		shortest := shrink(cfg, events[:n], v.invariant)
		_, sv := runModel(cfg, shortest)
		t.Errorf("seed %d breaks invariant %s at event %d of %d: %v\n%s\nthe shortest sequence found that still breaks it (%d events):\n%s\nreplay: go test ./pkg/stub -run TestModel -args -seed=%d",
			seed, v.invariant, n, len(events), v.msg, cfg, len(shortest), describe(shortest, sv), seed)
	}
	t.Logf("%d events of %d seeds in %v", total, len(seeds), time.Since(start).Round(time.Millisecond))
}

const (
	// modelSeeds and modelSteps make the default run: 50 fixed seeds and a
	// random one, of 200 events each.
	modelSeeds = 50
	modelSteps = 200
)

var (
	modelSeed      = flag.Int64("seed", 0, "TestModel: replay the sequence of events of this seed alone (also MODEL_SEED)")
	modelStepsFlag = flag.Int("steps", 0, "TestModel: the number of events of each seed's sequence (default 200)")
)

// modelNames are the Memcacheds of the model, in namespace test.
var modelNames = []string{"a", "b", "c"}

// modelConfig is the operator's configuration that a seed draws.
type modelConfig struct {
	// limit is --max-concurrent-rolls.
	limit int
	// window is --maintenance-window, nil for none.
	window *memcached.Window
}

func (c modelConfig) String() string {
	w := "none"
	if c.window != nil {
		w = c.window.String()
	}
	return fmt.Sprintf("operator: --max-concurrent-rolls=%d --maintenance-window=%q; clock at %s", c.limit, w, memcachedtest.Now.UTC().Format(time.RFC3339))
}

// The windows the model draws from. The clock starts on Sunday 12:00 UTC.
var (
	operatorWindows = []*memcached.Window{
		nil,
		{Day: time.Sunday, Start: 12 * time.Hour, Duration: time.Hour},
		{Day: time.Tuesday, Start: 3 * time.Hour, Duration: 2 * time.Hour},
	}
	specWindows = []*v1alpha1.MaintenanceWindow{
		nil,
		{Day: "Sunday", Start: "13:00", Duration: metav1.Duration{Duration: time.Hour}},
		{Day: "Monday", Start: "00:00", Duration: metav1.Duration{Duration: 2 * time.Hour}},
		{Day: "Wednesday", Start: "22:00", Duration: metav1.Duration{Duration: 24 * time.Hour}},
	}
)

// specOption is one value of a spec field that an edit sets.
type specOption struct {
	desc string
	set  func(s *v1alpha1.MemcachedSpec)
}

// specField is a spec field and the values an edit draws from. Every field
// of MemcachedSpec is here, and the values include those that change no pod
// (monitoring's labels and prometheusRule, discovery disabled written out,
// the window, the network policy), and some that the operator refuses.
type specField struct {
	name    string
	options []specOption
}

func opt(desc string, set func(s *v1alpha1.MemcachedSpec)) specOption {
	return specOption{desc: desc, set: set}
}

var specFields = []specField{
	{"size", []specOption{
		opt("0", func(s *v1alpha1.MemcachedSpec) { s.Size = 0 }),
		opt("1", func(s *v1alpha1.MemcachedSpec) { s.Size = 1 }),
		opt("2", func(s *v1alpha1.MemcachedSpec) { s.Size = 2 }),
		opt("3", func(s *v1alpha1.MemcachedSpec) { s.Size = 3 }),
	}},
	{"image", []specOption{
		opt(`""`, func(s *v1alpha1.MemcachedSpec) { s.Image = "" }),
		opt("example.com/memcached:1.6.21", func(s *v1alpha1.MemcachedSpec) { s.Image = "example.com/memcached:1.6.21" }),
		opt("example.com/memcached:1.6.22", func(s *v1alpha1.MemcachedSpec) { s.Image = "example.com/memcached:1.6.22" }),
	}},
	{"resources", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.Resources = nil }),
		opt("{requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 256Mi}}", func(s *v1alpha1.MemcachedSpec) {
			s.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			}
		}),
	}},
	{"memoryMB", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.MemoryMB = nil }),
		opt("32", func(s *v1alpha1.MemcachedSpec) { s.MemoryMB = memcachedtest.Int32p(32) }),
		opt("100 (too much without resources)", func(s *v1alpha1.MemcachedSpec) { s.MemoryMB = memcachedtest.Int32p(100) }),
	}},
	{"extraArgs", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = nil }),
		opt("[--threads=2]", func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--threads=2"} }),
		opt("[--disable-cas, --conn-limit=512]", func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--disable-cas", "--conn-limit=512"} }),
		opt("[--protocol=binary] (refused with auth)", func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--protocol=binary"} }),
		opt("[--port=1] (refused)", func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--port=1"} }),
	}},
	{"nodeSelector", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.NodeSelector = nil }),
		opt("{disktype: ssd}", func(s *v1alpha1.MemcachedSpec) { s.NodeSelector = map[string]string{"disktype": "ssd"} }),
	}},
	{"tolerations", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.Tolerations = nil }),
		opt("[dedicated=cache:NoSchedule]", func(s *v1alpha1.MemcachedSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
		}),
	}},
	{"priorityClassName", []specOption{
		opt(`""`, func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "" }),
		opt("cache-high", func(s *v1alpha1.MemcachedSpec) { s.PriorityClassName = "cache-high" }),
	}},
	{"tls", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.TLS = nil }),
		opt("{secretName: cache-tls}", func(s *v1alpha1.MemcachedSpec) { s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cache-tls"} }),
		opt("{secretName: cache-tls, clientCertificates: Required}", func(s *v1alpha1.MemcachedSpec) {
			s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cache-tls", ClientCertificates: v1alpha1.ClientCertificatesRequired}
		}),
	}},
	{"auth", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.Auth = nil }),
		opt("{secretName: cache-auth}", func(s *v1alpha1.MemcachedSpec) { s.Auth = &v1alpha1.MemcachedAuth{SecretName: "cache-auth"} }),
	}},
	{"monitoring", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.Monitoring = nil }),
		opt("{enabled: true}", func(s *v1alpha1.MemcachedSpec) { s.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true} }),
		opt("{enabled: true, labels: {release: prom}}", func(s *v1alpha1.MemcachedSpec) {
			s.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true, Labels: map[string]string{"release": "prom"}}
		}),
		opt("{enabled: true, prometheusRule: true}", func(s *v1alpha1.MemcachedSpec) {
			s.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true, PrometheusRule: true}
		}),
		opt("{enabled: false}", func(s *v1alpha1.MemcachedSpec) { s.Monitoring = &v1alpha1.MemcachedMonitoring{} }),
	}},
	{"monitoring.labels", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) {
			if s.Monitoring != nil {
				s.Monitoring.Labels = nil
			}
		}),
		opt("{team: cache}", func(s *v1alpha1.MemcachedSpec) {
			if s.Monitoring != nil {
				s.Monitoring.Labels = map[string]string{"team": "cache"}
			}
		}),
	}},
	{"monitoring.prometheusRule", []specOption{
		opt("false", func(s *v1alpha1.MemcachedSpec) {
			if s.Monitoring != nil {
				s.Monitoring.PrometheusRule = false
			}
		}),
		opt("true", func(s *v1alpha1.MemcachedSpec) {
			if s.Monitoring != nil {
				s.Monitoring.PrometheusRule = true
			}
		}),
	}},
	{"maintenanceWindow", func() []specOption {
		var out []specOption
		for _, w := range specWindows {
			w := w
			desc := "nil"
			if w != nil {
				desc = fmt.Sprintf("{day: %s, start: %q, duration: %v}", w.Day, w.Start, w.Duration.Duration)
			}
			out = append(out, opt(desc, func(s *v1alpha1.MemcachedSpec) { s.MaintenanceWindow = w.DeepCopy() }))
		}
		return out
	}()},
	{"discovery", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.Discovery = nil }),
		opt("{enabled: true}", func(s *v1alpha1.MemcachedSpec) { s.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true} }),
		opt("{enabled: false}", func(s *v1alpha1.MemcachedSpec) { s.Discovery = &v1alpha1.MemcachedDiscovery{} }),
	}},
	{"networkPolicy", []specOption{
		opt("nil", func(s *v1alpha1.MemcachedSpec) { s.NetworkPolicy = nil }),
		opt("{enabled: true}", func(s *v1alpha1.MemcachedSpec) { s.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{Enabled: true} }),
		opt("{enabled: true, from: [{podSelector: {role: web}}], monitoringFrom: [{ipBlock: 192.0.2.0/24}]}", func(s *v1alpha1.MemcachedSpec) {
			s.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{
				Enabled:        true,
				From:           []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}},
				MonitoringFrom: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}},
			}
		}),
		opt("{enabled: false}", func(s *v1alpha1.MemcachedSpec) { s.NetworkPolicy = &v1alpha1.MemcachedNetworkPolicy{} }),
	}},
}

// newSpec returns the spec that a creation with seed draws: each field at
// its first option half of the time.
func newSpec(seed int) v1alpha1.MemcachedSpec {
	rng := rand.New(rand.NewSource(int64(seed)))
	s := v1alpha1.MemcachedSpec{Size: 2}
	for _, f := range specFields {
		if rng.Intn(2) == 0 {
			continue
		}
		f.options[rng.Intn(len(f.options))].set(&s)
	}
	return s
}

// eventKind is what happens in one event of the model.
type eventKind int

const (
	evCreate     eventKind = iota // a user creates Memcached name, with the spec of seed a
	evEdit                        // a user sets field a of name's spec to its option b
	evDelete                      // a user deletes name; its children stay until evGC
	evGC                          // the garbage collector deletes the children of missing owners
	evTick                        // name's Deployment controller takes one step
	evSettle                      // name's pods roll and get Ready until the rollout completes
	evPodReady                    // name's pod a becomes Ready (b 1) or not (b 0)
	evPodDelete                   // name's pod a is deleted, as by an eviction
	evClock                       // the clock moves by clockSteps[a]
	evRestart                     // the leader restarts, with empty memory
	evLeader                      // the standby becomes the leader, and the leader the standby
	evImage                       // the operator's default image becomes image a, with a restart of both
	evSidecar                     // the operator's sidecar image becomes image a, with a restart of both
	evRelease                     // the operator is upgraded from an earlier release's template
	evHandEdit                    // someone edits name's child a in way b
	evHandDelete                  // someone deletes name's child a
)

// modelEvent is one event. Events name what they act on by name and by
// choice, and do nothing when it is not there, so that any subsequence of a
// sequence is a sequence too, as the shrinker needs.
type modelEvent struct {
	kind eventKind
	name string
	a, b int
}

// clockSteps are how far evClock moves the clock; 0 moves it to the next
// opening or close of a window in use.
var clockSteps = []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 72 * time.Hour, 0}

// handChildren are the children that evHandEdit and evHandDelete act on.
var handChildren = []string{"deployment", "service", "poddisruptionbudget", "configmap", "networkpolicy"}

// handEdits describe evHandEdit's ways, by child.
var handEdits = map[string][]string{
	"deployment":          {"sets the memcached container's image", "changes its memcached_cr label", "scales it to 5", "sets its maxSurge to 3"},
	"service":             {"changes its port", "drops its labels", "replaces it with one of its own, owned by nobody"},
	"poddisruptionbudget": {"sets its maxUnavailable to 2", "drops its labels"},
	"configmap":           {"writes version 1 with the current members", "writes what no sidecar can parse"},
	"networkpolicy":       {"admits every namespace", "drops its labels"},
}

func (e modelEvent) String() string {
	switch e.kind {
	case evCreate:
		b, _ := json.Marshal(newSpec(e.a))
		return fmt.Sprintf("create memcached %s with spec %s", e.name, b)
	case evEdit:
		f := specFields[e.a%len(specFields)]
		return fmt.Sprintf("edit memcached %s: spec.%s = %s", e.name, f.name, f.options[e.b%len(f.options)].desc)
	case evDelete:
		return fmt.Sprintf("delete memcached %s", e.name)
	case evGC:
		return "the garbage collector deletes the children of deleted Memcacheds"
	case evTick:
		return fmt.Sprintf("deployment %s: the controller takes a step", e.name)
	case evSettle:
		return fmt.Sprintf("deployment %s: the pods roll and get Ready until the rollout is complete", e.name)
	case evPodReady:
		return fmt.Sprintf("pod %d of %s becomes ready=%t", e.a, e.name, e.b == 1)
	case evPodDelete:
		return fmt.Sprintf("pod %d of %s is deleted", e.a, e.name)
	case evClock:
		if d := clockSteps[e.a%len(clockSteps)]; d > 0 {
			return fmt.Sprintf("the clock moves by %v", d)
		}
		return "the clock moves to the next opening or close of a window"
	case evRestart:
		return "the leader restarts"
	case evLeader:
		return "the leader changes"
	case evImage:
		return fmt.Sprintf("the operator restarts with --memcached-image=%s", modelImage(e.a))
	case evSidecar:
		return fmt.Sprintf("the operator restarts with --sidecar-image=%s", modelSidecar(e.a))
	case evRelease:
		return "the operator is upgraded from an earlier release, whose pod template differs"
	case evHandEdit:
		c := handChildren[e.a%len(handChildren)]
		ways := handEdits[c]
		return fmt.Sprintf("someone edits %s %s: %s", c, e.name, ways[e.b%len(ways)])
	case evHandDelete:
		return fmt.Sprintf("someone deletes %s %s", handChildren[e.a%len(handChildren)], e.name)
	}
	return fmt.Sprintf("event %d", e.kind)
}

func modelImage(i int) string {
	if i%3 == 0 {
		return memcachedtest.Image
	}
	return fmt.Sprintf("example.com/memcached:v%d", i%3)
}

func modelSidecar(i int) string {
	if i%3 == 0 {
		return memcachedtest.SidecarImage
	}
	return fmt.Sprintf("example.com/memcached-sidecar:v%d", i%3)
}

// eventWeights are how often the generator draws each kind.
var eventWeights = []struct {
	kind   eventKind
	weight int
}{
	{evCreate, 4}, {evEdit, 22}, {evDelete, 2}, {evGC, 3}, {evTick, 14}, {evSettle, 14},
	{evPodReady, 8}, {evPodDelete, 3}, {evClock, 10}, {evRestart, 3}, {evLeader, 3},
	{evImage, 2}, {evSidecar, 2}, {evRelease, 2}, {evHandEdit, 5}, {evHandDelete, 3},
}

// generate returns the configuration and the n events of seed. The
// sequence starts by creating every Memcached.
func generate(seed int64, n int) (modelConfig, []modelEvent) {
	rng := rand.New(rand.NewSource(seed))
	cfg := modelConfig{limit: 1 + rng.Intn(2), window: operatorWindows[rng.Intn(len(operatorWindows))]}
	total := 0
	for _, w := range eventWeights {
		total += w.weight
	}
	var events []modelEvent
	for _, name := range modelNames {
		events = append(events, modelEvent{kind: evCreate, name: name, a: rng.Intn(1 << 20)})
	}
	for len(events) < n {
		r := rng.Intn(total)
		var kind eventKind
		for _, w := range eventWeights {
			if r < w.weight {
				kind = w.kind
				break
			}
			r -= w.weight
		}
		e := modelEvent{kind: kind, name: modelNames[rng.Intn(len(modelNames))], a: rng.Intn(1 << 20), b: rng.Intn(1 << 20)}
		if kind == evEdit {
			e.a = rng.Intn(len(specFields))
		}
		events = append(events, e)
	}
	return cfg, events[:n]
}

// describe numbers events, and ends with the violation v, if any.
func describe(events []modelEvent, v *violation) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  %3d. %s\n", i+1, e)
	}
	if v != nil {
		fmt.Fprintf(&b, "  => %s: %s", v.invariant, v.msg)
	}
	return b.String()
}

// violation is an invariant that the model found broken.
type violation struct {
	invariant, msg string
}

func violated(invariant, format string, args ...interface{}) *violation {
	return &violation{invariant: invariant, msg: fmt.Sprintf(format, args...)}
}

// shrink returns the shortest subsequence of events that it finds to break
// invariant: it drops halves, then quarters, and so on down to single
// events, for as long as the rest still breaks it.
func shrink(cfg modelConfig, events []modelEvent, invariant string) []modelEvent {
	fails := func(evs []modelEvent) bool {
		_, v := runModel(cfg, evs)
		return v != nil && v.invariant == invariant
	}
	cur := append([]modelEvent(nil), events...)
	for chunk := len(cur) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(cur); {
			try := append(append([]modelEvent(nil), cur[:i]...), cur[i+chunk:]...)
			if fails(try) {
				cur = try
				continue
			}
			i += chunk
		}
	}
	// The violation may now come before the end: cut what follows it.
	if n, v := runModel(cfg, cur); v != nil {
		cur = cur[:n]
	}
	return cur
}

// model is the cluster and the operator of one run.
type model struct {
	cfg      modelConfig
	client   *modelClient
	handlers [2]*Handler
	queues   [2]*modelQueue
	active   int
	clock    time.Time
	image    string
	sidecar  string
	seq      int
	versions int
	// deliver holds the Memcacheds that the API server stored since the
	// handlers' SDK last delivered what it saw.
	deliver []*v1alpha1.Memcached
	// failed is the first violation that the client's checks found.
	failed *violation
	// discovery holds, by Memcached name, the highest discovery version
	// that the operator wrote and the text it wrote with it.
	discovery map[string]writtenDiscovery
	// observed holds the highest status.observedGeneration written, by UID.
	observed map[types.UID]int64
	// uids counts the Memcacheds created, for their UIDs.
	uids int
	// hashes caches desiredHash, by what it depends on.
	hashes map[hashKey]string
	// lastValid holds, by Memcached name, the last version whose spec the
	// operator accepts (memcached.ValidateSpec).
	lastValid map[string]*v1alpha1.Memcached
}

// validSpec returns m if the operator accepts its spec, else nil.
func validSpec(m *v1alpha1.Memcached) *v1alpha1.Memcached {
	if memcached.ValidateSpec(m) != nil {
		return nil
	}
	return m
}

type hashKey struct {
	uid                 types.UID
	generation          int64
	image, sidecarImage string
}

type writtenDiscovery struct {
	version int64
	text    string
}

// runModel runs events and returns how many ran, up to and including the
// one after which an invariant broke, and the violation, or nil.
func runModel(cfg modelConfig, events []modelEvent) (int, *violation) {
	md := &model{
		cfg:       cfg,
		clock:     memcachedtest.Now.Time,
		image:     memcachedtest.Image,
		sidecar:   memcachedtest.SidecarImage,
		discovery: map[string]writtenDiscovery{},
		observed:  map[types.UID]int64{},
		hashes:    map[hashKey]string{},
		lastValid: map[string]*v1alpha1.Memcached{},
	}
	md.client = &modelClient{fakeClient: newFakeClient(), md: md}
	md.client.monitoringServed = true
	md.handlers[0], md.queues[0] = md.newHandler(true)
	md.handlers[1], md.queues[1] = md.newHandler(false)
	for i, e := range events {
		if v := md.step(e); v != nil {
			return i + 1, v
		}
	}
	return len(events), nil
}

// newHandler returns a handler of the operator's current configuration,
// delivered every Memcached, with its queue, active or not.
func (md *model) newHandler(active bool) (*Handler, *modelQueue) {
	h := NewHandler(md.client, &record.FakeRecorder{}, md.image)
	h.UseSidecarImage(md.sidecar)
	h.PaceRolls(intstr.FromInt(md.cfg.limit))
	if md.cfg.window != nil {
		h.UseMaintenanceWindow(*md.cfg.window)
	}
	h.now = func() metav1.Time { return metav1.NewTime(md.clock) }
	h.queue.ShutDown()
	q := newModelQueue(md, active)
	h.queue = q
	for _, k := range sortedKeys(md.client.memcacheds) {
		h.memcacheds.store(k, md.client.memcacheds[k].DeepCopy())
		q.Add(k)
	}
	return h, q
}

// nextVersion returns a new resourceVersion.
func (md *model) nextVersion() string {
	md.versions++
	return strconv.Itoa(md.versions)
}

// renameUID gives the stored object o a UID of its own and returns it.
func (md *model) renameUID(o interface{ SetUID(types.UID) }) types.UID {
	md.seq++
	uid := types.UID(fmt.Sprintf("uid-%d", md.seq))
	o.SetUID(uid)
	return uid
}

// handle delivers the Memcached m, or its deletion, to both handlers, as
// their SDK would.
func (md *model) handle(m *v1alpha1.Memcached, deleted bool) {
	// A done context: the API monitor that a deletion starts stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, h := range md.handlers {
		if err := h.Handle(ctx, sdk.Event{Object: m.DeepCopy(), Deleted: deleted}); err != nil {
			panic(err)
		}
	}
}

// enqueue asks the leader to reconcile Memcached name, as a change of one of
// its children does.
func (md *model) enqueue(name string) {
	md.handlers[md.active].EnqueueMemcached("test", name)
}

// restart replaces the handler i with a new one, with empty memory.
func (md *model) restart(i int) {
	md.handlers[i], md.queues[i] = md.newHandler(i == md.active)
}

// stepState is what the checks compare after an event's reconciles.
type stepState struct {
	// templates holds, by name, the UID and template hash of the
	// Memcached's own Deployment before the reconciles.
	templates map[string]deploymentTemplate
	// edited is the Memcached a user edited or created, and userRoll
	// whether that asks for another pod template.
	edited   string
	userRoll bool
}

type deploymentTemplate struct {
	uid  types.UID
	hash string
}

// step runs e, the reconciles that follow it, and the checks.
func (md *model) step(e modelEvent) *violation {
	st := stepState{templates: map[string]deploymentTemplate{}}
	md.apply(e, &st)
	for _, name := range modelNames {
		if d := md.ownDeployment(name); d != nil {
			st.templates[name] = deploymentTemplate{uid: d.UID, hash: memcached.TemplateOf(d)}
		}
	}
	if v := md.drain(); v != nil {
		return v
	}
	return md.check(&st)
}

// apply makes event e happen in the cluster.
func (md *model) apply(e modelEvent, st *stepState) {
	k := "test/" + e.name
	m := md.client.memcacheds[k]
	switch e.kind {
	case evCreate:
		if m != nil {
			return
		}
		md.uids++
		m = memcachedtest.NewMemcached(e.name, 0)
		m.UID = types.UID(fmt.Sprintf("uid-%s-%d", e.name, md.uids))
		m.Spec = newSpec(e.a)
		if _, ok := discoveryText(md.client.configMaps[k]); !ok || !memcached.Discovered(m) {
			// Nothing in the cluster holds the discovery versions of a
			// deleted Memcached once its ConfigMap is gone (collected, or
			// deleted when discovery was turned off) or unreadable, and a
			// Memcached created without discovery reads none: such a one
			// starts afresh, a limit docs/limitations.md states. One
			// created with discovery while a readable one exists goes on
			// above it.
			delete(md.discovery, e.name)
		}
		md.lastValid[e.name] = validSpec(m)
		m.ResourceVersion = md.nextVersion()
		md.client.memcacheds[k] = m
		st.edited, st.userRoll = e.name, true
		md.handle(m, false)
	case evEdit:
		if m == nil {
			return
		}
		f := specFields[e.a%len(specFields)]
		edited := m.DeepCopy()
		f.options[e.b%len(f.options)].set(&edited.Spec)
		if reflect.DeepEqual(edited.Spec, m.Spec) {
			return
		}
		edited.Generation++
		edited.ResourceVersion = md.nextVersion()
		md.client.memcacheds[k] = edited
		st.edited = e.name
		// A user's change of the template is one from the last spec the
		// operator could apply: an edit it refuses, and one that takes it
		// back, change nothing it applied.
		st.userRoll = memcached.ValidateSpec(edited) == nil && (md.lastValid[e.name] == nil || md.desiredHash(md.lastValid[e.name]) != md.desiredHash(edited))
		if v := validSpec(edited); v != nil {
			md.lastValid[e.name] = v
		}
		md.handle(edited, false)
	case evDelete:
		if m == nil {
			return
		}
		delete(md.client.memcacheds, k)
		md.handle(m, true)
	case evGC:
		md.collectGarbage()
	case evTick, evSettle:
		d := md.client.deployments[k]
		if d == nil {
			return
		}
		if e.kind == evTick {
			md.tick(d)
		} else {
			md.settle(d)
		}
		md.enqueue(e.name)
	case evPodReady, evPodDelete:
		d := md.client.deployments[k]
		if d == nil {
			return
		}
		pods := md.podsOf(d)
		if len(pods) == 0 {
			return
		}
		p := pods[e.a%len(pods)]
		if e.kind == evPodReady {
			setReady(p, e.b%2 == 1)
		} else {
			md.removePod(p)
		}
		md.observe(d)
		md.enqueue(e.name)
	case evClock:
		md.clock = md.clock.Add(md.clockStep(e.a))
		// The timers that the handler set fire; so does the resync.
		for _, name := range modelNames {
			md.enqueue(name)
		}
	case evRestart:
		md.restart(md.active)
	case evLeader:
		md.queues[md.active].active = false
		md.active = 1 - md.active
		q := newModelQueue(md, true)
		md.handlers[md.active].queue = q
		md.queues[md.active] = q
		keys := md.handlers[md.active].memcacheds.keys()
		sort.Strings(keys)
		for _, key := range keys {
			q.Add(key)
		}
	case evImage, evSidecar:
		if e.kind == evImage {
			md.image = modelImage(e.a)
		} else {
			md.sidecar = modelSidecar(e.a)
		}
		md.restart(0)
		md.restart(1)
	case evRelease:
		for _, name := range modelNames {
			md.earlierRelease(name)
		}
		md.restart(0)
		md.restart(1)
	case evHandEdit:
		md.handEdit(e)
	case evHandDelete:
		md.handDelete(e)
	}
}

// clockStep returns how far clockSteps[i] moves the clock now.
func (md *model) clockStep(i int) time.Duration {
	if d := clockSteps[i%len(clockSteps)]; d > 0 {
		return d
	}
	next := md.clock.Add(7 * 24 * time.Hour)
	windows := []memcached.Window{}
	if md.cfg.window != nil {
		windows = append(windows, *md.cfg.window)
	}
	for _, w := range specWindows[1:] {
		mw, _ := memcached.WindowOf(w)
		windows = append(windows, mw)
	}
	for _, w := range windows {
		if _, until := w.At(md.clock); until.Before(next) {
			next = until
		}
	}
	return next.Sub(md.clock)
}

// earlierRelease makes the settled Deployment of name the one that an
// earlier release of the operator made for the same spec, whose readiness
// probe differed, with pods of that template, as if the operator had just
// been upgraded from it.
func (md *model) earlierRelease(name string) {
	d := md.ownDeployment(name)
	if d == nil || !md.settled(d) || len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].ReadinessProbe == nil {
		return
	}
	hash := "e" + memcached.TemplateOf(d)
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.PeriodSeconds += 5
	d.Spec.Template.Annotations[memcached.TemplateHashAnnotation] = hash
	d.Generation++
	ctrl := controllerHash(d)
	for _, p := range md.podsOf(d) {
		p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = ctrl
		p.OwnerReferences[0].Name = d.Name + "-" + ctrl
		p.Annotations[memcached.TemplateHashAnnotation] = hash
	}
	md.observe(d)
}

// settled reports whether d's rollout is complete: its controller has
// observed it and every pod runs its template, Ready.
func (md *model) settled(d *appsv1.Deployment) bool {
	pods := md.podsOf(d)
	if !memcached.RolloutComplete(d) || int32(len(pods)) != replicas(d) {
		return false
	}
	for _, p := range pods {
		if !podIsReady(p) || p.Annotations[memcached.TemplateHashAnnotation] != memcached.TemplateOf(d) {
			return false
		}
	}
	return true
}

// collectGarbage deletes every child whose controller is a Memcached that
// no longer exists, and a deleted Deployment's pods.
func (md *model) collectGarbage() {
	live := map[types.UID]bool{}
	for _, m := range md.client.memcacheds {
		live[m.UID] = true
	}
	orphan := func(o metav1.Object) bool {
		c := metav1.GetControllerOf(o)
		return c != nil && c.Kind == v1alpha1.Kind && !live[c.UID]
	}
	for _, k := range sortedKeys(md.client.deployments) {
		if d := md.client.deployments[k]; orphan(d) {
			for _, p := range md.podsOf(d) {
				md.removePod(p)
			}
			delete(md.client.deployments, k)
			md.enqueue(d.Name)
		}
	}
	for _, k := range sortedKeys(md.client.services) {
		if orphan(md.client.services[k]) {
			delete(md.client.services, k)
			md.enqueue(strings.TrimPrefix(k, "test/"))
		}
	}
	for _, k := range sortedKeys(md.client.pdbs) {
		if orphan(md.client.pdbs[k]) {
			delete(md.client.pdbs, k)
			md.enqueue(strings.TrimPrefix(k, "test/"))
		}
	}
	for _, k := range sortedKeys(md.client.configMaps) {
		if orphan(md.client.configMaps[k]) {
			delete(md.client.configMaps, k)
			md.enqueue(strings.TrimPrefix(k, "test/"))
		}
	}
	for _, k := range sortedKeys(md.client.serviceMonitors) {
		if orphan(md.client.serviceMonitors[k]) {
			delete(md.client.serviceMonitors, k)
		}
	}
	for _, k := range sortedKeys(md.client.prometheusRules) {
		if orphan(md.client.prometheusRules[k]) {
			delete(md.client.prometheusRules, k)
		}
	}
}

// handEdit changes a child of e.name as someone with kubectl would.
func (md *model) handEdit(e modelEvent) {
	k := "test/" + e.name
	child := handChildren[e.a%len(handChildren)]
	way := e.b % len(handEdits[child])
	switch child {
	case "deployment":
		d := md.client.deployments[k]
		if d == nil {
			return
		}
		switch way {
		case 0:
			d.Spec.Template.Spec.Containers[0].Image = "example.com/someone:else"
		case 1:
			d.Labels = map[string]string{memcached.AppLabel: memcached.AppLabelValue, memcached.CRLabel: "someone"}
		case 2:
			d.Spec.Replicas = memcachedtest.Int32p(5)
		case 3:
			surge := intstr.FromInt(3)
			if d.Spec.Strategy.RollingUpdate == nil {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
			}
			d.Spec.Strategy.RollingUpdate.MaxSurge = &surge
		}
		if way != 2 {
			// What the operator applied no longer holds its values.
			d.Annotations[memcached.ObservedDigestAnnotation] = "edited"
		}
		if way != 1 {
			d.Generation++
		}
	case "service":
		s := md.client.services[k]
		if s == nil {
			return
		}
		switch way {
		case 0:
			s.Spec.Ports[0].Port = 1
		case 1:
			s.Labels = nil
		case 2:
			md.seq++
			s = memcached.NewService(&v1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: "test"}})
			s.OwnerReferences = nil
			s.UID = types.UID(fmt.Sprintf("uid-%d", md.seq))
			md.client.services[k] = s
		}
	case "poddisruptionbudget":
		p := md.client.pdbs[k]
		if p == nil {
			return
		}
		if way == 0 {
			two := intstr.FromInt(2)
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, &two
		} else {
			p.Labels = nil
		}
	case "configmap":
		cm := md.client.configMaps[k]
		if cm == nil {
			return
		}
		if way == 0 {
			c, _ := discoveryText(cm)
			cm.Data[memcached.DiscoveryKey] = sidecar.Cluster{Version: 1, Nodes: c.Nodes}.Text()
		} else {
			cm.Data[memcached.DiscoveryKey] = "not a cluster"
		}
	case "networkpolicy":
		p := md.client.networkPolicies[k]
		if p == nil {
			return
		}
		if way == 0 {
			p.Spec.Ingress[0].From = append(p.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
		} else {
			p.Labels = nil
		}
	}
	md.enqueue(e.name)
}

// handDelete deletes a child of e.name; a Deployment's pods go with it.
func (md *model) handDelete(e modelEvent) {
	k := "test/" + e.name
	switch handChildren[e.a%len(handChildren)] {
	case "deployment":
		d := md.client.deployments[k]
		if d == nil {
			return
		}
		for _, p := range md.podsOf(d) {
			md.removePod(p)
		}
		delete(md.client.deployments, k)
	case "service":
		delete(md.client.services, k)
	case "poddisruptionbudget":
		delete(md.client.pdbs, k)
	case "configmap":
		delete(md.client.configMaps, k)
	case "networkpolicy":
		delete(md.client.networkPolicies, k)
	}
	md.enqueue(e.name)
}

// drain runs the leader's reconciles until its queue is empty: first what
// is due, then, for a few rounds, what failed, as the backoff would.
func (md *model) drain() *violation {
	q := md.queues[md.active]
	q.release()
	for round := 0; ; round++ {
		for q.Len() > 0 {
			item, _ := q.Get()
			if v := md.reconcile(item.(string)); v != nil {
				return v
			}
		}
		if len(q.retry) == 0 || round == 2 {
			return nil
		}
		q.releaseRetries()
	}
}

// reconcile runs the leader's reconcile of key and checks that it wrote
// only the children of that Memcached.
func (md *model) reconcile(k string) *violation {
	h, q := md.handlers[md.active], md.queues[md.active]
	name := strings.TrimPrefix(k, "test/")
	owners := map[string]types.UID{}
	for _, kind := range childKinds {
		owners[kind] = controllerUID(md.client.stored(childResources[kind], "test", name))
	}
	var uid types.UID
	if m := md.client.memcacheds[k]; m != nil {
		uid = m.UID
	}
	md.client.actions, md.client.created = nil, nil
	md.client.patches, md.client.applied = map[string]string{}, map[string]*unstructured.Unstructured{}
	err := h.reconcileKey(k)
	h.handleResult(q, k, err)
	if md.failed != nil {
		return md.failed
	}
	if v := md.checkOwnWrites(k, uid, owners); v != nil {
		return v
	}
	delivered := md.deliver
	md.deliver = nil
	for _, m := range delivered {
		md.handle(m, false)
	}
	return nil
}

// checkOwnWrites checks the writes of the reconcile of k, whose Memcached
// had uid, "" for none: each names k's Memcached, and changes or deletes
// only a child that uid controlled before it (owners, by kind), or creates
// one that uid controls.
func (md *model) checkOwnWrites(k string, uid types.UID, owners map[string]types.UID) *violation {
	for _, a := range md.client.actions {
		fields := strings.Fields(a)
		verb := fields[0]
		if verb == "get" || verb == "read" || verb == "list" {
			continue
		}
		target, kind := "", fields[1]
		for _, f := range fields {
			if strings.HasPrefix(f, "test/") {
				target = f
			}
		}
		if verb == "convert" {
			kind = "deployment"
		}
		if target != k {
			return violated("owned", "the reconcile of %s wrote %q: another Memcached's", k, a)
		}
		if uid == "" {
			return violated("owned", "the reconcile of %s, which no longer exists, wrote %q", k, a)
		}
		if verb == "create" || verb == "update" {
			continue
		}
		if owners[kind] != uid {
			return violated("owned", "the reconcile of %s (uid %s) wrote %q to a child controlled by %q", k, uid, a, owners[kind])
		}
	}
	for _, c := range md.client.created {
		if got := controllerUID(c); got != uid || "test/"+c.GetName() != k {
			return violated("owned", "the reconcile of %s (uid %s) created %s %s controlled by %q", k, uid, c.GetKind(), c.GetName(), got)
		}
	}
	return nil
}

// checkStatusWrite checks a status write to stored, the Memcached as the
// API server holds it.
func (md *model) checkStatusWrite(stored *v1alpha1.Memcached, s v1alpha1.MemcachedStatus) {
	if md.failed != nil {
		return
	}
	switch {
	case s.ObservedGeneration < md.observed[stored.UID]:
		md.failed = violated("observed", "memcached %s: status.observedGeneration written as %d after %d", stored.Name, s.ObservedGeneration, md.observed[stored.UID])
	case s.ObservedGeneration > stored.Generation:
		md.failed = violated("observed", "memcached %s: status.observedGeneration written as %d, above its generation %d", stored.Name, s.ObservedGeneration, stored.Generation)
	case s.DiscoveryVersion < stored.Status.DiscoveryVersion:
		md.failed = violated("discovery", "memcached %s: status.discoveryVersion written as %d after %d", stored.Name, s.DiscoveryVersion, stored.Status.DiscoveryVersion)
	}
	md.observed[stored.UID] = max(md.observed[stored.UID], s.ObservedGeneration)
}

// checkDiscoveryWrite checks what the operator wrote into the discovery
// ConfigMap of Memcached name: a membership at a version above every one
// written for the name before, or the same version with the same members.
func (md *model) checkDiscoveryWrite(name string, cm *corev1.ConfigMap) {
	if md.failed != nil || cm == nil {
		return
	}
	text := cm.Data[memcached.DiscoveryKey]
	c, ok := discoveryText(cm)
	last := md.discovery[name]
	switch {
	case !ok:
		md.failed = violated("discovery", "configmap %s: the operator wrote %q, which no sidecar reads", name, text)
	case c.Version < last.version:
		md.failed = violated("discovery", "configmap %s: the discovery version went back from %d to %d (%q after %q)", name, last.version, c.Version, text, last.text)
	case c.Version == last.version && text != last.text:
		md.failed = violated("discovery", "configmap %s: version %d written for another membership (%q after %q)", name, c.Version, text, last.text)
	default:
		md.discovery[name] = writtenDiscovery{version: c.Version, text: text}
	}
}

// ownDeployment returns the Deployment of Memcached name if the Memcached
// exists and controls it, else nil.
func (md *model) ownDeployment(name string) *appsv1.Deployment {
	m := md.client.memcacheds["test/"+name]
	d := md.client.deployments["test/"+name]
	if m == nil || d == nil || !metav1.IsControlledBy(d, m) {
		return nil
	}
	return d
}

// desiredHash returns the hash of the pod template that m asks of the
// operator as it is now configured.
func (md *model) desiredHash(m *v1alpha1.Memcached) string {
	k := hashKey{uid: m.UID, generation: m.Generation, image: md.image, sidecarImage: md.sidecar}
	if h, ok := md.hashes[k]; ok {
		return h
	}
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, md.image, md.sidecar))
	if err != nil {
		panic(err)
	}
	md.hashes[k] = memcached.ManifestTemplateHash(u)
	return md.hashes[k]
}

// windowOpen reports whether m's maintenance window, if it has one, is open.
func (md *model) windowOpen(m *v1alpha1.Memcached) bool {
	w := md.cfg.window
	if m.Spec.MaintenanceWindow != nil {
		mw, err := memcached.WindowOf(m.Spec.MaintenanceWindow)
		if err != nil {
			return true
		}
		w = &mw
	}
	if w == nil {
		return true
	}
	// The model's own reading of a weekly window, not Window.At: open when
	// one of the last eight days is its day and the clock is within
	// Duration of that day's start.
	t := md.clock.UTC()
	for days := range 8 {
		day := t.AddDate(0, 0, -days)
		if day.Weekday() != w.Day {
			continue
		}
		start := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC).Add(w.Start)
		if !t.Before(start) && t.Before(start.Add(w.Duration)) {
			return true
		}
	}
	return false
}

// check checks the invariants after an event's reconciles.
func (md *model) check(st *stepState) *violation {
	inFlight := []string{}
	for _, name := range modelNames {
		k := "test/" + name
		m := md.client.memcacheds[k]
		if m == nil {
			continue
		}
		valid := memcached.ValidateSpec(m) == nil
		d := md.ownDeployment(name)
		if m.Status.ObservedGeneration > m.Generation {
			return violated("observed", "memcached %s: status.observedGeneration %d above its generation %d", name, m.Status.ObservedGeneration, m.Generation)
		}
		if !valid && m.Status.ObservedGeneration >= m.Generation {
			return violated("applied", "memcached %s: status.observedGeneration %d claims generation %d, whose spec is refused", name, m.Status.ObservedGeneration, m.Generation)
		}
		if d == nil {
			continue
		}
		hash, want := memcached.TemplateOf(d), md.desiredHash(m)
		paced := d.Spec.Template.Annotations[memcached.PacedRollAnnotation] != ""
		pods := md.podsOf(d)
		if paced {
			for _, p := range pods {
				if p.Annotations[memcached.TemplateHashAnnotation] != hash {
					inFlight = append(inFlight, name)
					break
				}
			}
		}
		// windowed: a new template that no user asked for in this event.
		if before, ok := st.templates[name]; ok && before.uid == d.UID && before.hash != hash && !(st.edited == name && st.userRoll) {
			switch {
			case !md.windowOpen(m):
				return violated("windowed", "deployment %s: the operator's change rolled at %s, outside the maintenance window (template %s to %s)", name, md.clock.Format("Mon 15:04"), before.hash, hash)
			case !paced:
				return violated("windowed", "deployment %s: the operator's change rolled without a roll slot (template %s to %s, not marked %s)", name, before.hash, hash, memcached.PacedRollAnnotation)
			case hash != want:
				return violated("windowed", "deployment %s: rolled to template %s, which is not the operator's, %s", name, hash, want)
			}
		}
		if !valid {
			continue
		}
		// applied: the spec is in the Deployment.
		if st.edited == name && st.userRoll && hash != want {
			return violated("applied", "deployment %s: template %s after the user's change, want %s", name, hash, want)
		}
		if replicas(d) != m.Spec.Size {
			return violated("applied", "deployment %s: %d replicas, want spec.size %d", name, replicas(d), m.Spec.Size)
		}
		if m.Status.ObservedGeneration != m.Generation {
			return violated("applied", "memcached %s: status.observedGeneration %d, want its generation %d", name, m.Status.ObservedGeneration, m.Generation)
		}
		if v := md.checkConditions(m, d, pods); v != nil {
			return v
		}
		if v := md.checkDiscovery(m, pods); v != nil {
			return v
		}
	}
	if len(inFlight) > md.cfg.limit {
		return violated("paced", "%d Memcacheds in a paced roll, %v, above --max-concurrent-rolls=%d", len(inFlight), inFlight, md.cfg.limit)
	}
	return nil
}

// checkConditions checks m's status against the pods of d, its own.
func (md *model) checkConditions(m *v1alpha1.Memcached, d *appsv1.Deployment, pods []*corev1.Pod) *violation {
	s := m.Status
	var names []string
	ready := int32(0)
	for _, p := range pods {
		names = append(names, p.Name)
		if podIsReady(p) {
			ready++
		}
	}
	sort.Strings(names)
	if s.ReadyReplicas != ready || s.Replicas != int32(len(pods)) || strings.Join(s.Nodes, ",") != strings.Join(names, ",") {
		return violated("conditions", "memcached %s: status counts %d/%d pods %v, want %d/%d %v", m.Name, s.ReadyReplicas, s.Replicas, s.Nodes, ready, len(pods), names)
	}
	available := memcached.FindCondition(s.Conditions, v1alpha1.MemcachedAvailable)
	if want := ready >= m.Spec.Size; available == nil || (available.Status == corev1.ConditionTrue) != want || available.ObservedGeneration != m.Generation {
		return violated("conditions", "memcached %s: Available %+v with %d of %d pods Ready", m.Name, available, ready, m.Spec.Size)
	}
	if p := memcached.FindCondition(s.Conditions, v1alpha1.MemcachedProgressing); p != nil && p.Status == corev1.ConditionFalse && p.Reason == memcached.ReasonComplete {
		for _, pod := range pods {
			if pod.Annotations[memcached.TemplateHashAnnotation] != memcached.TemplateOf(d) {
				return violated("conditions", "memcached %s: Progressing=False Complete while pod %s runs template %s, not %s", m.Name, pod.Name, pod.Annotations[memcached.TemplateHashAnnotation], memcached.TemplateOf(d))
			}
		}
		if int32(len(pods)) != m.Spec.Size || ready != m.Spec.Size {
			return violated("conditions", "memcached %s: Progressing=False Complete with %d pods, %d Ready, of %d", m.Name, len(pods), ready, m.Spec.Size)
		}
	}
	return nil
}

// checkDiscovery checks that the discovery ConfigMap of m, when m has
// discovery and nothing of another owner holds a name of its children,
// lists m's Ready pods at the version its status records.
func (md *model) checkDiscovery(m *v1alpha1.Memcached, pods []*corev1.Pod) *violation {
	if !memcached.Discovered(m) {
		return nil
	}
	for _, kind := range childKinds {
		if o := md.client.stored(childResources[kind], m.Namespace, m.Name); o != nil && !metav1.IsControlledBy(o, m) {
			return nil
		}
	}
	cm := md.client.configMaps[key(m.Namespace, m.Name)]
	c, ok := discoveryText(cm)
	if !ok {
		return violated("discovery", "memcached %s: discovery is on, and its configmap holds no membership: %v", m.Name, cm)
	}
	// The model's own reading of the membership, not memcached.ReadyNodes.
	var listed, ready []string
	for _, n := range c.Nodes {
		listed = append(listed, n.IP.String())
	}
	for _, p := range pods {
		if podIsReady(p) {
			ready = append(ready, p.Status.PodIP)
		}
	}
	sort.Strings(listed)
	sort.Strings(ready)
	if strings.Join(listed, " ") != strings.Join(ready, " ") {
		return violated("discovery", "configmap %s lists %q, not the Ready pods %v", m.Name, cm.Data[memcached.DiscoveryKey], ready)
	}
	if m.Status.DiscoveryVersion != c.Version {
		return violated("discovery", "memcached %s: status.discoveryVersion %d, while its configmap holds version %d", m.Name, m.Status.DiscoveryVersion, c.Version)
	}
	return nil
}
