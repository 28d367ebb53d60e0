package dep

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// sharedToolModules are the tool modules under test/tools that build on the same
// Kubernetes libraries. test/tools/operator-sdk is left out: it pins operator-sdk
// v0.0.7's own 2018 locks on purpose. So is test/tools/kube-score: kube-score
// v1.20.0 reads an API group that the 0.37 libraries no longer have. And
// test/tools/vulncheck: govulncheck builds on none of them. And
// test/tools/kube-router: kube-router v2.1.0 builds on its own 0.29 libraries, and
// its module is for the real-node suite only (it has known security advisories).
var sharedToolModules = []string{"kube", "kwok", "olm"}

// testModuleOwn are the modules that this test module holds at versions of its own,
// newer than the tool modules', and why. They are leaves of what the builds share:
// nothing else that a tool module builds too imports them, so they cost a second
// compile of their own packages only.
var testModuleOwn = map[string]string{
	"github.com/operator-framework/api": "test/olm validates the catalog with v0.45.0's validators " +
		"(bundle names, related images); OLM v0.38.0 builds against v0.36.0",
	"go.podman.io/image/v5":                            "operator-framework/api v0.45.0's",
	"go.podman.io/storage":                             "operator-framework/api v0.45.0's",
	"github.com/klauspost/compress":                    "operator-framework/api v0.45.0's, through go.podman.io/image",
	"github.com/containerd/stargz-snapshotter/estargz": "go-containerregistry's, at klauspost/compress v1.19.2",
	"github.com/vbatts/tar-split":                      "go-containerregistry's, at klauspost/compress v1.19.2",
	"github.com/google/go-containerregistry":           "the registry tests', newer than kwok's v0.20.7",
	"github.com/docker/cli":                            "go-containerregistry v0.22.1's",
	"github.com/docker/docker-credential-helpers":      "go-containerregistry v0.22.1's",
	"golang.org/x/mod":                                 "go-containerregistry v0.22.1's, at v0.40.0 for GO-2026-6179 and GO-2026-6180",
}

// TestToolModulesShareBuilds checks that every package that two of the tool
// modules, or a tool module and this test module, both build compiles once: it
// comes from the same module version in each, and so does every package it depends
// on. The go command compiles a package once for every version, and with the same
// dependencies and flags, that a build asks for, so a cold `make test` compiles the
// Kubernetes libraries once only while this holds: kwok's and OLM's own copies took
// about half of their modules' cold build, and this module's own copy most of its
// cold `go vet` (see test/README.md, "Tool builds"). The flags match too: the
// Makefile vets and runs this module with build-tools.sh's CGO_ENABLED=0 and
// -trimpath. Only testModuleOwn's modules may differ between this module and a tool
// module, and only if no other shared package depends on them.
func TestToolModulesShareBuilds(t *testing.T) {
	ctx := context.Background()
	const self = "the test module"
	builds := map[string]map[string]*Package{self: moduleBuild(t, ctx, "..", "-test", "./...")}
	names := []string{self}
	for _, m := range sharedToolModules {
		dir := filepath.Join("..", "tools", m)
		commands, err := toolCommands(filepath.Join(dir, "tools.go"))
		if err != nil {
			t.Fatal(err)
		}
		name := "test/tools/" + m
		names = append(names, name)
		builds[name] = moduleBuild(t, ctx, dir, commands...)
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			shared, twice := compiledTwice(builds[a], builds[b])
			var differ []string
			for _, pkg := range twice {
				pa, pb := builds[a][pkg], builds[b][pkg]
				if a == self && testModuleOwn[pa.Module.Path] != "" && moduleOf(pa) != moduleOf(pb) {
					t.Logf("%s: %s in %s, %s in %s (%s)", pkg, moduleOf(pa), a, moduleOf(pb), b, testModuleOwn[pa.Module.Path])
					continue
				}
				why := "from different module versions"
				if moduleOf(pa) == moduleOf(pb) {
					why = "the same version, over dependencies of different versions"
				}
				differ = append(differ, fmt.Sprintf("%s: %s in %s, %s in %s: %s", pkg, moduleOf(pa), a, moduleOf(pb), b, why))
			}
			if len(differ) > 0 {
				t.Errorf("%s and %s compile %d of their %d shared packages twice; align the modules (go get in one of them), for example:\n%s",
					a, b, len(differ), shared, firstLines(differ, 10))
			} else {
				t.Logf("%s and %s share %d packages, %d of them compiled once", a, b, shared, shared-len(twice))
			}
		}
	}
}

// moduleBuild returns the packages outside the standard library and the main
// module that `go list -deps args` lists in the module at dir, by import path.
func moduleBuild(t *testing.T, ctx context.Context, dir string, args ...string) map[string]*Package {
	t.Helper()
	out, err := goCommand(ctx, dir, nil, append([]string{"list", "-deps", "-json=ImportPath,Standard,Module,Deps"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	build := map[string]*Package{}
	err = decodeStream(out, func(p *Package) {
		if !p.Standard && p.Module != nil && !p.Module.Main {
			build[p.ImportPath] = p
		}
	})
	if err != nil {
		t.Fatalf("%s: failed to decode go list: %v", dir, err)
	}
	return build
}

// moduleOf returns the module, as path@version, that provides p.
func moduleOf(p *Package) string {
	m := effective(*p.Module)
	return m.Path + "@" + m.Version
}

// compiledTwice returns how many packages builds a and b share, and those of them,
// sorted, that each compiles on its own: from another module version, or over a
// dependency that is.
func compiledTwice(a, b map[string]*Package) (shared int, twice []string) {
	for pkg, pa := range a {
		pb, ok := b[pkg]
		if !ok {
			continue
		}
		shared++
		same := moduleOf(pa) == moduleOf(pb)
		for _, dep := range pa.Deps {
			da, okA := a[dep]
			db, okB := b[dep]
			if okA != okB || (okA && moduleOf(da) != moduleOf(db)) {
				same = false
				break
			}
		}
		if !same {
			twice = append(twice, pkg)
		}
	}
	sort.Strings(twice)
	return shared, twice
}

// toolCommands returns the packages that a tool module's tools.go imports: the
// commands that test/scripts/build-tools.sh builds from it.
func toolCommands(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s imports no command", file)
	}
	return paths, nil
}

// firstLines joins up to n of lines, one a line, and says how many it left out.
func firstLines(lines []string, n int) string {
	var s string
	for i, l := range lines {
		if i == n {
			return s + fmt.Sprintf("  ... and %d more", len(lines)-n)
		}
		s += "  " + l + "\n"
	}
	return s
}
