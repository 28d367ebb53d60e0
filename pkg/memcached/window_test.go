package memcached_test

import (
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached"
)

// utc returns the time of day hh:mm:ss on 2026-12-d in UTC. December 2026
// begins on a Tuesday: the 5th is a Saturday, the 6th a Sunday, the 7th a
// Monday.
func utc(d, hh, mm, ss int) time.Time {
	return time.Date(2026, time.December, d, hh, mm, ss, 0, time.UTC)
}

func TestWindowAt(t *testing.T) {
	sunday3am := memcached.Window{Day: time.Sunday, Start: 3 * time.Hour, Duration: 2 * time.Hour}
	// Saturday 23:00 to Sunday 02:00: across midnight, and across the
	// wrap of time.Weekday from Saturday (6) to Sunday (0).
	saturdayNight := memcached.Window{Day: time.Saturday, Start: 23 * time.Hour, Duration: 3 * time.Hour}
	// Sunday 22:00 to Monday 02:00: across the end of an ISO week.
	sundayNight := memcached.Window{Day: time.Sunday, Start: 22 * time.Hour, Duration: 4 * time.Hour}
	allMonday := memcached.Window{Day: time.Monday, Start: 0, Duration: 24 * time.Hour}
	tests := []struct {
		name      string
		window    memcached.Window
		at        time.Time
		wantOpen  bool
		wantUntil time.Time
	}{
		{"inside", sunday3am, utc(6, 4, 0, 0), true, utc(6, 5, 0, 0)},
		{"exactly at the start", sunday3am, utc(6, 3, 0, 0), true, utc(6, 5, 0, 0)},
		{"just before the start", sunday3am, utc(6, 3, 0, 0).Add(-time.Nanosecond), false, utc(6, 3, 0, 0)},
		{"just before the end", sunday3am, utc(6, 5, 0, 0).Add(-time.Nanosecond), true, utc(6, 5, 0, 0)},
		{"exactly at the end", sunday3am, utc(6, 5, 0, 0), false, utc(13, 3, 0, 0)},
		{"earlier in the week", sunday3am, utc(2, 10, 0, 0), false, utc(6, 3, 0, 0)},
		{"the day after", sunday3am, utc(7, 3, 30, 0), false, utc(13, 3, 0, 0)},
		{"across midnight, before it", saturdayNight, utc(5, 23, 30, 0), true, utc(6, 2, 0, 0)},
		{"across midnight, after it", saturdayNight, utc(6, 1, 0, 0), true, utc(6, 2, 0, 0)},
		{"across midnight, at its end", saturdayNight, utc(6, 2, 0, 0), false, utc(12, 23, 0, 0)},
		{"across midnight, the Saturday before", saturdayNight, utc(5, 22, 59, 59), false, utc(5, 23, 0, 0)},
		{"across the week's end, on Sunday", sundayNight, utc(6, 23, 0, 0), true, utc(7, 2, 0, 0)},
		{"across the week's end, on Monday", sundayNight, utc(7, 1, 59, 59), true, utc(7, 2, 0, 0)},
		{"across the week's end, at its end on Monday", sundayNight, utc(7, 2, 0, 0), false, utc(13, 22, 0, 0)},
		{"across the week's end, before it on Sunday", sundayNight, utc(6, 21, 0, 0), false, utc(6, 22, 0, 0)},
		{"a whole day, at its last second", allMonday, utc(7, 23, 59, 59), true, utc(8, 0, 0, 0)},
		{"a whole day, the next midnight", allMonday, utc(8, 0, 0, 0), false, utc(14, 0, 0, 0)},
		// Only the instant counts: 04:30 at UTC+2 is 02:30 UTC, before the
		// window, whatever the zone's own clocks say.
		{"a time in another zone", sunday3am, time.Date(2026, time.December, 6, 4, 30, 0, 0, time.FixedZone("UTC+2", 2*3600)), false, utc(6, 3, 0, 0)},
		// Europe moves its clocks on the last Sunday of March at 01:00 UTC;
		// UTC itself never does, so the window is where it always is.
		{"on a day that Europe moves its clocks", sunday3am, time.Date(2027, time.March, 28, 2, 0, 0, 0, time.UTC), false, time.Date(2027, time.March, 28, 3, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open, until := tt.window.At(tt.at)
			if open != tt.wantOpen || !until.Equal(tt.wantUntil) || until.Location() != time.UTC {
				t.Errorf("%v.At(%v): got %v until %v, want %v until %v UTC", tt.window, tt.at, open, until, tt.wantOpen, tt.wantUntil)
			}
		})
	}
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in      string
		want    memcached.Window
		wantErr string
	}{
		{in: "Sunday 03:00 2h", want: memcached.Window{Day: time.Sunday, Start: 3 * time.Hour, Duration: 2 * time.Hour}},
		{in: "  Saturday   23:59 1h30m ", want: memcached.Window{Day: time.Saturday, Start: 23*time.Hour + 59*time.Minute, Duration: 90 * time.Minute}},
		{in: "Monday 00:00 24h", want: memcached.Window{Day: time.Monday, Duration: 24 * time.Hour}},
		{in: "Monday 00:00 60m", want: memcached.Window{Day: time.Monday, Duration: time.Hour}},
		{in: "Sun 03:00 2h", wantErr: `day "Sun" must be a weekday from Monday to Sunday`},
		{in: "sunday 03:00 2h", wantErr: `day "sunday" must be a weekday`},
		{in: "Sunday 3:00 2h", wantErr: `start "3:00" must be a time of day in UTC as HH:MM`},
		{in: "Sunday 24:00 2h", wantErr: `start "24:00" must be`},
		{in: "Sunday 03:60 2h", wantErr: `start "03:60" must be`},
		{in: "Sunday 03:00 59m", wantErr: "duration 59m0s must be whole minutes from 1h to 24h"},
		{in: "Sunday 03:00 24h1m", wantErr: "duration 24h1m0s must be whole minutes"},
		{in: "Sunday 03:00 1h30s", wantErr: "duration 1h0m30s must be whole minutes"},
		{in: "Sunday 03:00 two", wantErr: `the duration "two" is no Go duration`},
		{in: "Sunday 03:00", wantErr: "must be a weekday, a start time in UTC and a duration"},
		{in: "Sunday 03:00 2h UTC", wantErr: "must be a weekday, a start time in UTC and a duration"},
	}
	for _, tt := range tests {
		got, err := memcached.ParseWindow(tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ParseWindow(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseWindow(%q): got %v, %v, want an error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestWindowString(t *testing.T) {
	for _, s := range []string{"Sunday 03:00 2h", "Saturday 23:59 1h30m", "Monday 00:00 24h"} {
		w, err := memcached.ParseWindow(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.String(); got != s {
			t.Errorf("got %q, want %q", got, s)
		}
	}
}
