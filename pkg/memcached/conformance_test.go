package memcached_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// update rewrites the conformance corpus instead of comparing it.
var update = flag.Bool("update", false, "rewrite testdata/conformance-corpus.json from the allow-list, and testdata/prometheusrule-shop-*.yaml from rules.yaml")

// corpusFile is where TestConformance (test/e2e) reads the corpus.
const corpusFile = "testdata/conformance-corpus.json"

// ConformanceCase is one spec of the conformance corpus: what the operator
// makes of it, for TestConformance to run memcached with and to ask the
// API server about.
type ConformanceCase struct {
	Name string `json:"name"`
	// Spec is the Memcached's spec.
	Spec v1alpha1.MemcachedSpec `json:"spec"`
	// Command is the memcached container's command the operator builds.
	Command []string `json:"command"`
	// MemoryLimit is the container's memory limit in bytes, set or
	// defaulted; 0 for none. TestConformance runs memcached under it with a
	// full cache.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
	// Settings are what memcached's `stats settings` must read when it
	// takes each option as written.
	Settings map[string]string `json:"settings,omitempty"`
	// Invalid is ValidateSpec's refusal, "" when it accepts the spec.
	Invalid string `json:"invalid,omitempty"`
	// Policy, when set, says which bound of the operator's own refuses the
	// spec although memcached may run it: the form of an item, a bound
	// below memcached's, an option the operator does not allow, or the
	// memory margin.
	Policy string `json:"policy,omitempty"`
}

// The policies of ConformanceCase.Policy.
const (
	policyForm       = "form: each item is one option as --name=value or --flag, with a plain number"
	policyBound      = "bound: below what memcached runs with"
	policyNotAllowed = "not allowed: an option or suboption outside the allow-list"
	policyConnLimit  = "conn-limit: 16 per thread and 32 leave connections for clients"
	policyMemory     = "memory: the cache and 48 MiB must fit 7/8 of the limit, of at least 64Mi"
)

// TestConformanceCorpus checks that testdata/conformance-corpus.json is
// what the allow-list generates, and rewrites it with -update.
func TestConformanceCorpus(t *testing.T) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(conformanceCorpus(t)); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(corpusFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, b.Bytes()) {
		t.Errorf("%s is stale: run go test ./pkg/memcached -run TestConformanceCorpus -update", corpusFile)
	}
}

// corpusValue is one value of an option for the corpus, and whether a
// policy refuses it.
type corpusValue struct {
	value  string
	policy string
}

// corpusValues returns the values at and beyond the bounds of r, and
// malformed ones.
func corpusValues(r *memcached.ValueRule) []corpusValue {
	var vs []corpusValue
	add := func(v, policy string) {
		for _, o := range vs {
			if o.value == v {
				return
			}
		}
		vs = append(vs, corpusValue{v, policy})
	}
	switch r.Kind {
	case memcached.WholeNumber:
		if r.Min > 0 {
			add(strconv.FormatInt(r.Min-1, 10), "")
		}
		add(strconv.FormatInt(r.Min, 10), "")
		add(strconv.FormatInt(r.Min+1, 10), "")
		add(strconv.FormatInt(r.Max, 10), "")
		if r.PolicyMax {
			add(strconv.FormatInt(r.Max+1, 10), policyBound)
		} else {
			add(strconv.FormatInt(r.Max+1, 10), "")
		}
		add("-1", policyForm)
		add("+"+strconv.FormatInt(r.Min+1, 10), policyForm)
		add("0"+strconv.FormatInt(r.Min+1, 10), policyForm)
		add(strconv.FormatInt(r.Min+1, 10)+".5", "")
		add(strconv.FormatInt(r.Min+1, 10)+"x", "")
		add("99999999999", "")
	case memcached.Decimal:
		add(strconv.FormatInt(r.Min, 10), "")
		add(strconv.FormatInt(r.Min, 10)+".0", "")
		add(strconv.FormatInt(r.Min, 10)+".01", "")
		add("0.5", "")
		add("1.25", "")
		add("2", "")
		add("1000000", "")
		add("1e1", policyForm)
		add("-2", "")
		add("2x", "")
	case memcached.OneOf:
		for _, n := range r.Names {
			add(n, "")
		}
		add(strings.ToUpper(r.Names[0]), "")
		add("x", "")
	case memcached.Size:
		add(strconv.FormatInt(r.Min/1024-1, 10)+"k", "")
		add(strconv.FormatInt(r.Min/1024, 10)+"k", "")
		add(strconv.FormatInt(r.Min/1024+1, 10)+"k", "")
		add(strconv.FormatInt(r.Min+r.Min/2, 10), "")
		add(strconv.FormatInt(2*r.Min, 10), "")
		add("1m", "")
		add("1023", "")
		add("1024", "")
		add("1.5m", "")
		add("1g", "")
		add("x", "")
	}
	return vs
}

// typicalValue is a value r accepts.
func typicalValue(r *memcached.ValueRule) string {
	switch r.Kind {
	case memcached.WholeNumber:
		return strconv.FormatInt(r.Min+1, 10)
	case memcached.Decimal:
		return "2"
	case memcached.OneOf:
		return r.Names[0]
	case memcached.Size:
		return "1m"
	}
	return "no_lru_crawler"
}

// expectedSetting is what memcached's `stats settings` reads for value of
// a rule, as written: the number, the size in bytes, the factor to two
// places, or the name. A value memcached cannot read as written is
// returned as it is, which no setting reads.
func expectedSetting(r *memcached.ValueRule, value string) string {
	switch r.Kind {
	case memcached.Decimal:
		if f, err := strconv.ParseFloat(value, 64); err == nil && !strings.ContainsAny(value, "eE") {
			return fmt.Sprintf("%.2f", f)
		}
	case memcached.Size:
		if b := memcached.ItemSizeBytes("--max-item-size=" + value); b > 0 {
			return strconv.FormatInt(b, 10)
		}
	case memcached.OneOf:
		if read, ok := r.Reads[value]; ok {
			return read
		}
	}
	return value
}

// item is one item of spec.extraArgs for the corpus, with the settings
// memcached must read for it and a policy that refuses it, if any.
type item struct {
	args     []string
	settings map[string]string
	policy   string
}

// corpusItems returns, for each option of the allow-list, its values at
// and beyond its bounds, and the forms spec.extraArgs refuses: the value
// as a separate item, the short option, a flag with a value.
func corpusItems() []item {
	var items []item
	for _, o := range memcached.ExtraArgOptions {
		long := "--" + o.Name
		if o.Value == nil {
			items = append(items,
				item{args: []string{long}, settings: flagSettings(o)},
				item{args: []string{long + "=1"}, policy: policyForm},
				item{args: []string{"-" + o.Short}, settings: flagSettings(o), policy: policyForm})
			continue
		}
		if o.Value.Kind == memcached.Suboptions {
			items = append(items, extendedItems()...)
		} else {
			for _, v := range corpusValues(o.Value) {
				items = append(items, item{args: []string{long + "=" + v.value}, settings: map[string]string{o.Setting: expectedSetting(o.Value, v.value)}, policy: v.policy})
			}
		}
		typical := typicalValue(o.Value)
		items = append(items,
			item{args: []string{long, typical}, policy: policyForm},
			item{args: []string{"-" + o.Short, typical}, policy: policyForm},
			item{args: []string{"-" + o.Short + typical}, policy: policyForm},
			// Alone and last, the option takes the operator's -m as its value.
			item{args: []string{long}, policy: policyForm})
	}
	// Options the operator sets or that stop memcached from serving, and
	// one it serves with but the allow-list leaves out.
	for _, a := range []string{"--port=1", "--memory-limit=10", "--daemon", "--enable-shutdown"} {
		items = append(items, item{args: []string{a}, policy: policyNotAllowed})
	}
	return items
}

// flagSettings returns what a flag's setting reads with the flag given.
func flagSettings(o memcached.ExtraArgOption) map[string]string {
	if o.Setting == "" {
		return nil
	}
	return map[string]string{o.Setting: o.FlagSetting}
}

// extendedItems returns --extended items: each suboption of the
// allow-list with its values, two together, the -o form, and suboptions
// memcached knows but the allow-list leaves out or does not know at all.
func extendedItems() []item {
	var items []item
	for _, o := range memcached.ExtendedOptions {
		if o.Value == nil {
			items = append(items,
				item{args: []string{"--extended=" + o.Name}, settings: flagSettings(o)},
				item{args: []string{"--extended=" + o.Name + "=1"}, policy: policyForm})
			continue
		}
		for _, v := range corpusValues(o.Value) {
			items = append(items, item{args: []string{"--extended=" + o.Name + "=" + v.value}, settings: map[string]string{o.Setting: expectedSetting(o.Value, v.value)}, policy: v.policy})
		}
	}
	first, second := memcached.ExtendedOptions[0], memcached.ExtendedOptions[len(memcached.ExtendedOptions)-1]
	pair := first.Name + "=" + typicalValue(first.Value) + "," + second.Name + "=" + typicalValue(second.Value)
	items = append(items,
		item{args: []string{"--extended=" + pair}, settings: map[string]string{first.Setting: typicalValue(first.Value), second.Setting: typicalValue(second.Value)}},
		item{args: []string{"--extended=" + pair + ","}, policy: policyForm},
		item{args: []string{"--extended=foo"}},
		item{args: []string{"--extended=ssl_verify_mode=0"}, policy: policyNotAllowed},
		item{args: []string{"--extended=tail_repair_time=1"}, policy: policyNotAllowed})
	return items
}

// conflictItems returns items whose options must fit each other, at the
// bounds of extraArgsConflict: hashpower against the item lock table of a
// thread count, and conn-limit against the thread count.
func conflictItems() []item {
	var items []item
	for _, threads := range []int64{3, 4, 5, 10, 11, 20, 21, 64} {
		lock := memcached.ItemLockPower(threads)
		conn := fmt.Sprintf("--conn-limit=%d", 16*threads) // enough for 64 threads
		for _, hp := range []int64{lock, lock + 1} {
			items = append(items, item{args: []string{fmt.Sprintf("--threads=%d", threads), conn, fmt.Sprintf("--extended=hashpower=%d", hp)},
				settings: map[string]string{"num_threads": strconv.FormatInt(threads, 10), "hashpower_init": strconv.FormatInt(hp, 10)}})
		}
	}
	for _, threads := range []int64{1, 2, 4, 64} {
		least := max(memcached.ConnsPerThread*threads, memcached.MinConnLimit)
		items = append(items,
			item{args: []string{fmt.Sprintf("--threads=%d", threads), fmt.Sprintf("--conn-limit=%d", least-1)}, policy: policyConnLimit},
			item{args: []string{fmt.Sprintf("--threads=%d", threads), fmt.Sprintf("--conn-limit=%d", least)},
				settings: map[string]string{"num_threads": strconv.FormatInt(threads, 10), "maxconns": strconv.FormatInt(least, 10)}})
	}
	return items
}

// memoryCase is a memory limit, set or defaulted, and a memoryMB.
type memoryCase struct {
	resources *corev1.ResourceRequirements
	memoryMB  *int32
	itemSize  string
}

// memoryCases returns memoryMB at and beyond the cache each limit allows,
// for the default limit, limits around the smallest, and no limit; and
// --max-item-size against the cache.
func memoryCases() []memoryCase {
	var cases []memoryCase
	limits := []*corev1.ResourceRequirements{nil, {}}
	for _, l := range []string{"63Mi", memcached.MinMemoryLimit, "100Mi", "128Mi", "256Mi"} {
		limits = append(limits, withMemoryLimit(l))
	}
	for _, r := range limits {
		m := memcachedtest.NewMemcached("corpus", 1)
		m.Spec.Resources = r
		derived := memcached.CacheMB(m)
		cases = append(cases, memoryCase{resources: r})
		for _, mb := range []int32{derived, derived + 1, 2 * (derived + memcached.MemcachedOverheadMB)} {
			cases = append(cases, memoryCase{resources: r, memoryMB: memcachedtest.Int32p(mb)})
		}
	}
	for _, mb := range []int32{1, 2, 16} {
		half := int64(mb) * memcached.Mebibyte / 2
		for _, size := range []int64{half, half + memcached.SlabChunkBytes} {
			if size%memcached.SlabChunkBytes == 0 {
				cases = append(cases, memoryCase{memoryMB: memcachedtest.Int32p(mb), itemSize: fmt.Sprintf("%dk", size/1024)})
			}
		}
		cases = append(cases, memoryCase{memoryMB: memcachedtest.Int32p(mb)})
	}
	return cases
}

// conformanceCorpus returns the corpus: every item and conflict, and every
// memory case, with what the operator makes of each.
func conformanceCorpus(t *testing.T) []ConformanceCase {
	var cases []ConformanceCase
	for _, it := range append(corpusItems(), conflictItems()...) {
		m := memcachedtest.NewMemcached("corpus", 1)
		m.Spec.ExtraArgs = it.args
		cases = append(cases, newCase(t, strings.Join(it.args, " "), m, it.settings, it.policy))
	}
	for _, mc := range memoryCases() {
		m := memcachedtest.NewMemcached("corpus", 1)
		m.Spec.Resources, m.Spec.MemoryMB = mc.resources, mc.memoryMB
		var settings map[string]string
		if mc.itemSize != "" {
			m.Spec.ExtraArgs = []string{"--max-item-size=" + mc.itemSize}
			settings = map[string]string{"item_size_max": strconv.FormatInt(memcached.ItemSizeBytes(m.Spec.ExtraArgs[0]), 10)}
		}
		name := "memoryMB " + map[bool]string{true: strconv.Itoa(int(derefInt32(mc.memoryMB))), false: "unset"}[mc.memoryMB != nil]
		limit, policy := memoryLimit(m)
		switch {
		case m.Spec.Resources == nil:
			name += ", resources unset (limit 128Mi)"
		case limit == 0:
			name += ", resources without a limit"
		default:
			name += ", limit " + m.Spec.Resources.Limits.Memory().String()
		}
		if mc.itemSize != "" {
			name += ", " + m.Spec.ExtraArgs[0]
		}
		c := newCase(t, name, m, settings, policy)
		c.MemoryLimit = limit
		cases = append(cases, c)
	}
	return cases
}

// memoryLimit returns the memory limit of m's container in bytes, 0 for
// none, and the memory policy when m's cache does not fit it by the
// operator's margin, or the limit is below the smallest.
func memoryLimit(m *v1alpha1.Memcached) (int64, string) {
	c := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec.Containers[0]
	q, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return 0, ""
	}
	if q.Cmp(resource.MustParse(memcached.MinMemoryLimit)) < 0 {
		return q.Value(), policyMemory
	}
	if m.Spec.MemoryMB != nil && (int64(*m.Spec.MemoryMB)+memcached.MemcachedOverheadMB)*8*memcached.Mebibyte > q.Value()*7 {
		return q.Value(), policyMemory
	}
	return q.Value(), ""
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// newCase returns the case of m: the operator's command and ValidateSpec's
// verdict.
func newCase(t *testing.T, name string, m *v1alpha1.Memcached, settings map[string]string, policy string) ConformanceCase {
	t.Helper()
	c := ConformanceCase{
		Name:     name,
		Spec:     m.Spec,
		Command:  memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec.Containers[0].Command,
		Settings: settings,
		Policy:   policy,
	}
	if err := memcached.ValidateSpec(m); err != nil {
		c.Invalid = err.Error()
	}
	if c.Settings == nil {
		c.Settings = map[string]string{}
	}
	c.Settings["maxbytes"] = strconv.FormatInt(int64(memcached.CacheMB(m))*memcached.Mebibyte, 10)
	return c
}

// TestExtraArgPatternFollowsTheTable checks that extraArgPattern, which the
// CRD holds too, allows the options of the allow-list and no other.
func TestExtraArgPatternFollowsTheTable(t *testing.T) {
	var values, flags []string
	for _, o := range memcached.ExtraArgOptions {
		if o.Value == nil {
			flags = append(flags, o.Name)
		} else {
			values = append(values, o.Name)
		}
	}
	want := "^--((" + strings.Join(values, "|") + ")=[A-Za-z0-9_.,:=+-]+|" + strings.Join(flags, "|") + ")$"
	if memcached.ExtraArgPattern != want {
		t.Errorf("extraArgPattern: got %s, want %s", memcached.ExtraArgPattern, want)
	}
}
