package stub

import (
	"fmt"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
)

// A roll that the operator makes on its own, for a new --memcached-image or
// --sidecar-image or the pod template of a new operator release, costs every
// replaced pod its keys, which a cache's clients feel most at their peak.
// Such rolls start only inside the Memcached's maintenance window:
// spec.maintenanceWindow, else the operator's --maintenance-window, else
// none, and then at once, as before windows existed. Inside the window they
// are still paced by --max-concurrent-rolls. Changes of the Memcached's own
// spec never wait: the user asked for them now.
//
// The window governs when a roll starts, not when it ends: a roll that
// started inside it finishes after the window closes, since a Deployment
// paused halfway would serve from two pod templates until the next window,
// and no Memcached starts a roll after the close, so the overrun is at
// most the time one Memcached takes to replace its pods, one at a time, at
// the window's end. Nothing of the wait
// is kept in memory: whether a roll waits is computed from the window and
// the clock on every reconcile, and the waiting Memcached is queued for
// the window's opening, so it needs no resync to start.

// UseMaintenanceWindow makes w the maintenance window of every Memcached
// without spec.maintenanceWindow (--maintenance-window). Without it, those
// Memcacheds have none. Call it before h handles any event.
func (h *Handler) UseMaintenanceWindow(w memcached.Window) {
	h.window = &w
}

// windowState is a Memcached's maintenance window at one moment.
type windowState struct {
	// has is false when the Memcached has no window: the rest is unset.
	has    bool
	window memcached.Window
	// source names where the window comes from, for the status message.
	source string
	open   bool
	// now is the moment; until is when open changes next.
	now, until time.Time
}

// closed reports whether a roll of the operator's must wait for the window.
func (s windowState) closed() bool {
	return s.has && !s.open
}

// waitMessage says, for the Progressing condition, why the roll waits and
// when the window opens next, in RFC 3339 and UTC, so that a script can
// read it. It stays the same for as long as the wait does.
func (s windowState) waitMessage() string {
	return fmt.Sprintf("the operator's pod template changed (a new default or sidecar image, or operator version); the roll waits for the maintenance window %s UTC (%s), which opens next at %s",
		s.window, s.source, s.until.Format(time.RFC3339))
}

// windowAt returns m's maintenance window now: spec.maintenanceWindow,
// which ValidateSpec has checked, else the operator's default, else none.
func (h *Handler) windowAt(m *v1alpha1.Memcached) windowState {
	s := windowState{now: h.now().Time.UTC()}
	switch {
	case m.Spec.MaintenanceWindow != nil:
		s.window, _ = memcached.WindowOf(m.Spec.MaintenanceWindow)
		s.source = "spec.maintenanceWindow"
	case h.window != nil:
		s.window, s.source = *h.window, "--maintenance-window"
	default:
		return s
	}
	s.has = true
	s.open, s.until = s.window.At(s.now)
	return s
}
