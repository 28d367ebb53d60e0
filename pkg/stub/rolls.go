package stub

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A change on the operator's side, a new --memcached-image or an operator
// version that builds another pod template, changes the desired template of
// every Memcached it reaches at once. Rolling them all at once would cost
// every cache a pod's keys at the same moment, and an image that cannot run
// would reach all of them before anyone noticed. Such fleet rolls are paced:
// at most --max-concurrent-rolls Memcacheds roll at once for a change of the
// operator's, and the next starts once one of them has no pod of an older
// template left, that is, once its Deployment has replaced them all with
// Ready pods of the new one (maxUnavailable 0). A roll that the Memcached's
// own spec asks for, and the creation of a new Memcached, never wait.
//
// Everything the pacing decides from is in the cluster, so that a restart or a
// new leader continues where the last one stopped: each Deployment's pod
// template records the spec it was built from (memcached.SpecHashAnnotation)
// and whether its last change was a paced one (memcached.PacedRollAnnotation),
// and the rolls in flight are counted from the Deployments and pods in the
// caches. Only two things are kept in memory: the slots granted whose patch the
// cache has not shown yet, so that two workers never take the same slot, and
// which Memcacheds wait, so that a freed slot wakes the next one by name.

const (
	// DefaultMaxConcurrentRolls is the default of --max-concurrent-rolls.
	DefaultMaxConcurrentRolls = "10%"

	// maxHoldersNamed is how many slot holders a RollPending message names.
	maxHoldersNamed = 3
)

// ParseMaxConcurrentRolls parses --max-concurrent-rolls: a whole number of
// Memcacheds of at least 1, or a percentage of all Memcacheds from 1% to
// 100%, which is rounded up.
func ParseMaxConcurrentRolls(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(s)
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return v, fmt.Errorf("%q must be at least 1", s)
		}
		return v, nil
	}
	p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") || p < 1 || p > 100 {
		return v, fmt.Errorf("%q must be a whole number of at least 1 or a percentage from 1%% to 100%%", s)
	}
	return v, nil
}

// rollSlots returns how many Memcacheds of total, those with a Deployment,
// may be in a paced roll at once under limit: a percentage is of total and
// rounded up, and there is always at least one slot, so that a fleet roll
// always moves.
func rollSlots(limit intstr.IntOrString, total int) int {
	n, err := intstr.GetValueFromIntOrPercent(&limit, total, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// mayStartRoll is the slot decision: the Memcached key may start a paced
// roll when it holds a slot already, as when the operator's template changed
// again in the middle of its roll, or when fewer than slots are in flight.
func mayStartRoll(key string, inFlight map[string]bool, slots int) bool {
	return inFlight[key] || len(inFlight) < slots
}

// toWake returns the waiting Memcacheds that the free slots go to, first by
// namespace/name.
func toWake(waiting map[string]bool, inFlight map[string]bool, slots int) []string {
	free := slots - len(inFlight)
	if free <= 0 {
		return nil
	}
	keys := make([]string, 0, len(waiting))
	for k := range waiting {
		if !inFlight[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > free {
		keys = keys[:free]
	}
	return keys
}

// rollPendingMessage says why a Memcached waits, naming the first holders.
func rollPendingMessage(inFlight map[string]bool, slots int) string {
	holders := make([]string, 0, len(inFlight))
	for k := range inFlight {
		holders = append(holders, k[strings.Index(k, "/")+1:])
	}
	sort.Strings(holders)
	named := strings.Join(holders, ", ")
	if len(holders) > maxHoldersNamed {
		named = fmt.Sprintf("%s and %d more", strings.Join(holders[:maxHoldersNamed], ", "), len(holders)-maxHoldersNamed)
	}
	return fmt.Sprintf("the operator's pod template changed (a new default image or operator version); waiting for one of %d roll slots (--max-concurrent-rolls), held by %s", slots, named)
}

// rollPacer holds what the pacing keeps in memory. Safe for concurrent use.
type rollPacer struct {
	limit intstr.IntOrString

	mu sync.Mutex
	// granted holds, by namespace/name, the template hash of each slot
	// granted whose patch the Deployment cache has not shown yet.
	granted map[string]string
	// waiting holds the Memcacheds that were refused a slot since they last
	// needed none.
	waiting map[string]bool
}

func newRollPacer(limit intstr.IntOrString) *rollPacer {
	return &rollPacer{limit: limit, granted: map[string]string{}, waiting: map[string]bool{}}
}

// PaceRolls sets --max-concurrent-rolls (see ParseMaxConcurrentRolls). Call
// it before h handles any event.
func (h *Handler) PaceRolls(limit intstr.IntOrString) {
	h.rolls = newRollPacer(limit)
}

// rollsInFlight returns the Memcacheds that hold a slot, by namespace/name:
// those whose Deployment memcached.PacedRollInFlight, as the caches show them,
// and those granted one that the cache does not show yet; and the slots there
// are for the Memcacheds' Deployments. It forgets the grants that the cache
// shows. It reads the Deployment cache, not the Memcacheds the SDK has
// delivered so far, which right after a start are only some of them. The caller
// holds h.rolls.mu.
func (h *Handler) rollsInFlight() (inFlight map[string]bool, slots int, err error) {
	p := h.rolls
	deployments, err := h.client.ListDeployments()
	if err != nil {
		return nil, 0, err
	}
	inFlight = map[string]bool{}
	seen := map[string]bool{}
	for _, d := range deployments {
		if !h.pacedChild(d) {
			continue
		}
		key := d.Namespace + "/" + d.Name
		seen[key] = true
		if hash, ok := p.granted[key]; ok {
			if memcached.TemplateOf(d) != hash {
				inFlight[key] = true
				continue
			}
			delete(p.granted, key)
		}
		if d.Spec.Template.Annotations[memcached.PacedRollAnnotation] == "" {
			continue
		}
		pods, err := h.client.ListPods(d.Namespace, d.Name)
		if err != nil {
			return nil, 0, err
		}
		if memcached.PacedRollInFlight(d, memcached.OwnPods(d.Name, pods)) {
			inFlight[key] = true
		}
	}
	for key := range p.granted {
		if seen[key] {
			continue
		}
		if _, ok := h.memcacheds.get(key); !ok {
			delete(p.granted, key)
			continue
		}
		inFlight[key] = true
	}
	return inFlight, rollSlots(p.limit, len(seen)), nil
}

// pacedChild reports whether d counts for the pacing: it is the Deployment
// that the operator makes for a Memcached, in a namespace the handler
// serves. Anyone who may create Deployments may give one a controller
// reference to a Memcached, so a tenant could otherwise fill every slot
// with Deployments of its own whose rolls never end. The operator's
// Deployment is the one of the Memcached's name, controlled by a Memcached
// of this API group; when the handler knows that Memcached, the reference
// must name its UID. A Memcached the handler does not know yet, as right
// after a start, before the SDK has delivered every one, still counts, so
// that a restart never starts more rolls than the limit; a reference to
// one that does not exist lasts only until the garbage collector, which
// deletes the dependents of missing owners, removes the Deployment.
func (h *Handler) pacedChild(d *appsv1.Deployment) bool {
	owner := metav1.GetControllerOf(d)
	if owner == nil || owner.Kind != v1alpha1.Kind || owner.Name != d.Name {
		return false
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != v1alpha1.GroupName {
		return false
	}
	if h.serves != nil && !h.serves(d.Namespace) {
		return false
	}
	uid, known := h.memcacheds.uid(d.Namespace + "/" + d.Name)
	return !known || uid == owner.UID
}

// acquireRoll decides whether the Memcached key may now start a paced roll
// to the template hash. If so, the slot is its own until the caches show the
// roll done, or releaseRoll; if not, key waits for wakeRolls, and the
// returned message says why for its Progressing condition.
func (h *Handler) acquireRoll(key, hash string) (ok bool, pending string) {
	p := h.rolls
	p.mu.Lock()
	defer p.mu.Unlock()
	inFlight, slots, err := h.rollsInFlight()
	if err != nil {
		// Without the count, no slot: the next reconcile tries again.
		p.waiting[key] = true
		return false, fmt.Sprintf("the operator's pod template changed; waiting for a roll slot (--max-concurrent-rolls), but the rolls in flight cannot be counted: %v", err)
	}
	if !mayStartRoll(key, inFlight, slots) {
		p.waiting[key] = true
		return false, rollPendingMessage(inFlight, slots)
	}
	delete(p.waiting, key)
	p.granted[key] = hash
	logrus.Infof("memcached %s starts a paced roll to the operator's pod template %s (%d of %d slots held)", key, hash, len(inFlight)+1, slots)
	return true, ""
}

// releaseRoll gives back key's grant after its patch failed.
func (h *Handler) releaseRoll(key string) {
	h.rolls.mu.Lock()
	defer h.rolls.mu.Unlock()
	delete(h.rolls.granted, key)
}

// releaseStaleGrant gives back key's grant when it was for another template
// than hash, the one the spec now asks for: a spec change came before the
// cache showed the paced patch, and the cache will never show a template
// of the granted hash, which would otherwise hold the slot for good.
func (h *Handler) releaseStaleGrant(key, hash string) {
	h.rolls.mu.Lock()
	granted, ok := h.rolls.granted[key]
	stale := ok && granted != hash
	if stale {
		delete(h.rolls.granted, key)
	}
	h.rolls.mu.Unlock()
	if stale {
		h.wakeRolls()
	}
}

// rollNotWaiting records that key needs no slot: its template is the
// desired one, or its own spec change rolls it.
func (h *Handler) rollNotWaiting(key string) {
	h.rolls.mu.Lock()
	defer h.rolls.mu.Unlock()
	delete(h.rolls.waiting, key)
}

// forgetRoll drops what the pacer knows of key, a Memcached that is gone,
// and wakes the waiting ones in case it held a slot.
func (h *Handler) forgetRoll(key string) {
	h.rolls.mu.Lock()
	delete(h.rolls.waiting, key)
	delete(h.rolls.granted, key)
	h.rolls.mu.Unlock()
	h.wakeRolls()
}

// wakeRolls queues the waiting Memcacheds that free slots go to, first by
// name. It costs a pass over every Memcached, so it runs only while some
// wait, after a slot may have been freed.
func (h *Handler) wakeRolls() {
	p := h.rolls
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiting) == 0 {
		return
	}
	inFlight, slots, err := h.rollsInFlight()
	if err != nil {
		// The waiting ones retry on their next reconcile or the resync.
		logrus.Warnf("cannot count the paced rolls in flight: %v", err)
		return
	}
	for _, key := range toWake(p.waiting, inFlight, slots) {
		h.work().Add(key)
	}
}
