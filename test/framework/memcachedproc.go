package framework

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemcachedRun says how RunMemcached starts one memcached process on this
// machine, as a pod of the operator would run it.
type MemcachedRun struct {
	// Args are memcached's arguments as the operator builds them, without
	// the program name; their "-p 11211" becomes a free port of this machine.
	Args []string
	// MemoryLimit, when not 0, is the container's memory limit in bytes:
	// memcached runs in a memory cgroup of that limit, as the kubelet runs
	// it, and its cache is filled until it evicts, so that a cache too large
	// for the limit is killed as it would be in the pod.
	MemoryLimit int64
	// Deadline bounds the whole run: start, readiness and the fill.
	Deadline time.Duration
}

// MemcachedResult is what one memcached process did.
type MemcachedResult struct {
	// Served is true when the process stayed up, answered version, a set
	// and get, and stats on its port and, with a memory limit, stayed up and answered again
	// after its cache was full.
	Served bool
	// Why says what happened when it did not serve: its exit and its last
	// output line, or which request failed.
	Why string
	// Settings are memcached's `stats settings` while it served.
	Settings map[string]string
	// Peak is the memory cgroup's peak usage in bytes with a memory limit.
	Peak int64
}

// memcachedUser is the uid and gid of memcached in the operator's pods;
// memcached refuses to run as root without -u, which the operator never
// passes.
const memcachedUser = 11211

// cgroupRoot is the cgroup v1 memory hierarchy's root, where RunMemcached
// makes one cgroup per process.
const cgroupRoot = "/sys/fs/cgroup/memory"

// portMu serialises picking a free port and binding it, so that two runs
// never pick the same port.
var portMu sync.Mutex

// RunMemcached starts Debian's memcached with r.Args on 127.0.0.1 and ::1
// (the pod's two listeners, 0.0.0.0 and ::, take as many file
// descriptors), polls its port until it answers or exits, reads its
// settings and, with a memory limit, fills its cache, then kills it. A
// process that exits is a clear no; one that binds a port another process
// took first is started again on another port.
func RunMemcached(ctx context.Context, r MemcachedRun) MemcachedResult {
	ctx, cancel := context.WithTimeout(ctx, r.Deadline)
	defer cancel()
	for attempt := 0; ; attempt++ {
		res, portTaken := runMemcachedOnce(ctx, r)
		if !portTaken || attempt == 4 {
			return res
		}
	}
}

func runMemcachedOnce(ctx context.Context, r MemcachedRun) (MemcachedResult, bool) {
	port, err := freePort()
	if err != nil {
		return MemcachedResult{Why: err.Error()}, false
	}
	args := make([]string, len(r.Args))
	copy(args, r.Args)
	for i := range args {
		if args[i] == "-p" && i+1 < len(args) && args[i+1] == "11211" {
			args[i+1] = strconv.Itoa(port)
		}
	}
	args = append(args, "-l", "127.0.0.1,::1")
	cgroup, err := newMemoryCgroup(r.MemoryLimit)
	if err != nil {
		return MemcachedResult{Why: err.Error()}, false
	}
	defer removeCgroup(cgroup)
	// The shell joins the cgroup, then becomes memcached: every byte it
	// allocates is counted, and a process it forks (--daemon) stays in the
	// cgroup, where removeCgroup kills it.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec memcached "$@"`, filepath.Join(cgroup, "cgroup.procs")}, args...)...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second // a forked child may hold the output open
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: memcachedUser, Gid: memcachedUser}
		if err := os.Chown(filepath.Join(cgroup, "cgroup.procs"), memcachedUser, memcachedUser); err != nil {
			return MemcachedResult{Why: err.Error()}, false
		}
	}
	if err := cmd.Start(); err != nil {
		return MemcachedResult{Why: err.Error()}, false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // the exit is read from cmd.ProcessState
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // gone already if it exited
		<-exited
	}()
	exitedWhy := func() string {
		return fmt.Sprintf("%s: %s", cmd.ProcessState, lastLine(out.String()))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	speak := asciiProtocol
	if binaryProtocol(args) {
		speak = binaryClient
	}
	for {
		err := speak.version(addr)
		if err == nil {
			break
		}
		select {
		case <-exited:
			why := exitedWhy()
			return MemcachedResult{Why: why}, strings.Contains(why, "Address already in use")
		case <-ctx.Done():
			return MemcachedResult{Why: fmt.Sprintf("no answer on %s: %v; output: %s", addr, err, lastLine(out.String()))}, false
		case <-time.After(50 * time.Millisecond):
		}
	}
	res := MemcachedResult{}
	if err := speak.setGet(addr); err != nil {
		res.Why = fmt.Sprintf("set and get: %v", err)
		return res, false
	}
	if _, err := speak.stats(addr, ""); err != nil {
		res.Why = fmt.Sprintf("stats: %v", err)
		return res, false
	}
	if res.Settings, err = speak.stats(addr, "settings"); err != nil {
		res.Why = fmt.Sprintf("stats settings: %v", err)
		return res, false
	}
	if r.MemoryLimit > 0 {
		fillErr := fillCache(ctx, addr, res.Settings)
		res.Peak = readInt(filepath.Join(cgroup, "memory.max_usage_in_bytes"))
		select {
		case <-exited:
			res.Why = fmt.Sprintf("filling its cache: %s (peak %d MiB)", exitedWhy(), res.Peak>>20)
			return res, false
		default:
		}
		if fillErr != nil {
			res.Why = fmt.Sprintf("filling its cache: %v", fillErr)
			return res, false
		}
		if err := speak.version(addr); err != nil {
			res.Why = fmt.Sprintf("after its cache was full: %v", err)
			return res, false
		}
	}
	select {
	case <-exited:
		res.Why = exitedWhy()
		return res, false
	default:
	}
	res.Served = true
	return res, false
}

// protocolClient asks a memcached for its version, stores and reads a key,
// and reads a group of its stats ("" for the general ones), in one of
// memcached's protocols.
type protocolClient struct {
	version func(addr string) error
	setGet  func(addr string) error
	stats   func(addr, group string) (map[string]string, error)
}

var (
	asciiProtocol = protocolClient{
		version: memcachedVersion,
		setGet:  func(addr string) error { return MemcachedSetGet(addr, "conformance", "served") },
		stats:   memcachedStatsGroup,
	}
	binaryClient = protocolClient{version: binaryVersion, setGet: binarySetGet, stats: binaryStats}
)

// binaryProtocol reports whether args ask memcached for its binary protocol
// only, which does not answer ASCII requests; the last of them counts.
func binaryProtocol(args []string) bool {
	binary := false
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--protocol="):
			binary = a == "--protocol=binary"
		case strings.HasPrefix(a, "-B") && len(a) > 2:
			binary = a == "-Bbinary"
		case (a == "-B" || a == "--protocol") && i+1 < len(args):
			binary = args[i+1] == "binary"
		}
	}
	return binary
}

// freePort returns a TCP port that is free on 127.0.0.1 and ::1.
func freePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			l6.Close()
			return port, nil
		}
	}
	return 0, errors.New("found no port free on both 127.0.0.1 and ::1")
}

// newMemoryCgroup makes a memory cgroup limited to limit bytes when limit
// is not 0.
func newMemoryCgroup(limit int64) (string, error) {
	dir, err := os.MkdirTemp(cgroupRoot, "memcached-conformance-")
	if err != nil {
		return "", fmt.Errorf("failed to make a memory cgroup (root and cgroup v1 are needed): %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // memcached's user writes cgroup.procs in it
		os.Remove(dir)
		return "", err
	}
	if limit == 0 {
		return dir, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("failed to limit %s: %v", dir, err)
	}
	return dir, nil
}

// removeCgroup kills every process in cgroup and removes it.
func removeCgroup(cgroup string) {
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			break
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL) // it may have exited since the read
			}
		}
		time.Sleep(10 * time.Millisecond) // the kernel takes a killed process out of the cgroup as it exits
	}
	_ = os.Remove(cgroup) // fails only while a process lingers, which the loop above kills
}

// fillCache stores values at addr until memcached evicts, which it does
// once its whole cache (limit_maxbytes) holds items, or until three times
// its cache size is written.
func fillCache(ctx context.Context, addr string, settings map[string]string) error {
	maxBytes, _ := strconv.ParseInt(settings["maxbytes"], 10, 64)
	conn, err := net.DialTimeout("tcp", addr, MemcachedTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	value := bytes.Repeat([]byte("v"), 32<<10)
	rd := bufio.NewReader(conn)
	for i, written := 0, int64(0); written < 3*maxBytes; i++ {
		if ctx.Err() != nil {
			return fmt.Errorf("%d MiB written: %v", written>>20, ctx.Err())
		}
		if err := conn.SetDeadline(time.Now().Add(MemcachedTimeout)); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(conn, "set k%d 0 0 %d\r\n%s\r\n", i, len(value), value); err != nil {
			return fmt.Errorf("set after %d MiB: %v", written>>20, err)
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("set after %d MiB: %v", written>>20, err)
		}
		if line != "STORED\r\n" {
			return fmt.Errorf("set after %d MiB: %q", written>>20, line)
		}
		written += int64(len(value))
		if i%64 == 63 {
			s, err := MemcachedStats(addr)
			if err != nil {
				return fmt.Errorf("stats after %d MiB: %v", written>>20, err)
			}
			if s["evictions"] != "0" {
				return nil
			}
		}
	}
	return fmt.Errorf("no eviction after %d MiB written", 3*maxBytes>>20)
}

// memcachedVersion asks addr for its version.
func memcachedVersion(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, MemcachedTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(MemcachedTimeout)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("version\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return fmt.Errorf("version: %q", line)
	}
	return nil
}

// readInt returns the number in file, or -1.
func readInt(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lockedBuffer is a bytes.Buffer that a process writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to say why
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The opcodes of memcached's binary protocol that binaryRequest sends.
const (
	opGet     = 0x00
	opSet     = 0x01
	opVersion = 0x0b
	opStat    = 0x10
)

// binaryResponse is one response packet of memcached's binary protocol.
type binaryResponse struct {
	status     uint16
	key, value []byte
}

// binaryRequest sends one request of memcached's binary protocol to addr and
// returns its responses: one, or for a stat request every packet up to the
// one without a key.
func binaryRequest(addr string, opcode byte, extras, key, value []byte) ([]binaryResponse, error) {
	conn, err := net.DialTimeout("tcp", addr, MemcachedTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(MemcachedTimeout)); err != nil {
		return nil, err
	}
	header := make([]byte, 24)
	header[0], header[1] = 0x80, opcode
	binary.BigEndian.PutUint16(header[2:], uint16(len(key)))
	header[4] = byte(len(extras))
	binary.BigEndian.PutUint32(header[8:], uint32(len(extras)+len(key)+len(value)))
	if _, err := conn.Write(append(append(append(header, extras...), key...), value...)); err != nil {
		return nil, err
	}
	rd := bufio.NewReader(conn)
	var rs []binaryResponse
	for {
		h := make([]byte, 24)
		if _, err := io.ReadFull(rd, h); err != nil {
			return nil, err
		}
		if h[0] != 0x81 {
			return nil, fmt.Errorf("binary response with magic %#x", h[0])
		}
		keyLen, extrasLen, bodyLen := int(binary.BigEndian.Uint16(h[2:])), int(h[4]), int(binary.BigEndian.Uint32(h[8:]))
		body := make([]byte, bodyLen)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, err
		}
		if extrasLen+keyLen > bodyLen {
			return nil, fmt.Errorf("binary response of %d bytes with %d of extras and key", bodyLen, extrasLen+keyLen)
		}
		r := binaryResponse{status: binary.BigEndian.Uint16(h[6:]), key: body[extrasLen : extrasLen+keyLen], value: body[extrasLen+keyLen:]}
		rs = append(rs, r)
		if opcode != opStat || len(r.key) == 0 || r.status != 0 {
			return rs, nil
		}
	}
}

// binaryVersion asks addr for its version in the binary protocol.
func binaryVersion(addr string) error {
	rs, err := binaryRequest(addr, opVersion, nil, nil, nil)
	if err != nil {
		return err
	}
	if rs[0].status != 0 {
		return fmt.Errorf("binary version: status %d", rs[0].status)
	}
	return nil
}

// binarySetGet stores a key at addr in the binary protocol and reads it
// back.
func binarySetGet(addr string) error {
	rs, err := binaryRequest(addr, opSet, make([]byte, 8), []byte("conformance"), []byte("served"))
	if err != nil {
		return err
	}
	if rs[0].status != 0 {
		return fmt.Errorf("binary set: status %d", rs[0].status)
	}
	if rs, err = binaryRequest(addr, opGet, nil, []byte("conformance"), nil); err != nil {
		return err
	}
	if rs[0].status != 0 || string(rs[0].value) != "served" {
		return fmt.Errorf("binary get: status %d, %q", rs[0].status, rs[0].value)
	}
	return nil
}

// binaryStats returns a group of addr's stats in the binary protocol.
func binaryStats(addr, group string) (map[string]string, error) {
	rs, err := binaryRequest(addr, opStat, nil, []byte(group), nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range rs {
		if r.status != 0 {
			return nil, fmt.Errorf("binary stat %q: status %d", group, r.status)
		}
		if len(r.key) > 0 {
			out[string(r.key)] = string(r.value)
		}
	}
	return out, nil
}
