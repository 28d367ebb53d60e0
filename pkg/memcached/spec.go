package memcached

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// defaultMemoryLimit is the memory container's limit without
	// spec.resources. The CRD's rule on spec.memoryMB holds it in bytes.
	defaultMemoryLimit = "128Mi"
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

// ValidateSpec returns why m's spec cannot be served, or nil. The CRD's
// schema refuses all of it already; the check repeats it for resources
// stored before the schema had those rules, so that no such Memcached ever
// gets a pod that cannot start or a Deployment the API server refuses.
func ValidateSpec(m *v1alpha1.Memcached) error {
	for i, a := range m.Spec.ExtraArgs {
		if !extraArgRegexp.MatchString(a) {
			return fmt.Errorf("spec.extraArgs[%d]: %s is not one of the memcached options that spec.extraArgs allows", i, quoted(a))
		}
		if why := extraArgValueError(a); why != "" {
			return fmt.Errorf("spec.extraArgs[%d]: %s: %s", i, quoted(a), why)
		}
	}
	if err := validateMemory(m); err != nil {
		return err
	}
	if why := extraArgsConflict(m.Spec.ExtraArgs, cacheMB(m)); why != "" {
		return fmt.Errorf("spec.extraArgs: %s", why)
	}
	if err := validateSecurity(m); err != nil {
		return err
	}
	if mw := m.Spec.MaintenanceWindow; mw != nil {
		if _, err := WindowOf(mw); err != nil {
			return fmt.Errorf("spec.maintenanceWindow: %v", err)
		}
	}
	if err := validateMonitoring(m); err != nil {
		return err
	}
	return validatePlacement(m)
}

// validateMonitoring checks spec.monitoring.labels as the API server checks
// labels, so that the ServiceMonitor and the PrometheusRule that carry them
// can be written, and refuses the operator's own, which the children's
// selectors and the caches' filters rely on.
func validateMonitoring(m *v1alpha1.Memcached) error {
	if m.Spec.Monitoring == nil {
		return nil
	}
	for k, v := range m.Spec.Monitoring.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("spec.monitoring.labels: key %s is not a label key: %s", quoted(k), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("spec.monitoring.labels[%s]: %s is not a label value: %s", k, quoted(v), strings.Join(errs, "; "))
		}
		if k == AppLabel || k == CRLabel {
			return fmt.Errorf("spec.monitoring.labels: %s is the operator's own label", k)
		}
	}
	return nil
}

// validateSecurity checks spec.tls and spec.auth: Secret names the API
// server accepts in a pod, a known client-certificate mode, and no
// protocol but ASCII with auth, since memcached exits when -Y meets a
// binary or auto protocol. Whether the Secrets exist and hold their keys
// is for the kubelet to tell (see secretVolumes).
func validateSecurity(m *v1alpha1.Memcached) error {
	if t := m.Spec.TLS; t != nil {
		if errs := validation.IsDNS1123Subdomain(t.SecretName); len(errs) > 0 {
			return fmt.Errorf("spec.tls.secretName: %s is not the name of a Secret: %s", quoted(t.SecretName), strings.Join(errs, "; "))
		}
		switch t.ClientCertificates {
		case "", v1alpha1.ClientCertificatesNone, v1alpha1.ClientCertificatesRequired:
		default:
			return fmt.Errorf("spec.tls.clientCertificates: %s is not None or Required", quoted(string(t.ClientCertificates)))
		}
	}
	if a := m.Spec.Auth; a != nil {
		if errs := validation.IsDNS1123Subdomain(a.SecretName); len(errs) > 0 {
			return fmt.Errorf("spec.auth.secretName: %s is not the name of a Secret: %s", quoted(a.SecretName), strings.Join(errs, "; "))
		}
		for i, arg := range m.Spec.ExtraArgs {
			if strings.HasPrefix(arg, "--protocol=") && arg != "--protocol=ascii" {
				return fmt.Errorf("spec.extraArgs[%d]: %s: %s", i, quoted(arg), msgAuthProtocol)
			}
		}
	}
	return nil
}

// msgAuthProtocol says why spec.auth allows only the ASCII protocol;
// deploy/crd.yaml's rule carries the same message.
const msgAuthProtocol = "spec.auth needs --protocol=ascii or none: memcached's password file works with the ASCII protocol only, and memcached exits when binary or auto is asked for with it"

// validateMemory checks the memory limit, set or defaulted, and memoryMB
// against each other. With spec.resources but no memory limit, a
// LimitRange may give the container one, which neither this check nor the
// CRD's rule can know; memcached then runs memoryMB under that limit.
func validateMemory(m *v1alpha1.Memcached) error {
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

// validatePlacement checks the pod fields that the API server validates in
// the Deployment's pod template, as it does: otherwise the Deployment's
// create or update would fail on every retry.
func validatePlacement(m *v1alpha1.Memcached) error {
	for i, t := range m.Spec.Tolerations {
		if why := tolerationError(t); why != "" {
			return fmt.Errorf("spec.tolerations[%d]: %s", i, why)
		}
	}
	for k, v := range m.Spec.NodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("spec.nodeSelector: key %s is not a label key: %s", quoted(k), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("spec.nodeSelector[%s]: %s is not a label value: %s", k, quoted(v), strings.Join(errs, "; "))
		}
	}
	if p := m.Spec.PriorityClassName; p != "" {
		if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
			return fmt.Errorf("spec.priorityClassName: %s is not the name of a PriorityClass, a DNS subdomain: %s", quoted(p), strings.Join(errs, "; "))
		}
	}
	return nil
}

// tolerationError returns why the API server refuses t in a pod, or "".
func tolerationError(t corev1.Toleration) string {
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Sprintf("key %s is not a taint key, a qualified name: %s", quoted(t.Key), strings.Join(errs, "; "))
		}
	}
	if t.Key == "" && t.Operator != corev1.TolerationOpExists {
		return msgTolerationKeyless
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		return msgTolerationSeconds
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Sprintf("value %s is not a label value: %s", quoted(t.Value), strings.Join(errs, "; "))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return msgTolerationExistsValue
		}
	default:
		return fmt.Sprintf("operator %s is not Exists or Equal", quoted(string(t.Operator)))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return ""
	}
	return fmt.Sprintf("effect %s is not NoSchedule, PreferNoSchedule or NoExecute", quoted(string(t.Effect)))
}

// Why the API server refuses a toleration; deploy/crd.yaml's rules carry
// the same messages.
const (
	msgTolerationKeyless     = "operator must be Exists when key is empty: a toleration without a key matches every taint, and Equal needs a key to compare"
	msgTolerationSeconds     = "effect must be NoExecute when tolerationSeconds is set: tolerationSeconds is how long a pod stays after a NoExecute taint evicts it, and no other effect evicts"
	msgTolerationExistsValue = "value must be empty when operator is Exists: Exists matches any value of the key"
)

// maxQuoted is how many bytes of a value from a spec, or of a flag, an
// error quotes: the errors go to the status's conditions and to Events,
// and a resource stored before the CRD bounded its fields may hold a value
// of any length.
const maxQuoted = 64

// quoted returns s quoted, as %q does, cut to maxQuoted bytes, on a rune's
// start, with its length when it is longer.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
