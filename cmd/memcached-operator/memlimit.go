package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// memoryLimitEnv names the environment variable that holds the container's
// memory limit in bytes, which deploy/operator.yaml sets through the
// downward API (resourceFieldRef limits.memory).
const memoryLimitEnv = "MEMORY_LIMIT"

// minMemoryHeadroom is the least room goMemoryLimit leaves between the Go
// runtime's limit and the container's: the operator's binary alone maps
// about 22 MiB of file pages, which the container's limit counts and the
// runtime's does not.
const minMemoryHeadroom = 32 << 20

// goMemoryLimit returns the Go runtime's soft memory limit for a container
// whose memory limit is limit bytes: a tenth below it, and at least
// minMemoryHeadroom, but never under half of it. The runtime's limit
// counts only the memory it maps itself, and under it the collector lets
// the heap grow to the limit before it works hard: a new leader's first
// lists, whose decoding makes garbage faster than the collector returns
// it, then fill whatever the limit allows. Set to the container's limit
// itself, the process reached 1041 MiB of a 1Gi limit at 10,000 resources
// (test/README.md, Capacity).
func goMemoryLimit(limit int64) int64 {
	headroom := max(limit/10, minMemoryHeadroom)
	return max(limit-headroom, limit/2)
}

// setMemoryLimit sets the Go runtime's memory limit from the container's
// limit in memoryLimitEnv, unless GOMEMLIMIT, which the runtime reads
// itself, is set, or there is no limit. It returns what it did, for the
// log, or an error for a value that is not a positive number of bytes.
func setMemoryLimit(getenv func(string) string) (string, error) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " sets the Go runtime's memory limit", nil
	}
	v := getenv(memoryLimitEnv)
	if v == "" {
		return "no " + memoryLimitEnv + ": the Go runtime has no memory limit", nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return "", fmt.Errorf("%s=%q: want the container's memory limit in bytes, as the downward API's resourceFieldRef limits.memory gives it", memoryLimitEnv, v)
	}
	goLimit := goMemoryLimit(limit)
	debug.SetMemoryLimit(goLimit)
	return fmt.Sprintf("the Go runtime's memory limit is %d MiB, below the container's %d MiB (%s)", goLimit>>20, limit>>20, memoryLimitEnv), nil
}
