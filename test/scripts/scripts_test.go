// Package scripts tests the checks of the shell scripts in this folder that
// need no cluster, by running them in a copy of the scripts.
package scripts

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRequireDown runs `demo.sh require-down`, which `make test` and `make
// e2e` run before they build anything, in a copy of the scripts whose
// tmp/_output holds what a running demo leaves there: it must fail while the
// demo is up, or while something else answers on the registry's address, and
// say what to run; and pass otherwise, also beside the checkout's own
// registry, which the suites reuse.
func TestRequireDown(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the scripts need curl (test/scripts/install-deps.sh installs it)")
	}
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			_, _ = w.Write([]byte("{}"))
			return
		}
		http.NotFound(w, r)
	}))
	defer registry.Close()
	answering := strings.TrimPrefix(registry.URL, "http://")
	silent := freeAddr(t)

	tests := []struct {
		name string
		// mode is the demo's mode file, if any.
		mode string
		// registry is REGISTRY_ADDR, and ours whether the checkout's
		// registry.pid names a live process.
		registry string
		ours     bool
		// wantErr is what the error must say; "" means success.
		wantErr []string
	}{
		{name: "nothing runs", registry: silent},
		{name: "the real-node demo", mode: "real", registry: answering, ours: true,
			wantErr: []string{"make demo is up (real nodes, cluster memcached-demo)", "only one real node runs per machine", "Run `make demo-down` first"}},
		{name: "the fake-node demo", mode: "fake", registry: silent,
			wantErr: []string{"make demo is up (fake nodes, cluster memcached-demo)", "Run `make demo-down` first"}},
		{name: "another checkout's registry", registry: answering,
			wantErr: []string{"something else answers on " + answering, "`make demo-down`", "REGISTRY_ADDR"}},
		{name: "this checkout's registry", registry: answering, ours: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := copyScripts(t, "lib.sh", "demo.sh", "registry.sh")
			output := filepath.Join(root, "tmp", "_output")
			if tt.mode != "" {
				writeFile(t, filepath.Join(output, "demo", "mode"), tt.mode+"\n")
			}
			if tt.ours {
				writeFile(t, filepath.Join(output, "registry", "registry.pid"), strconv.Itoa(os.Getpid()))
			}
			cmd := exec.Command("bash", filepath.Join(root, "test", "scripts", "demo.sh"), "require-down")
			cmd.Env = append(os.Environ(), "REGISTRY_ADDR="+tt.registry)
			out, err := cmd.CombinedOutput()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("demo.sh require-down: %v, want success:\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("demo.sh require-down succeeded, want it to fail saying %q:\n%s", tt.wantErr, out)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(string(out), want) {
					t.Errorf("demo.sh require-down said %q, want it to say %q", strings.TrimSpace(string(out)), want)
				}
			}
		})
	}
}

// copyScripts copies the named scripts of this folder into test/scripts of a
// new temporary root, which their lib.sh then takes as the repository.
func copyScripts(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, "test", "scripts", name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns a loopback address on which nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
