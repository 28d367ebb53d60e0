package stub

import (
	"fmt"
	"math"
	"regexp"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// defaultCacheMB is memcached's item memory without a memory limit to
	// derive it from: memcached's own default.
	defaultCacheMB = 64
	// memcachedOverheadMB is the memory memcached needs besides its items,
	// for its hash table, connection buffers and threads. With the 1/8 of
	// the limit that cacheMB also leaves free for the slab allocator's
	// slack, a full cache stays inside the limit.
	memcachedOverheadMB = 48
	// minMemoryLimit is the smallest memory limit that leaves memcached a
	// cache after its overhead.
	minMemoryLimit = "64Mi"
	// mebibyte is the unit of memcached's -m option.
	mebibyte = 1 << 20
)

// extraArgPattern is the form of each of spec.extraArgs: --name=value for
// options that tune the cache, or a flag. It allows no option that the
// operator sets (port, memory, user, verbosity) nor one that would stop
// memcached from serving (daemon, unix socket, help). deploy/crd.yaml
// holds the same pattern, which a test checks.
const extraArgPattern = `^--((conn-limit|threads|max-item-size|slab-growth-factor|slab-min-size|max-reqs-per-event|listen-backlog|protocol|extended)=[A-Za-z0-9_.,:=+-]+|disable-evictions|disable-cas|disable-flush-all|disable-dumping|disable-watch)$`

var extraArgRegexp = regexp.MustCompile(extraArgPattern)

// cacheMB returns memcached's item memory for m, its -m option:
// spec.memoryMB when set, else derived from the memory limit (see
// derivedCacheMB), else defaultCacheMB.
func cacheMB(m *v1alpha1.Memcached) int32 {
	if m.Spec.MemoryMB != nil {
		return *m.Spec.MemoryMB
	}
	limit, ok := memcachedResources(m).Limits[corev1.ResourceMemory]
	if !ok {
		return defaultCacheMB
	}
	return derivedCacheMB(limit)
}

// derivedCacheMB is the largest cache that fits a memory limit: 7/8 of the
// limit in MiB, less memcachedOverheadMB, rounded down, exactly as the CRD's
// rule on spec.memoryMB computes it. It is 64 for the default limit of
// 128Mi and at least 8 for a limit of minMemoryLimit.
func derivedCacheMB(limit resource.Quantity) int32 {
	bytes := limit.Value()
	if bytes > math.MaxInt64/7 {
		return math.MaxInt32
	}
	mb := bytes*7/(8*mebibyte) - memcachedOverheadMB
	if mb > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(mb)
}

// validateSpec returns why m's spec cannot be served, or nil. The CRD's
// schema refuses all of it already; the check repeats it for resources
// stored before the schema had those rules, so that no such Memcached ever
// gets a pod that cannot start.
func validateSpec(m *v1alpha1.Memcached) error {
	for _, a := range m.Spec.ExtraArgs {
		if !extraArgRegexp.MatchString(a) {
			return fmt.Errorf("spec.extraArgs: %q is not one of the memcached options that spec.extraArgs allows", a)
		}
	}
	limit, ok := memcachedResources(m).Limits[corev1.ResourceMemory]
	if !ok {
		return nil
	}
	if limit.Cmp(resource.MustParse(minMemoryLimit)) < 0 {
		return fmt.Errorf("spec.resources.limits.memory %s is below %s, too little for memcached", limit.String(), minMemoryLimit)
	}
	if mb := m.Spec.MemoryMB; mb != nil && *mb > derivedCacheMB(limit) {
		return fmt.Errorf("spec.memoryMB %d does not fit the memory limit %s: at most %d", *mb, limit.String(), derivedCacheMB(limit))
	}
	return nil
}
