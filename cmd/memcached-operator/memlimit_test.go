package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGoMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct {
		limit, want int64
	}{
		{1024 * mi, 1024*mi - 1024*mi/10}, // a tenth
		{4096 * mi, 4096*mi - 4096*mi/10},
		{256 * mi, 224 * mi}, // a tenth is under 32 MiB
		{64 * mi, 32 * mi},   // never under half
		{32 * mi, 16 * mi},
	} {
		if got := goMemoryLimit(c.limit); got != c.want {
			t.Errorf("goMemoryLimit(%d MiB) = %d, want %d", c.limit/mi, got, c.want)
		}
	}
}

func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    int64 // the runtime's limit afterwards
		message string
		err     bool
	}{
		{"the container's limit", map[string]string{"MEMORY_LIMIT": "1073741824"}, 966367642, "limit is 921 MiB, below the container's 1024 MiB", false},
		{"GOMEMLIMIT wins", map[string]string{"MEMORY_LIMIT": "1073741824", "GOMEMLIMIT": "40MiB"}, math.MaxInt64, "GOMEMLIMIT=40MiB sets", false},
		{"no limit", nil, math.MaxInt64, "no MEMORY_LIMIT", false},
		{"not bytes", map[string]string{"MEMORY_LIMIT": "1Gi"}, math.MaxInt64, "", true},
		{"zero", map[string]string{"MEMORY_LIMIT": "0"}, math.MaxInt64, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			message, err := setMemoryLimit(func(k string) string { return c.env[k] })
			if (err != nil) != c.err {
				t.Fatalf("setMemoryLimit: %v, want an error: %v", err, c.err)
			}
			if !strings.Contains(message, c.message) {
				t.Errorf("message %q, want it to hold %q", message, c.message)
			}
			if got := debug.SetMemoryLimit(-1); got != c.want {
				t.Errorf("the runtime's limit is %d, want %d", got, c.want)
			}
		})
	}
}
