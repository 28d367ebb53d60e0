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
// v0.0.7's own 2018 locks on purpose.
var sharedToolModules = []string{"kube", "kwok", "olm"}

// TestToolModulesShareBuilds checks that every package that two of the tool modules,
// or a tool module and this test module, both build comes from the same module
// version in each. The go command compiles a package once for every version, and
// with the same dependencies and flags, that a build asks for, so a cold `make test`
// compiles the Kubernetes libraries once only while this holds: kwok's and OLM's own
// copies took about half of their modules' cold build, and this module's own copy
// most of its cold `go vet` (see test/README.md, "Tool builds"). The flags match
// too: the Makefile vets and runs this module with build-tools.sh's CGO_ENABLED=0
// and -trimpath.
func TestToolModulesShareBuilds(t *testing.T) {
	ctx := context.Background()
	builds := map[string]map[string]string{}
	names := []string{"the test module"}
	builds[names[0]] = moduleBuild(t, ctx, "..", "-test", "./...")
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
			var shared int
			var differ []string
			for pkg, va := range builds[a] {
				vb, ok := builds[b][pkg]
				if !ok {
					continue
				}
				shared++
				if va != vb {
					differ = append(differ, fmt.Sprintf("%s: %s in %s, %s in %s", pkg, va, a, vb, b))
				}
			}
			sort.Strings(differ)
			if len(differ) > 0 {
				t.Errorf("%s and %s build %d of their %d shared packages from different module versions, which compiles them twice; align the modules (go get in one of them), for example:\n%s",
					a, b, len(differ), shared, firstLines(differ, 10))
			} else {
				t.Logf("%s and %s share %d packages, all from the same module versions", a, b, shared)
			}
		}
	}
}

// moduleBuild returns the module version, as path@version, of every package
// outside the standard library and the main module that `go list -deps args`
// lists in the module at dir.
func moduleBuild(t *testing.T, ctx context.Context, dir string, args ...string) map[string]string {
	t.Helper()
	out, err := goCommand(ctx, dir, nil, append([]string{"list", "-deps", "-json=ImportPath,Standard,Module"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	build := map[string]string{}
	err = decodeStream(out, func(p *Package) {
		if !p.Standard && p.Module != nil && !p.Module.Main {
			m := effective(*p.Module)
			build[p.ImportPath] = m.Path + "@" + m.Version
		}
	})
	if err != nil {
		t.Fatalf("%s: failed to decode go list: %v", dir, err)
	}
	return build
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
