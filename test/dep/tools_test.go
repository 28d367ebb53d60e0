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

// TestToolModulesShareBuilds checks that every package that two of the tool modules
// both build comes from the same module version in each. The go command compiles a
// package once for every version, and with the same dependencies, that a build asks
// for, so a cold `make tools` compiles the Kubernetes libraries once only while this
// holds (kwok's and OLM's own copies took about half of their modules' cold build;
// see test/README.md, "Tool builds").
func TestToolModulesShareBuilds(t *testing.T) {
	ctx := context.Background()
	builds := map[string]map[string]string{}
	for _, m := range sharedToolModules {
		dir := filepath.Join("..", "tools", m)
		commands, err := toolCommands(filepath.Join(dir, "tools.go"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := goCommand(ctx, dir, nil, append([]string{"list", "-deps", "-json=ImportPath,Standard,Module"}, commands...)...)
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
			t.Fatalf("test/tools/%s: failed to decode go list: %v", m, err)
		}
		builds[m] = build
	}
	for i, a := range sharedToolModules {
		for _, b := range sharedToolModules[i+1:] {
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
				t.Errorf("test/tools/%s and test/tools/%s build %d of their %d shared packages from different module versions, which compiles them twice; align the modules (go get in one of them), for example:\n%s",
					a, b, len(differ), shared, firstLines(differ, 10))
			} else {
				t.Logf("test/tools/%s and test/tools/%s share %d packages, all from the same module versions", a, b, shared)
			}
		}
	}
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
