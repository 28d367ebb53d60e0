package dep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// RevisionSource is the module whose published Gopkg.lock supplies full commit hashes
// for the pseudo-versions and tags of the build list.
const RevisionSource = "github.com/operator-framework/operator-sdk"

// Platforms are the GOOS/GOARCH pairs whose imports are merged. dep reads every file
// whatever its build constraints, so a package that only Windows imports (such as
// golang.org/x/sys/windows) belongs in the lock as much as one that only Linux imports.
var Platforms = []string{"linux/amd64", "darwin/amd64", "windows/amd64"}

// Module is one module of the build list, as `go list -m -json` reports it.
type Module struct {
	Path     string  // module path
	Version  string  // module version, empty for the main module and directory replacements
	Indirect bool    // go.mod marks the requirement // indirect
	Main     bool    // the main module
	Dir      string  // where the module's files are, empty when it is not downloaded
	Replace  *Module // the module that replaces this one, if any
}

// Package is one package of the build, as `go list -deps -json` reports it.
type Package struct {
	ImportPath string   // the package's import path
	Standard   bool     // part of the standard library
	Module     *Module  // the module that provides it
	Imports    []string // the packages it imports (not its tests)
	Deps       []string // every package it depends on, directly or not
}

// Input is what the renderer needs: the main module's build list, the packages that its
// packages import, and the projects of RevisionSource's Gopkg.lock.
type Input struct {
	// MainModule is the path of the module whose Gopkg files are rendered.
	MainModule string
	// Modules is the build list without the main module, sorted by path.
	Modules []Module
	// Packages are the non-standard packages that the main module's non-test packages
	// import transitively, the main module's own packages included, sorted by import path.
	Packages []Package
	// RevisionSource names the module version whose lock supplied KnownProjects, for
	// the files' header comments, such as "operator-sdk v0.0.7".
	RevisionSource string
	// KnownProjects are the projects of that module's Gopkg.lock.
	KnownProjects []LockedProject
}

// Load asks the go command in root, a module root, for the build list and the imported
// packages, and reads RevisionSource's Gopkg.lock from the module cache. The environment
// is pinned (module mode, no workspace, read-only go.mod, no cgo) so that the answer
// depends on go.mod and go.sum only.
func Load(ctx context.Context, root string) (Input, error) {
	var in Input
	pkgs := map[string]Package{}
	for _, platform := range Platforms {
		goos, goarch, _ := strings.Cut(platform, "/")
		out, err := goCommand(ctx, root, []string{"GOOS=" + goos, "GOARCH=" + goarch},
			"list", "-deps", "-json=ImportPath,Standard,Module,Imports", "./...")
		if err != nil {
			return Input{}, err
		}
		if err := decodeStream(out, func(p *Package) { pkgs[p.ImportPath] = mergePackage(pkgs[p.ImportPath], *p) }); err != nil {
			return Input{}, fmt.Errorf("failed to decode go list -deps for %s: %v", platform, err)
		}
	}

	out, err := goCommand(ctx, root, nil, "list", "-m", "-json", "all")
	if err != nil {
		return Input{}, err
	}
	var source *Module
	if err := decodeStream(out, func(m *Module) {
		switch {
		case m.Main:
			in.MainModule = m.Path
		default:
			in.Modules = append(in.Modules, *m)
			if m.Path == RevisionSource {
				source = m
			}
		}
	}); err != nil {
		return Input{}, fmt.Errorf("failed to decode go list -m all: %v", err)
	}
	if in.MainModule == "" {
		return Input{}, fmt.Errorf("go list -m all in %s reported no main module", root)
	}
	sort.Slice(in.Modules, func(i, j int) bool { return in.Modules[i].Path < in.Modules[j].Path })

	for _, p := range pkgs {
		if !p.Standard {
			sort.Strings(p.Imports)
			in.Packages = append(in.Packages, p)
		}
	}
	sort.Slice(in.Packages, func(i, j int) bool { return in.Packages[i].ImportPath < in.Packages[j].ImportPath })

	if source == nil {
		return Input{}, fmt.Errorf("%s is not in the build list of %s", RevisionSource, in.MainModule)
	}
	eff := effective(*source)
	if eff.Dir == "" {
		return Input{}, fmt.Errorf("%s %s is not in the module cache: run go mod download in %s", eff.Path, eff.Version, root)
	}
	lock, err := os.ReadFile(filepath.Join(eff.Dir, "Gopkg.lock"))
	if err != nil {
		return Input{}, fmt.Errorf("failed to read the Gopkg.lock of %s %s: %v", eff.Path, eff.Version, err)
	}
	if in.KnownProjects, err = ParseLockProjects(lock); err != nil {
		return Input{}, fmt.Errorf("failed to parse the Gopkg.lock of %s %s: %v", eff.Path, eff.Version, err)
	}
	in.RevisionSource = path.Base(source.Path) + " " + eff.Version
	return in, nil
}

// mergePackage joins what two platforms report for one package: the union of imports.
func mergePackage(a, b Package) Package {
	if a.ImportPath == "" {
		return b
	}
	seen := map[string]bool{}
	for _, imp := range a.Imports {
		seen[imp] = true
	}
	for _, imp := range b.Imports {
		if !seen[imp] {
			a.Imports = append(a.Imports, imp)
		}
	}
	return a
}

// goCommand runs the go command in dir with a pinned environment plus extraEnv and
// returns its standard output.
func goCommand(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GO111MODULE=on", "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s %s in %s failed: %v: %s", strings.Join(args, " "),
			strings.Join(extraEnv, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// decodeStream decodes the concatenated JSON objects that go list -json prints.
func decodeStream[T any](data []byte, each func(*T)) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		each(&v)
	}
}
