package framework

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// MemcachedTimeout bounds each memcached request of the helpers below; the suites
// only talk to pod IPs on this machine's bridge.
const MemcachedTimeout = 2 * time.Second

// MemcachedSetGet stores key=value in the memcached at addr and reads it back.
func MemcachedSetGet(addr, key, value string) error {
	c := memcache.New(addr)
	c.Timeout = MemcachedTimeout
	defer c.Close()
	if err := c.Set(&memcache.Item{Key: key, Value: []byte(value)}); err != nil {
		return fmt.Errorf("set %s on %s: %v", key, addr, err)
	}
	return MemcachedGet(addr, key, value)
}

// MemcachedGet reads key from the memcached at addr and checks its value.
func MemcachedGet(addr, key, want string) error {
	c := memcache.New(addr)
	c.Timeout = MemcachedTimeout
	defer c.Close()
	it, err := c.Get(key)
	if err != nil {
		return fmt.Errorf("get %s from %s: %v", key, addr, err)
	}
	if string(it.Value) != want {
		return fmt.Errorf("get %s from %s = %q, want %q", key, addr, it.Value, want)
	}
	return nil
}

// MemcachedStats returns memcached's general-purpose statistics (`stats`) from addr; the
// client library has no call for them, and the text protocol is simple.
func MemcachedStats(addr string) (map[string]string, error) {
	return memcachedStatsGroup(addr, "")
}

// memcachedStatsGroup returns `stats <group>` from addr, the general stats for "". A value
// may hold spaces, as some of `stats settings` do.
func memcachedStatsGroup(addr, group string) (map[string]string, error) {
	conn, err := net.DialTimeout("tcp", addr, MemcachedTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(MemcachedTimeout)); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "%s\r\n", strings.TrimSpace("stats "+group)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "END" {
			return out, nil
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			return nil, fmt.Errorf("unexpected stats line %q", line)
		}
		out[f[1]] = f[2]
	}
	return nil, fmt.Errorf("stats %s from %s ended without END: %v", group, addr, sc.Err())
}
