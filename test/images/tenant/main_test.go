package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreAndReadAgainstMemcached runs the keys mode's exchange against
// the memcached binary, without and with its -Y login, and checks that a
// wrong password fails it.
func TestStoreAndReadAgainstMemcached(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatalf("the memcached binary (Debian's memcached package, which test/scripts/install-deps.sh installs): %v", err)
	}
	// memcached drops to nobody when run as root, and reads the file then.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("app:s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := startMemcached(t, bin)
	secured := startMemcached(t, bin, "-Y", users)
	tests := []struct {
		name, addr, user, password string
		wantErr                    bool
	}{
		{name: "no login", addr: plain},
		{name: "login", addr: secured, user: "app", password: "s3cret"},
		{name: "wrong password", addr: secured, user: "app", password: "nope", wantErr: true},
		{name: "no login where one is needed", addr: secured, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = storeAndRead(c, "k-"+strings.ReplaceAll(tt.name, " ", "-"), tt.user, tt.password)
			if (err != nil) != tt.wantErr {
				t.Errorf("storeAndRead: %v, want an error: %v", err, tt.wantErr)
			}
		})
	}
}

// startMemcached runs bin with args on a free port of 127.0.0.1 until t
// ends, and returns its address once it accepts connections.
func startMemcached(t *testing.T, bin string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "0"}, args...)...)
	if os.Geteuid() == 0 {
		cmd.Args = append(cmd.Args, "-u", "nobody")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Until it listens or exits; a start that takes a minute is a hang.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("memcached %v exited: %v\n%s", cmd.Args, err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached on %s: %v", addr, err)
		}
	}
}
