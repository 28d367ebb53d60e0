package stub

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

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
// caches, through an index of them (see rollPacer). Only two things are kept
// in memory besides: the slots granted whose patch the cache has not shown
// yet, so that two workers never take the same slot, and which Memcacheds
// wait, so that a freed slot wakes the next one by name.

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

// toWake returns the waiting Memcacheds, kept sorted by namespace/name,
// that the free slots go to, first by name. It reads only as far into
// waiting as it must: the free slots and the holders it passes over.
func toWake(waiting []string, holders map[string]bool, slots int) []string {
	free := slots - len(holders)
	var keys []string
	for _, k := range waiting {
		if len(keys) >= free {
			break
		}
		if !holders[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// rollPendingMessage says why a Memcached waits, naming the first holders.
func rollPendingMessage(holders map[string]bool, slots int) string {
	names := make([]string, 0, len(holders))
	for k := range holders {
		names = append(names, k[strings.Index(k, "/")+1:])
	}
	sort.Strings(names)
	named := strings.Join(names, ", ")
	if len(names) > maxHoldersNamed {
		named = fmt.Sprintf("%s and %d more", strings.Join(names[:maxHoldersNamed], ", "), len(names)-maxHoldersNamed)
	}
	return fmt.Sprintf("the operator's pod template changed (a new default image or operator version); waiting for one of %d roll slots (--max-concurrent-rolls), held by %s", slots, named)
}

// rollPacer holds the pacing's index of the Deployment cache and what the
// pacing keeps in memory besides. Safe for concurrent use.
//
// The index makes a slot decision cost the same at 10 Memcacheds as at
// 10,000: a whole pass over the cache happens once, when the first decision
// needs the index (seed), and after that each reconcile brings its own
// Memcached's entry up to date (observeRoll) from the Deployment it reads
// anyway. That keeps the index true because every change that can end or
// start a roll in flight queues the Memcached whose entry it is: a change of
// its Deployment's spec, labels, owner or rollout completeness, or of one of
// its pods (kube.CachedClient.OnChildChange), its deletion, and its
// Memcached's (forgetRoll). An entry that misses a change only ever holds a
// slot too long, and the next change of its Deployment or pods, or the
// resync, sets it right.
type rollPacer struct {
	limit intstr.IntOrString
	// waited, if set, is told how long each caller waited for mu.
	waited func(time.Duration)

	mu sync.Mutex
	// seeded reports whether children and rolling hold the whole
	// Deployment cache's view.
	seeded bool
	// children holds, by namespace/name, the Memcacheds whose Deployment
	// counts for the pacing (pacedChild); their number is what a
	// percentage of --max-concurrent-rolls is of.
	children map[string]bool
	// rolling holds those whose Deployment memcached.PacedRollInFlight.
	rolling map[string]bool
	// granted holds, by namespace/name, the template hash of each slot
	// granted whose patch the Deployment cache has not shown yet.
	granted map[string]string
	// holders is rolling and the keys of granted: the slots held.
	holders map[string]bool
	// waiting holds, sorted, the Memcacheds that were refused a slot
	// since they last needed none.
	waiting []string
	// pending is the RollPending message for holders at pendingVersion
	// and pendingSlots slots, computed once for every refusal until
	// either changes.
	pending                      string
	pendingVersion, pendingSlots int
	// version counts the changes of holders.
	version int
}

func newRollPacer(limit intstr.IntOrString) *rollPacer {
	return &rollPacer{
		limit:    limit,
		children: map[string]bool{},
		rolling:  map[string]bool{},
		granted:  map[string]string{},
		holders:  map[string]bool{},
	}
}

// lock takes mu, telling waited how long that took.
func (p *rollPacer) lock() {
	start := time.Now()
	p.mu.Lock()
	if p.waited != nil {
		p.waited(time.Since(start))
	}
}

// PaceRolls sets --max-concurrent-rolls (see ParseMaxConcurrentRolls). Call
// it before h handles any event.
func (h *Handler) PaceRolls(limit intstr.IntOrString) {
	h.rolls = newRollPacer(limit)
}

// ObservePacingWaits makes h tell waited how long each reconcile waited
// for the pacing's lock, so that the operator's metrics show whether the
// pacing ever holds up the workers. Call it after PaceRolls and before h
// handles any event.
func (h *Handler) ObservePacingWaits(waited func(time.Duration)) {
	h.rolls.waited = waited
}

// setHolder makes holders say whether key holds a slot, and reports
// whether a slot was freed.
func (p *rollPacer) setHolder(key string) (freed bool) {
	_, granted := p.granted[key]
	held := p.rolling[key] || granted
	if held == p.holders[key] {
		return false
	}
	p.version++
	if held {
		p.holders[key] = true
		return false
	}
	delete(p.holders, key)
	return true
}

// setEntry records what the Deployment cache shows of key: whether its
// Deployment counts for the pacing, whether its paced roll is in flight,
// and its template hash, which ends a grant whose patch it shows. It
// reports whether that may have freed a slot.
func (p *rollPacer) setEntry(key string, child, rolling bool, template string) (freed bool) {
	total := len(p.children)
	if child {
		p.children[key] = true
	} else {
		delete(p.children, key)
	}
	if child && rolling {
		p.rolling[key] = true
	} else {
		delete(p.rolling, key)
	}
	if hash, ok := p.granted[key]; ok && (!child || hash == template) {
		delete(p.granted, key)
	}
	return p.setHolder(key) || len(p.children) != total
}

// entryOf returns what the index keeps of d, key's Deployment as the cache
// shows it, or nil: whether it counts for the pacing and whether its paced
// roll is in flight, judged from its pods when its controller has not
// told yet (see memcached.PacedRollInFlight).
func (h *Handler) entryOf(d *appsv1.Deployment) (child, rolling bool, err error) {
	if d == nil || !h.pacedChild(d) {
		return false, false, nil
	}
	if d.Spec.Template.Annotations[memcached.PacedRollAnnotation] == "" || memcached.RolloutComplete(d) {
		return true, false, nil
	}
	pods, err := h.client.ListPods(d.Namespace, d.Name)
	if err != nil {
		return true, true, err
	}
	return true, memcached.PacedRollInFlight(d, memcached.OwnPods(d.Name, pods)), nil
}

// observeRoll brings key's entry of the index up to date with d, key's
// Deployment as the cache shows it, or nil when it has none, and wakes the
// waiting Memcacheds if a slot may have been freed. Pods that cannot be
// listed count as a roll in flight: the entry holds its slot until the
// next reconcile can tell.
func (h *Handler) observeRoll(key string, d *appsv1.Deployment) {
	child, rolling, err := h.entryOf(d)
	if err != nil {
		logrus.Warnf("cannot tell whether the paced roll of memcached %s is in flight: %v", key, err)
	}
	p := h.rolls
	p.lock()
	freed := p.setEntry(key, child, rolling, templateOf(d))
	p.mu.Unlock()
	if freed {
		h.wakeRolls()
	}
}

// templateOf returns memcached.TemplateOf(d), or "" for no Deployment.
func templateOf(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	return memcached.TemplateOf(d)
}

// seed fills the index from a pass over the Deployment cache, once: it
// reads the cache, not the Memcacheds the SDK has delivered so far, which
// right after a start are only some of them, so that a restart never
// starts more rolls than the limit. The caller holds h.rolls.mu.
func (h *Handler) seed() error {
	p := h.rolls
	if p.seeded {
		return nil
	}
	deployments, err := h.client.ListDeployments()
	if err != nil {
		return err
	}
	for _, d := range deployments {
		child, rolling, err := h.entryOf(d)
		if err != nil {
			return err
		}
		p.setEntry(d.Namespace+"/"+d.Name, child, rolling, memcached.TemplateOf(d))
	}
	p.seeded = true
	return nil
}

// slots returns how many slots there are for the Memcacheds the index
// holds. The caller holds h.rolls.mu.
func (p *rollPacer) slots() int {
	return rollSlots(p.limit, len(p.children))
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
// that a restart never starts more rolls than the limit; a reference to one
// that does not exist lasts only until the garbage collector, which deletes
// the dependents of missing owners, removes the Deployment. Its labels do
// not matter: someone who changes its memcached_cr label must not free its
// slot, though the changes of such a Deployment no longer queue its
// Memcached, so its entry waits for the resync or the label's restore.
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
// to the template hash. If so, the slot is its own until the cache shows
// the roll done, or releaseRoll; if not, key waits for wakeRolls, and the
// returned message says why for its Progressing condition.
func (h *Handler) acquireRoll(key, hash string) (ok bool, pending string) {
	p := h.rolls
	p.lock()
	defer p.mu.Unlock()
	if err := h.seed(); err != nil {
		// Without the count, no slot: the next reconcile tries again.
		p.wait(key)
		return false, fmt.Sprintf("the operator's pod template changed; waiting for a roll slot (--max-concurrent-rolls), but the rolls in flight cannot be counted: %v", err)
	}
	slots := p.slots()
	if !mayStartRoll(key, p.holders, slots) {
		p.wait(key)
		return false, p.pendingMessage(slots)
	}
	p.stopWaiting(key)
	p.granted[key] = hash
	p.setHolder(key)
	logrus.Infof("memcached %s starts a paced roll to the operator's pod template %s (%d of %d slots held)", key, hash, len(p.holders), slots)
	return true, ""
}

// pendingMessage returns rollPendingMessage for the holders and slots,
// computing it only when they changed. The caller holds p.mu.
func (p *rollPacer) pendingMessage(slots int) string {
	if p.pending == "" || p.pendingVersion != p.version || p.pendingSlots != slots {
		p.pending, p.pendingVersion, p.pendingSlots = rollPendingMessage(p.holders, slots), p.version, slots
	}
	return p.pending
}

// wait records that key waits for a slot. The caller holds p.mu.
func (p *rollPacer) wait(key string) {
	if i, found := slices.BinarySearch(p.waiting, key); !found {
		p.waiting = slices.Insert(p.waiting, i, key)
	}
}

// stopWaiting records that key no longer waits. The caller holds p.mu.
func (p *rollPacer) stopWaiting(key string) {
	if i, found := slices.BinarySearch(p.waiting, key); found {
		p.waiting = slices.Delete(p.waiting, i, i+1)
	}
}

// releaseRoll gives back key's grant after its patch failed.
func (h *Handler) releaseRoll(key string) {
	p := h.rolls
	p.lock()
	delete(p.granted, key)
	freed := p.setHolder(key)
	p.mu.Unlock()
	if freed {
		h.wakeRolls()
	}
}

// releaseStaleGrant gives back key's grant when it was for another template
// than hash, the one the spec now asks for: a spec change came before the
// cache showed the paced patch, and the cache will never show a template
// of the granted hash, which would otherwise hold the slot for good.
func (h *Handler) releaseStaleGrant(key, hash string) {
	p := h.rolls
	p.lock()
	granted, ok := p.granted[key]
	freed := false
	if ok && granted != hash {
		delete(p.granted, key)
		freed = p.setHolder(key)
	}
	p.mu.Unlock()
	if freed {
		h.wakeRolls()
	}
}

// rollNotWaiting records that key needs no slot: its template is the
// desired one, or its own spec change rolls it.
func (h *Handler) rollNotWaiting(key string) {
	p := h.rolls
	p.lock()
	defer p.mu.Unlock()
	p.stopWaiting(key)
}

// forgetRoll drops what the pacer knows of key, a Memcached that is gone,
// and wakes the waiting ones in case it held a slot. Its Deployment, while
// the garbage collector has not removed it, enters the index again at the
// next change that queues key (see reconcileKey).
func (h *Handler) forgetRoll(key string) {
	p := h.rolls
	p.lock()
	p.stopWaiting(key)
	delete(p.granted, key)
	p.setEntry(key, false, false, "")
	p.mu.Unlock()
	h.wakeRolls()
}

// wakeRolls queues the waiting Memcacheds that free slots go to, first by
// name. It costs in proportion to the slots free, so any step that may
// have freed one calls it.
func (h *Handler) wakeRolls() {
	p := h.rolls
	p.lock()
	defer p.mu.Unlock()
	if len(p.waiting) == 0 {
		return
	}
	if err := h.seed(); err != nil {
		// The waiting ones retry on their next reconcile or the resync.
		logrus.Warnf("cannot count the paced rolls in flight: %v", err)
		return
	}
	for _, key := range toWake(p.waiting, p.holders, p.slots()) {
		h.work().Add(key)
	}
}
