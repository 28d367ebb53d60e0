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

// ProcessPeakRSS returns the peak resident set size of process pid so far, its
// VmHWM in /proc/PID/status, in bytes.
func ProcessPeakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM: %v", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
}
