package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// processState returns the state letter of /proc/PID/stat: R, S, D, T, Z...
func processState(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	fields, err := statFields(pid, data)
	if err != nil {
		return "", err
	}
	return fields[0], nil
}

// ProcessCPU returns the CPU time, user and system, that process pid has used.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	fields, err := statFields(pid, data)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * time.Second / 100, nil
}

// MachineCPU returns the time every core of the machine has spent busy,
// and idle (idle and iowait), since it booted: the first line of
// /proc/stat.
func MachineCPU() (busy, idle time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal: guest and
	// guest_nice, after them, are already counted in user and nice.
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	var ticks [8]int64
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %v", err)
		}
	}
	busyTicks := ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
	idleTicks := ticks[3] + ticks[4]
	return time.Duration(busyTicks) * time.Second / 100, time.Duration(idleTicks) * time.Second / 100, nil
}

// statFields returns the fields of /proc/PID/stat after the command name, from
// state (field 3 of proc(5)) on: utime and stime are then fields[11:13].
func statFields(pid int, data []byte) ([]string, error) {
	// The command name, in parentheses, may itself hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return fields, nil
}

// ProcessMemory is what /proc/PID/status says of a process's memory, in
// bytes.
type ProcessMemory struct {
	// PeakRSS is the peak resident set size so far (VmHWM).
	PeakRSS int64
	// RSSAnon and RSSFile split the current resident set: anonymous memory,
	// such as a Go heap and stacks, and pages mapped from files, such as
	// the program's own code.
	RSSAnon, RSSFile int64
}

// ProcessMemoryOf returns the memory figures of process pid.
func ProcessMemoryOf(pid int) (ProcessMemory, error) {
	var m ProcessMemory
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmHWM": &m.PeakRSS, "RssAnon": &m.RSSAnon, "RssFile": &m.RSSFile}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		field, wanted := fields[name]
		if !ok || !wanted {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*field = kb << 10
		delete(fields, name)
	}
	if len(fields) > 0 {
		return m, fmt.Errorf("/proc/%d/status lacks %d of VmHWM, RssAnon and RssFile", pid, len(fields))
	}
	return m, nil
}
