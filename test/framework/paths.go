// Package framework holds the helpers that the end-to-end suites share: the repository
// paths of the tool and operator binaries, a kubectl wrapper, polling with deadlines,
// local kwok clusters, the operator run as a local process, and failure diagnostics.
// It drives the same binaries and scripts a user runs, and builds nothing itself:
// `make e2e` builds them first.
package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rootModule is the operator's module path, which marks the repository root.
const rootModule = "module github.com/example-inc/memcached-operator\n"

// RepoRoot returns the repository root: the nearest directory, from the working
// directory upwards, whose go.mod declares the operator's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte(rootModule)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found: no go.mod declaring github.com/example-inc/memcached-operator above the working directory")
		}
		dir = parent
	}
}

// Paths are the repository locations that the suites use.
type Paths struct {
	// Root is the repository root.
	Root string
}

// NewPaths finds the repository root.
func NewPaths() (Paths, error) {
	root, err := RepoRoot()
	return Paths{Root: root}, err
}

// Output is tmp/_output, the ignored folder for everything built or started locally.
func (p Paths) Output() string { return filepath.Join(p.Root, "tmp", "_output") }

// Tool returns the path of a tool binary that test/scripts/build-tools.sh builds.
func (p Paths) Tool(name string) string { return filepath.Join(p.Output(), "tools", "bin", name) }

// OperatorBinary is the operator that `make build` writes.
func (p Paths) OperatorBinary() string {
	return filepath.Join(p.Output(), "bin", "memcached-operator")
}

// KubeCacheDir is kubectl's discovery cache, kept out of ~/.kube like the scripts do.
func (p Paths) KubeCacheDir() string { return filepath.Join(p.Output(), "kube-cache") }

// Script returns the path of a script in test/scripts.
func (p Paths) Script(name string) string { return filepath.Join(p.Root, "test", "scripts", name) }

// Deploy returns the path of a manifest in deploy/.
func (p Paths) Deploy(name string) string { return filepath.Join(p.Root, "deploy", name) }

// ClusterTools are the tools a local cluster needs.
var ClusterTools = []string{"kwokctl", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd"}

// RequireFiles returns an error naming every missing or non-executable path, with
// the command that builds them, so a suite fails clearly instead of skipping.
func RequireFiles(hint string, paths ...string) error {
	var missing []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("missing executables (build them with `%s`):\n  %s", hint, strings.Join(missing, "\n  "))
}

// RequireTools fails unless every named tool binary exists.
func (p Paths) RequireTools(names ...string) error {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = p.Tool(n)
	}
	return RequireFiles("make tools", paths...)
}

// RunScript runs test/scripts/NAME with args for at most timeout and returns its
// standard output; its progress lines (standard error) go to the test's standard
// error.
func (p Paths) RunScript(ctx context.Context, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Script(name), args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}
