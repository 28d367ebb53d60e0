package memcached

import (
	"regexp"
	"strconv"
	"strings"
)

// The values of spec.extraArgs that memcached 1.6 starts and serves with.
// memcached checks them only when it starts, and exits on a bad one, so a
// pod with one would crash-loop; the CRD refuses them with the same bounds
// and messages, which TestCRDHasTheSameRules checks against deploy/crd.yaml,
// and TestConformance (test/e2e) starts Debian's memcached 1.6.18 with the
// values at and beyond each bound to check both.
const (
	// threadsPattern is the CRD's form of --threads from 1 to 64
	// (extraArgOptions). memcached exits on 0 and warns above 64 that more
	// threads than cores are not recommended.
	threadsPattern = `^--threads=([1-9]|[1-5][0-9]|6[0-4])$`
	// protocolPattern is the CRD's form of --protocol with one of the names
	// memcached knows.
	protocolPattern = `^--protocol=(auto|ascii|binary)$`
	// connLimitPattern is the CRD's form of --conn-limit above 0, at most
	// seven digits; the CRD also bounds it to maxConnLimit.
	connLimitPattern = `^--conn-limit=[1-9][0-9]{0,6}$`
	// hashpowerPattern is one hashpower= item of --extended, within
	// memcached's own bounds of 12 to 32.
	hashpowerPattern = `^hashpower=(1[2-9]|2[0-9]|3[0-2])$`

	// maxConnLimit bounds --conn-limit: memcached raises its open-files
	// limit to the value and exits when it cannot. 1048576 is Linux's
	// default fs.nr_open, the most a process may raise it to; containerd's
	// CRI gives containers its own limit, which may be lower, so a value
	// below this bound can still fail on some nodes.
	maxConnLimit = 1048576
	// connsPerThread is the least --conn-limit per worker thread, and
	// minConnLimit the least of all: memcached takes five file descriptors
	// per thread and a few more from that limit before any client connects
	// (it exits below 5 per thread and 4, at 64 threads below 324, and with
	// 1 thread serves no client below 17, measured by TestConformance's
	// corpus); the rest are for clients. Both are bounds of the operator's
	// own: memcached starts and serves one client with less.
	connsPerThread = 16
	minConnLimit   = 32
	// defaultThreads is memcached's thread count without --threads.
	defaultThreads = 4
	// slabChunkBytes is memcached's largest slab chunk: --max-item-size must
	// be a multiple of it, and at least it.
	slabChunkBytes = 512 * 1024
	// maxItemBytes is memcached's largest --max-item-size, 1 GiB.
	maxItemBytes = 1 << 30
	// defaultItemBytes is memcached's item size limit without
	// --max-item-size; memcached wants at least twice that as its cache.
	defaultItemBytes = 1 << 20
)

// Why each value is refused; deploy/crd.yaml's rules carry the same
// messages.
const (
	msgThreads          = "--threads must be a whole number from 1 to 64: memcached exits on 0, and warns that more worker threads than cores only add contention"
	msgProtocol         = "--protocol must be auto, ascii or binary: memcached exits on any other name"
	msgConnLimit        = "--conn-limit must be a whole number from 1 to 1048576: memcached exits on 0, and raises its open-files limit to the value, which the container's hard limit caps"
	msgItemSize         = "--max-item-size must be a multiple of 512k from 512k to 1024m, in bytes or with k or m (KiB, MiB): memcached stores items in slab chunks of 512 KiB, up to 1 GiB, and exits otherwise"
	msgHashpower        = "--extended=hashpower must be a whole number from 12 to 32: memcached exits outside those bounds"
	msgItemSizeFits     = "--max-item-size (1m when not set) must be at most half of memcached's cache, memoryMB or the value derived from the memory limit: memcached exits otherwise"
	msgHashpowerThreads = "--extended=hashpower must be above the power of memcached's item lock table, which is 12 with 4 threads (the default), 13 with 5 to 10, 14 with 11 to 20 and 15 with more: memcached exits otherwise"
	msgConnsPerThread   = "--conn-limit must be at least 16 per worker thread (64 with the default 4 threads) and at least 32: memcached takes file descriptors for each thread from that limit before any client connects, and exits or refuses clients when they run out"
)

var (
	hashpowerRegexp = regexp.MustCompile(hashpowerPattern)
	extendedRegexp  = regexp.MustCompile(extendedPattern)
	// itemSizeRegexp is --max-item-size as memcached reads it: a number of
	// bytes, or of KiB or MiB with k or m. memcached reads "1.5m" as 1m and
	// "1g" as 1 byte, so neither is allowed.
	itemSizeRegexp = regexp.MustCompile(`^--max-item-size=([0-9]{1,10})([kKmM]?)$`)
)

// extraArgValueError returns why memcached would exit on a, one item of
// spec.extraArgs that matches extraArgPattern, or not read its value as
// written, or "".
func extraArgValueError(a string) string {
	name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
	o, ok := extraArgOptionNamed(name)
	if !ok || o.Value == nil {
		return "" // a flag: extraArgPattern allows it without a value only
	}
	switch name {
	case "max-item-size":
		b := itemSizeBytes(a)
		if b < slabChunkBytes || b > maxItemBytes || b%slabChunkBytes != 0 {
			return msgItemSize
		}
		return ""
	case "extended":
		for _, sub := range strings.Split(value, ",") {
			if strings.HasPrefix(sub, "hashpower") && !hashpowerRegexp.MatchString(sub) {
				return msgHashpower
			}
		}
		if !extendedRegexp.MatchString(a) {
			return msgExtended
		}
		return ""
	}
	if !o.Value.allows(value) {
		return o.Value.Message
	}
	return ""
}

// extraArgsConflict returns why memcached would exit on args together with
// a cache of cacheMB, or "". It assumes each arg passed extraArgValueError.
// When an option is given twice memcached takes the last one; the check,
// like the CRD's, holds every one to the rule.
func extraArgsConflict(args []string, cacheMB int32) string {
	var threads, hashpowers, connLimits []int64
	items := []int64{}
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--threads="):
			threads = append(threads, optionInt(a))
		case strings.HasPrefix(a, "--conn-limit="):
			connLimits = append(connLimits, optionInt(a))
		case strings.HasPrefix(a, "--max-item-size="):
			items = append(items, itemSizeBytes(a))
		case strings.HasPrefix(a, "--extended="):
			for _, o := range strings.Split(strings.TrimPrefix(a, "--extended="), ",") {
				if hashpowerRegexp.MatchString(o) {
					hashpowers = append(hashpowers, optionInt(o))
				}
			}
		}
	}
	if len(items) == 0 {
		items = []int64{defaultItemBytes}
	}
	for _, b := range items {
		if b*2 > int64(cacheMB)*mebibyte {
			return msgItemSizeFits
		}
	}
	if len(threads) == 0 {
		threads = []int64{defaultThreads}
	}
	for _, t := range threads {
		for _, h := range hashpowers {
			if h <= itemLockPower(t) {
				return msgHashpowerThreads
			}
		}
		for _, c := range connLimits {
			if c < connsPerThread*t || c < minConnLimit {
				return msgConnsPerThread
			}
		}
	}
	return ""
}

// itemLockPower is the power of two of memcached's item lock table with
// threads worker threads, as memcached 1.6 sizes it; the hash table must
// be larger.
func itemLockPower(threads int64) int64 {
	switch {
	case threads < 3:
		return 10
	case threads < 4:
		return 11
	case threads < 5:
		return 12
	case threads <= 10:
		return 13
	case threads <= 20:
		return 14
	}
	return 15
}

// optionInt returns the number after the last "=" of a, or 0 when there is
// none.
func optionInt(a string) int64 {
	n, _ := strconv.ParseInt(a[strings.LastIndex(a, "=")+1:], 10, 64) // 0 for no number, which every rule refuses
	return n
}

// itemSizeBytes returns the size a --max-item-size item of spec.extraArgs
// asks for, in bytes, or 0 when memcached would not read it as a size.
func itemSizeBytes(a string) int64 {
	s := itemSizeRegexp.FindStringSubmatch(a)
	if s == nil {
		return 0
	}
	n, _ := strconv.ParseInt(s[1], 10, 64) // ten digits at most
	switch s[2] {
	case "k", "K":
		return n * 1024
	case "m", "M":
		return n * mebibyte
	}
	return n
}
