package memcached

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
)

const (
	// ReasonWaitingForMaintenanceWindow is the reason of a Progressing
	// condition that is True while the operator's pod template changed for
	// the Memcached and the roll waits for its maintenance window to open;
	// the message gives the time of the next opening in RFC 3339, UTC.
	ReasonWaitingForMaintenanceWindow = "WaitingForMaintenanceWindow"

	// minWindowDuration and maxWindowDuration bound a window's duration,
	// as ElastiCache bounds its own: shorter than an hour leaves a fleet
	// roll too little time to start, and a window of more than a day a
	// week is no window. deploy/crd.yaml's rule holds the same bounds.
	minWindowDuration = time.Hour
	maxWindowDuration = 24 * time.Hour
)

// windowStartPattern is the form of a window's start, HH:MM on a 24-hour
// clock; deploy/crd.yaml holds the same pattern.
var windowStartPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// Window is a weekly maintenance window in UTC, parsed and checked (see
// ParseWindow and WindowOf). The zero Window is not a valid one.
type Window struct {
	// Day is the weekday on which the window opens.
	Day time.Weekday
	// Start is when, after midnight UTC of Day, it opens.
	Start time.Duration
	// Duration is how long it stays open.
	Duration time.Duration
}

// String returns w in the form ParseWindow reads, such as "Sunday 03:00 2h"
// or "Sunday 22:00 1h30m".
func (w Window) String() string {
	d := fmt.Sprintf("%dh", int(w.Duration.Hours()))
	if m := int(w.Duration.Minutes()) % 60; m != 0 {
		d += fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%s %02d:%02d %s", w.Day, int(w.Start.Hours()), int(w.Start.Minutes())%60, d)
}

// At reports whether w is open at t, and until when that holds: the
// window's close while it is open, its next opening while it is closed.
// A window opens at its start, inclusive, and closes at its end,
// exclusive. Everything is computed in UTC, which has no daylight saving
// time, so a week is always 7 days of 24 hours.
func (w Window) At(t time.Time) (open bool, until time.Time) {
	t = t.UTC()
	days := (int(t.Weekday()) - int(w.Day) + 7) % 7
	start := time.Date(t.Year(), t.Month(), t.Day()-days, 0, 0, 0, 0, time.UTC).Add(w.Start)
	if start.After(t) {
		start = start.AddDate(0, 0, -7)
	}
	if end := start.Add(w.Duration); t.Before(end) {
		return true, end
	}
	return false, start.AddDate(0, 0, 7)
}

// ParseWindow parses the operator's --maintenance-window, which has the
// fields of spec.maintenanceWindow separated by spaces: a weekday as in
// spec.maintenanceWindow.day, a start as HH:MM in UTC and a duration, such
// as "Sunday 03:00 2h".
func ParseWindow(s string) (Window, error) {
	fields := strings.Fields(s)
	if len(fields) != 3 {
		return Window{}, fmt.Errorf("%s must be a weekday, a start time in UTC and a duration, such as \"Sunday 03:00 2h\"", quoted(s))
	}
	d, err := time.ParseDuration(fields[2])
	if err != nil {
		return Window{}, fmt.Errorf("%s: the duration %s is no Go duration, such as 2h or 1h30m", quoted(s), quoted(fields[2]))
	}
	w, err := newWindow(fields[0], fields[1], d)
	if err != nil {
		return Window{}, fmt.Errorf("%s: %v", quoted(s), err)
	}
	return w, nil
}

// WindowOf returns the Window of a spec.maintenanceWindow. The CRD's schema
// refuses what it refuses; it repeats the checks for resources stored
// before the schema had the field's rules (see ValidateSpec).
func WindowOf(mw *v1alpha1.MaintenanceWindow) (Window, error) {
	return newWindow(mw.Day, mw.Start, mw.Duration.Duration)
}

// weekdays maps the names that a window's day may have to weekdays.
var weekdays = func() map[string]time.Weekday {
	m := map[string]time.Weekday{}
	for d := time.Sunday; d <= time.Saturday; d++ {
		m[d.String()] = d
	}
	return m
}()

// newWindow checks and returns the window of day, start and duration.
func newWindow(day, start string, duration time.Duration) (Window, error) {
	d, ok := weekdays[day]
	if !ok {
		return Window{}, fmt.Errorf("day %s must be a weekday from Monday to Sunday", quoted(day))
	}
	if !windowStartPattern.MatchString(start) {
		return Window{}, fmt.Errorf("start %s must be a time of day in UTC as HH:MM, from 00:00 to 23:59", quoted(start))
	}
	hours, _ := strconv.Atoi(start[:2])
	minutes, _ := strconv.Atoi(start[3:])
	if duration < minWindowDuration || duration > maxWindowDuration || duration%time.Minute != 0 {
		return Window{}, fmt.Errorf("duration %v must be whole minutes from 1h to 24h", duration)
	}
	return Window{Day: d, Start: time.Duration(hours)*time.Hour + time.Duration(minutes)*time.Minute, Duration: duration}, nil
}
