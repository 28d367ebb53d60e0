package memcached

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The fuzz tests of the parsers of a tenant's input: spec.extraArgs and
// the maintenance window. Each checks that the parser never panics, that
// its error is bounded whatever the input's length, and that it decides as
// a second form of the same rule does: the CRD's patterns and the option
// table for spec.extraArgs, modular arithmetic for Window.At. Failing
// inputs that the fuzzer found are kept under testdata/fuzz/.

// maxErrorLen bounds every error of ValidateSpec and ParseWindow: the
// longest message (msgExtended) with the field's path and a quoted value.
const maxErrorLen = 1024

var (
	crdThreads   = regexp.MustCompile(threadsPattern)
	crdProtocol  = regexp.MustCompile(protocolPattern)
	crdConnLimit = regexp.MustCompile(connLimitPattern)
	// crdItemSize is the CRD's form of --max-item-size, whose bounds the
	// reference reads itself.
	crdItemSize = regexp.MustCompile(`^--max-item-size=([0-9]{1,10})([kKmM]?)$`)
)

// referenceValueOK is the reference decision on a, an item that matches
// extraArgPattern: the CRD's patterns where it has them, else the option
// table, suboption by suboption for --extended.
func referenceValueOK(a string) bool {
	name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
	switch name {
	case "threads":
		return crdThreads.MatchString(a)
	case "protocol":
		return crdProtocol.MatchString(a)
	case "conn-limit":
		n, err := strconv.ParseInt(value, 10, 64)
		return crdConnLimit.MatchString(a) && err == nil && n <= maxConnLimit
	case "max-item-size":
		s := crdItemSize.FindStringSubmatch(a)
		if s == nil {
			return false
		}
		n, _ := strconv.ParseInt(s[1], 10, 64)
		unit := map[string]int64{"": 1, "k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20}[s[2]]
		b := n * unit
		return b >= 512<<10 && b <= 1<<30 && b%(512<<10) == 0
	case "extended":
		for _, sub := range strings.Split(value, ",") {
			n, v, hasValue := strings.Cut(sub, "=")
			o, ok := extendedOptionNamed(n)
			switch {
			case !ok:
				return false
			case o.Value == nil && hasValue:
				return false
			case o.Value != nil && (!hasValue || !o.Value.allows(v)):
				return false
			}
		}
		return true
	}
	o, ok := extraArgOptionNamed(name)
	if !ok {
		return false
	}
	return o.Value == nil || o.Value.allows(value)
}

// extraArgSeeds are items at and beyond the bounds of each option.
var extraArgSeeds = []string{
	"--threads=4", "--threads=0", "--threads=64", "--threads=65", "--threads=04",
	"--protocol=ascii", "--protocol=ASCII", "--conn-limit=1048576", "--conn-limit=1048577", "--conn-limit=0",
	"--max-item-size=1m", "--max-item-size=512k", "--max-item-size=524288", "--max-item-size=1024m", "--max-item-size=1025m", "--max-item-size=1g",
	"--slab-growth-factor=1.25", "--slab-growth-factor=1", "--slab-min-size=2147483648", "--listen-backlog=0",
	"--extended=hashpower=16", "--extended=hashpower=11", "--extended=hashpower", "--extended=lru_crawler,track_sizes",
	"--extended=lru_crawler=1", "--extended=slab_automove=3", "--extended=lru_crawler_tocrawl=4294967295", "--extended=lru_crawler_tocrawl=4294967296",
	"--extended=,", "--extended=hash_algorithm=xxh3,idle_timeout=2147483647", "--extended=ssl_chain_cert=x",
	"--disable-cas", "--disable-cas=1", "-m 64", "--threads=4 -u root", "", strings.Repeat("--threads=", 500),
}

// FuzzExtraArgValue: extraArgValueError never panics, returns a bounded
// message, and accepts an item that extraArgPattern allows exactly when
// the reference does.
func FuzzExtraArgValue(f *testing.F) {
	for _, s := range extraArgSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, a string) {
		why := extraArgValueError(a)
		if len(why) > maxErrorLen {
			t.Fatalf("%q: a message of %d bytes", a, len(why))
		}
		if !extraArgRegexp.MatchString(a) {
			return
		}
		if got, want := why == "", referenceValueOK(a); got != want {
			t.Fatalf("%q: accepted %v (%q), the reference says %v", a, got, why, want)
		}
	})
}

// FuzzValidateExtraArgs: ValidateSpec, which the handler runs on every
// Memcached, never panics on spec.extraArgs, returns an error of bounded
// length however long the items, and accepts them exactly when each item
// has the CRD's form and the reference's value and, together with the
// cache, they conflict in nothing; the command it then builds holds each
// item whole, as one argument, before the options the operator controls.
func FuzzValidateExtraArgs(f *testing.F) {
	for i, s := range extraArgSeeds {
		f.Add(s, extraArgSeeds[(i+7)%len(extraArgSeeds)], uint16(i*37))
	}
	f.Add("--max-item-size=64m", "", uint16(100))
	f.Add("--extended=hashpower=12", "--threads=5", uint16(0))
	f.Add("--conn-limit=63", "", uint16(0))
	f.Fuzz(func(t *testing.T, a, b string, memoryMB uint16) {
		m := &v1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "test", UID: types.UID("uid-fuzz")},
			Spec:       v1alpha1.MemcachedSpec{Size: 1, ExtraArgs: []string{a}},
		}
		if b != "" {
			m.Spec.ExtraArgs = append(m.Spec.ExtraArgs, b)
		}
		if memoryMB != 0 {
			mb := int32(memoryMB % 80)
			m.Spec.MemoryMB = &mb
		}
		err := ValidateSpec(m)
		if err != nil && len(err.Error()) > maxErrorLen {
			t.Fatalf("an error of %d bytes: %.200s…", len(err.Error()), err)
		}
		want := validateMemory(m) == nil && extraArgsConflict(m.Spec.ExtraArgs, cacheMB(m)) == ""
		for _, x := range m.Spec.ExtraArgs {
			want = want && extraArgRegexp.MatchString(x) && referenceValueOK(x)
		}
		if got := err == nil; got != want {
			t.Fatalf("%q with memoryMB %v: ValidateSpec says %v, the reference %v", m.Spec.ExtraArgs, m.Spec.MemoryMB, err, want)
		}
		if err != nil {
			return
		}
		cmd := memcachedCommand(m)
		for i, x := range m.Spec.ExtraArgs {
			if cmd[1+i] != x || !strings.HasPrefix(x, "--") || strings.IndexFunc(x, func(r rune) bool { return unicode.IsSpace(r) || r == 0 }) >= 0 {
				t.Fatalf("command %q: item %d, %q, is not one whole option", cmd, i, x)
			}
		}
		if cmd[1+len(m.Spec.ExtraArgs)] != "-m" {
			t.Fatalf("command %q: the operator's options do not follow the items", cmd)
		}
	})
}

// FuzzParseWindow: ParseWindow never panics, returns an error of bounded
// length, and succeeds exactly when the three fields make a window that
// WindowOf accepts as spec.maintenanceWindow; a window it returns is
// within the bounds, and its String() parses back to it.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{
		"Sunday 03:00 2h", "Tuesday 23:59 24h", "Monday 00:00 1h", "Saturday 22:00 1h30m", "Sunday 03:00 59m", "Sunday 03:00 24h1m",
		"Sunday 24:00 2h", "Sun 03:00 2h", "Sunday 3:00 2h", "Sunday 03:00 2h30s", "Sunday\t03:00\n2h", "Sunday 03:00 2h UTC", "",
		"Sunday 03:00 -2h", "Sunday 03:00 1.5h", "Sunday 03:00 9223372036854775807ns", "Sunday ０３:00 2h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWindow(s)
		if err != nil && len(err.Error()) > maxErrorLen {
			t.Fatalf("an error of %d bytes: %.200s…", len(err.Error()), err)
		}
		fields := strings.Fields(s)
		want := false
		var viaSpec Window
		if len(fields) == 3 {
			if d, derr := time.ParseDuration(fields[2]); derr == nil {
				var serr error
				viaSpec, serr = WindowOf(&v1alpha1.MaintenanceWindow{Day: fields[0], Start: fields[1], Duration: metav1.Duration{Duration: d}})
				if serr != nil && len(serr.Error()) > maxErrorLen {
					t.Fatalf("WindowOf: an error of %d bytes", len(serr.Error()))
				}
				want = serr == nil
			}
		}
		if got := err == nil; got != want {
			t.Fatalf("%q: ParseWindow says %v, WindowOf accepts %v", s, err, want)
		}
		if err != nil {
			return
		}
		if w != viaSpec {
			t.Fatalf("%q: ParseWindow %+v, WindowOf %+v", s, w, viaSpec)
		}
		if w.Day < time.Sunday || w.Day > time.Saturday || w.Start < 0 || w.Start >= 24*time.Hour || w.Start%time.Minute != 0 ||
			w.Duration < time.Hour || w.Duration > 24*time.Hour || w.Duration%time.Minute != 0 {
			t.Fatalf("%q: a window out of bounds: %+v", s, w)
		}
		back, err := ParseWindow(w.String())
		if err != nil || back != w {
			t.Fatalf("%q: String() %q parses to %+v, %v; want %+v", s, w.String(), back, err, w)
		}
	})
}

// week is the period of every window.
const week = 7 * 24 * time.Hour

// FuzzWindowAt: Window.At agrees with the window's openings counted from a
// Sunday midnight UTC, for any valid window and any time within two
// centuries of 1970, in any zone: it is open from an opening, inclusive,
// for the window's duration, exclusive; until is the close while open,
// else the next opening, always after t.
func FuzzWindowAt(f *testing.F) {
	f.Add(uint8(2), uint16(180), uint16(60), int64(1795953600), uint32(0), int8(0))            // Tuesday 03:00 2h at its opening
	f.Add(uint8(6), uint16(1380), uint16(1380), int64(1796000000), uint32(999999999), int8(5)) // Saturday 23:00 24h, across the week's end
	f.Add(uint8(0), uint16(0), uint16(0), int64(-1), uint32(1), int8(-12))
	f.Fuzz(func(t *testing.T, day uint8, startMin, durationMin uint16, sec int64, nsec uint32, zone int8) {
		w := Window{
			Day:      time.Weekday(day % 7),
			Start:    time.Duration(startMin%(24*60)) * time.Minute,
			Duration: time.Hour + time.Duration(durationMin%(23*60+1))*time.Minute,
		}
		const span = 100 * 365 * 24 * 3600
		at := time.Unix(sec%span, int64(nsec%1e9)).In(time.FixedZone("fuzz", int(zone%15)*3600))

		open, until := w.At(at)

		// 1970-01-04 was a Sunday.
		sunday := time.Date(1970, time.January, 4, 0, 0, 0, 0, time.UTC)
		sinceOpening := (at.Sub(sunday) - time.Duration(w.Day)*24*time.Hour - w.Start) % week
		if sinceOpening < 0 {
			sinceOpening += week
		}
		wantOpen := sinceOpening < w.Duration
		wantUntil := at.Add(week - sinceOpening)
		if wantOpen {
			wantUntil = at.Add(w.Duration - sinceOpening)
		}
		if open != wantOpen || !until.Equal(wantUntil) {
			t.Fatalf("%v at %v: got open %v until %v, want %v until %v", w, at, open, until, wantOpen, wantUntil)
		}
		if !until.After(at) {
			t.Fatalf("%v at %v: until %v is not after it", w, at, until)
		}
	})
}
