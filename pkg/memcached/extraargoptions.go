package memcached

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// extraArgOption is one memcached option that spec.extraArgs allows, with
// what memcached 1.6.18 accepts for it. The table below is the allow-list:
// extraArgPattern allows its names (TestExtraArgPatternFollowsTheTable),
// extraArgValueError checks values against it, deploy/crd.yaml carries the
// same bounds, and the conformance corpus (TestConformanceCorpus) is
// generated from it, so that TestConformance can start memcached with the
// values at and beyond each bound and check that the API server refuses
// exactly those memcached does not serve with.
type extraArgOption struct {
	// Name is the long name, without "--".
	Name string
	// Short is memcached's short option for the same setting. spec.extraArgs
	// refuses it, and the long name with its value as a separate item: each
	// item must stand alone, since an option without its value would take
	// the operator's next option (-m) as its value.
	Short string
	// Value says what values memcached accepts; nil for a flag.
	Value *valueRule
	// Setting is the name of the setting in memcached's `stats settings`
	// that the option sets, "" when memcached does not report it.
	Setting string
	// FlagSetting is what Setting reads with the flag given.
	FlagSetting string
}

// valueRule is the set of values an option accepts: a whole number of
// Min to Max in plain decimal, a decimal number above Min, one of Names,
// or a size that itemSizeBytes reads.
type valueRule struct {
	Kind  valueKind
	Min   int64
	Max   int64
	Names []string
	// Reads maps a name to what the option's setting reads for it, where
	// that is not the name itself.
	Reads map[string]string
	// Message says why a value outside the rule is refused.
	Message string
	// PolicyMax is true when Max is a bound of the operator's own:
	// memcached still runs with larger values (see the option's comment).
	PolicyMax bool
}

// valueKind is the form of an option's value.
type valueKind int

const (
	// wholeNumber is plain decimal digits without a sign or leading zeros;
	// memcached reads most numbers with atoi, which wraps above 2^31-1.
	wholeNumber valueKind = iota
	// decimal is digits with an optional fraction, such as 1.25.
	decimal
	// oneOf is one of a few words.
	oneOf
	// byteSize is a number of bytes, or of KiB or MiB with k or m.
	byteSize
	// suboptions is --extended's comma-separated list (extendedOptions).
	suboptions
)

// maxInt32 is the largest number memcached's atoi reads as written.
const maxInt32 = 1<<31 - 1

// wholeNumberRegexp is a plain decimal number of at most ten digits.
var wholeNumberRegexp = regexp.MustCompile(`^(0|[1-9][0-9]{0,9})$`)

// decimalRegexp is a decimal number with an optional fraction.
var decimalRegexp = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,10})?$`)

// allows reports whether v is within r.
func (r *valueRule) allows(v string) bool {
	switch r.Kind {
	case wholeNumber:
		if !wholeNumberRegexp.MatchString(v) {
			return false
		}
		n, _ := strconv.ParseInt(v, 10, 64) // ten digits at most
		return n >= r.Min && n <= r.Max
	case decimal:
		if !decimalRegexp.MatchString(v) {
			return false
		}
		f, _ := strconv.ParseFloat(v, 64) // the pattern is a number
		return f > float64(r.Min)
	case oneOf:
		for _, n := range r.Names {
			if v == n {
				return true
			}
		}
		return false
	}
	return true // byteSize and suboptions have checks of their own
}

// Why each value is refused, beyond the messages of extraargs.go;
// deploy/crd.yaml's rules carry the same messages.
const (
	msgGrowthFactor  = "--slab-growth-factor must be a decimal number above 1, such as 1.25: memcached exits on 1 or less"
	msgSlabMinSize   = "--slab-min-size must be a whole number from 1 to 2147483647: memcached exits on 0 and reads larger numbers as negative"
	msgReqsPerEvent  = "--max-reqs-per-event must be a whole number from 1 to 2147483647: memcached exits on 0, stops answering with a negative number and reads larger ones as negative"
	msgListenBacklog = "--listen-backlog must be a whole number from 0 to 2147483647: memcached reads larger numbers as negative"
	msgExtended      = "--extended must be a comma-separated list of hashpower=N, hash_algorithm=jenkins, murmur3 or xxh3, idle_timeout=0 to 2147483647, lru_crawler, no_lru_crawler, lru_crawler_sleep=0 to 1000000, lru_crawler_tocrawl=0 to 4294967295, track_sizes and slab_automove=0, 1 or 2: memcached exits on suboptions it does not know and on values outside those bounds, and the other suboptions it knows set what the operator controls (ssl_*), need files (ext_*) or are experimental or dangerous by its own help"
)

// extraArgOptions are the options that spec.extraArgs allows, in the
// order of extraArgPattern.
var extraArgOptions = []extraArgOption{
	// --conn-limit's Max is Linux's default fs.nr_open, the most a process
	// may raise its open-files limit to; memcached raises it to the value
	// and exits when it cannot, so a node whose containers get a lower hard
	// limit refuses more, which the API server cannot know. Its least value
	// per thread is extraArgsConflict's.
	{Name: "conn-limit", Short: "c", Value: &valueRule{Kind: wholeNumber, Min: 1, Max: maxConnLimit, Message: msgConnLimit}, Setting: "maxconns"},
	// --threads above 64 runs, with a warning that more worker threads than
	// cores only add contention; 64 is the operator's bound.
	{Name: "threads", Short: "t", Value: &valueRule{Kind: wholeNumber, Min: 1, Max: 64, Message: msgThreads, PolicyMax: true}, Setting: "num_threads"},
	{Name: "max-item-size", Short: "I", Value: &valueRule{Kind: byteSize, Min: slabChunkBytes, Max: maxItemBytes, Message: msgItemSize}, Setting: "item_size_max"},
	{Name: "slab-growth-factor", Short: "f", Value: &valueRule{Kind: decimal, Min: 1, Message: msgGrowthFactor}, Setting: "growth_factor"},
	{Name: "slab-min-size", Short: "n", Value: &valueRule{Kind: wholeNumber, Min: 1, Max: maxInt32, Message: msgSlabMinSize}, Setting: "chunk_size"},
	{Name: "max-reqs-per-event", Short: "R", Value: &valueRule{Kind: wholeNumber, Min: 1, Max: maxInt32, Message: msgReqsPerEvent}, Setting: "reqs_per_event"},
	{Name: "listen-backlog", Short: "b", Value: &valueRule{Kind: wholeNumber, Min: 0, Max: maxInt32, Message: msgListenBacklog}, Setting: "tcp_backlog"},
	{Name: "protocol", Short: "B", Value: &valueRule{Kind: oneOf, Names: []string{"auto", "ascii", "binary"}, Reads: map[string]string{"auto": "auto-negotiate"}, Message: msgProtocol}, Setting: "binding_protocol"},
	{Name: "extended", Short: "o", Value: &valueRule{Kind: suboptions, Message: msgExtended}},
	{Name: "disable-evictions", Short: "M", Setting: "evictions", FlagSetting: "off"},
	{Name: "disable-cas", Short: "C", Setting: "cas_enabled", FlagSetting: "no"},
	{Name: "disable-flush-all", Short: "F", Setting: "flush_enabled", FlagSetting: "no"},
	{Name: "disable-dumping", Short: "X", Setting: "dump_enabled", FlagSetting: "no"},
	{Name: "disable-watch", Short: "W"},
}

// extendedOptions are the suboptions of --extended that spec.extraArgs
// allows. hashpower's bounds are hashpowerPattern's, and it must also be
// above the item lock table's power (extraArgsConflict).
var extendedOptions = []extraArgOption{
	{Name: "hashpower", Value: &valueRule{Kind: wholeNumber, Min: 12, Max: 32, Message: msgHashpower}, Setting: "hashpower_init"},
	{Name: "hash_algorithm", Value: &valueRule{Kind: oneOf, Names: []string{"jenkins", "murmur3", "xxh3"}, Message: msgExtended}, Setting: "hash_algorithm"},
	{Name: "idle_timeout", Value: &valueRule{Kind: wholeNumber, Min: 0, Max: maxInt32, Message: msgExtended}, Setting: "idle_timeout"},
	{Name: "lru_crawler", Setting: "lru_crawler", FlagSetting: "yes"},
	{Name: "no_lru_crawler", Setting: "lru_crawler", FlagSetting: "no"},
	{Name: "lru_crawler_sleep", Value: &valueRule{Kind: wholeNumber, Min: 0, Max: 1000000, Message: msgExtended}, Setting: "lru_crawler_sleep"},
	{Name: "lru_crawler_tocrawl", Value: &valueRule{Kind: wholeNumber, Min: 0, Max: 1<<32 - 1, Message: msgExtended}, Setting: "lru_crawler_tocrawl"},
	{Name: "track_sizes", Setting: "track_sizes", FlagSetting: "yes"},
	{Name: "slab_automove", Value: &valueRule{Kind: wholeNumber, Min: 0, Max: 2, Message: msgExtended}, Setting: "slab_automove"},
}

// extendedPattern is the form of an --extended item whose suboptions are
// all in extendedOptions with values in their bounds; hashpower has a rule
// of its own (hashpowerPattern). deploy/crd.yaml holds the same pattern,
// which TestCRDHasTheSameRules checks: a pattern, unlike a rule that
// splits the list and reads numbers, fits the API server's cost budget.
var extendedPattern = func() string {
	subs := []string{"hashpower[^,]*"}
	for _, o := range extendedOptions[1:] {
		switch {
		case o.Value == nil:
			subs = append(subs, o.Name)
		case o.Value.Kind == oneOf:
			subs = append(subs, o.Name+"=("+strings.Join(o.Value.Names, "|")+")")
		default:
			subs = append(subs, o.Name+"="+wholeNumberPattern(o.Value.Max))
		}
	}
	sub := "(" + strings.Join(subs, "|") + ")"
	return "^--extended=" + sub + "(," + sub + ")*$"
}()

// wholeNumberPattern is a regular expression for the whole numbers from 0
// to max in plain decimal: 0, numbers of fewer digits than max, and those
// of as many digits that are not above it.
func wholeNumberPattern(max int64) string {
	d := strconv.FormatInt(max, 10)
	alts := []string{"0"}
	if len(d) > 1 {
		alts = append(alts, fmt.Sprintf("[1-9][0-9]{0,%d}", len(d)-2))
	}
	for i := 0; i < len(d); i++ {
		low := byte('0')
		if i == 0 {
			low = '1'
		}
		if d[i] > low {
			rest := ""
			if n := len(d) - i - 1; n > 0 {
				rest = fmt.Sprintf("[0-9]{%d}", n)
			}
			alts = append(alts, fmt.Sprintf("%s[%c-%c]%s", d[:i], low, d[i]-1, rest))
		}
	}
	alts = append(alts, d)
	return "(" + strings.Join(alts, "|") + ")"
}

// extraArgOptionNamed returns the option of extraArgOptions named name.
func extraArgOptionNamed(name string) (extraArgOption, bool) {
	return optionNamed(extraArgOptions, name)
}

// extendedOptionNamed returns the suboption of extendedOptions named name.
func extendedOptionNamed(name string) (extraArgOption, bool) {
	return optionNamed(extendedOptions, name)
}

func optionNamed(options []extraArgOption, name string) (extraArgOption, bool) {
	for _, o := range options {
		if o.Name == name {
			return o, true
		}
	}
	return extraArgOption{}, false
}
