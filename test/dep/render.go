// Package dep renders Gopkg.toml and Gopkg.lock, the golang/dep manifest and lock, from
// the go.mod build list of the memcached-operator module, so that dep users get the same
// versions as Go module users. go.mod is the source of truth; tmp/codegen/update-gopkg.sh
// writes the files and the package's test fails when the committed ones are stale.
package dep

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// File names of the rendered files, relative to the module root.
const (
	ManifestFile = "Gopkg.toml"
	LockFile     = "Gopkg.lock"
)

// Script is the command that regenerates the files, named in their header comments.
const Script = "tmp/codegen/update-gopkg.sh"

// Overrides are the modules pinned with [[override]] rather than [[constraint]], because
// dep must hold them at go.mod's version even where a dependency's own Gopkg.toml asks for
// another one: the Kubernetes 1.11.2 libraries that operator-sdk v0.0.7 is built on, and the
// transitive modules whose older releases do not build or run with Go 1.26.
var Overrides = []string{
	"k8s.io/api",
	"k8s.io/apimachinery",
	"k8s.io/client-go",
	"k8s.io/kube-openapi",
	"github.com/imdario/mergo",      // v1 renamed the module; client-go 1.11 imports the old path
	"github.com/googleapis/gnostic", // the OpenAPIv2 package that client-go 1.11 discovery uses
	"github.com/json-iterator/go",   // older releases break with reflect2 on Go >= 1.18
	"github.com/modern-go/reflect2", // older releases panic at run time on Go >= 1.18
}

// PruneOpts is the per-project prune mode that dep records for the [prune] table below:
// U for unused-packages, T for go-tests.
const PruneOpts = "UT"

// Files are the rendered contents of Gopkg.toml and Gopkg.lock.
type Files struct {
	// Manifest is Gopkg.toml: the constraints, overrides and prune options.
	Manifest []byte
	// Lock is Gopkg.lock: the locked projects and the solve metadata.
	Lock []byte
}

// pin is how dep holds one module at its go.mod version: the revision or tag to check out.
type pin struct {
	name     string // module path, the dep project name
	source   string // replacement module path, if go.mod replaces the module with another
	revision string // full commit hash when known, else a pseudo-version's 12-char hash
	tag      string // the tag of a tagged version, empty for pseudo-versions
}

// Render renders both files from in. It is deterministic: the same input gives the
// same bytes.
func Render(in Input) (Files, error) {
	known := map[string]LockedProject{}
	for _, p := range in.KnownProjects {
		known[p.Name] = p
	}
	pins := map[string]pin{}
	for _, m := range in.Modules {
		p, err := pinFor(m, known)
		if err != nil {
			return Files{}, err
		}
		pins[m.Path] = p
	}

	projects, imports, importedModules, err := lockedPackages(in)
	if err != nil {
		return Files{}, err
	}

	manifest, err := renderManifest(in, pins, importedModules)
	if err != nil {
		return Files{}, err
	}
	return Files{Manifest: manifest, Lock: renderLock(in, pins, projects, imports)}, nil
}

// pinFor works out how dep should pin m, borrowing full hashes from known, the projects
// of a published lock, where they record the same commit or the same tag.
func pinFor(m Module, known map[string]LockedProject) (pin, error) {
	eff := effective(m)
	if eff.Version == "" {
		return pin{}, fmt.Errorf("%s is replaced by the directory %s, which dep cannot express", m.Path, eff.Path)
	}
	p := pin{name: m.Path}
	if eff.Path != m.Path {
		p.source = eff.Path
	}
	k, ok := known[eff.Path]
	if rev, isPseudo := PseudoVersionRev(eff.Version); isPseudo {
		p.revision = rev
		if ok && strings.HasPrefix(k.Revision, rev) {
			p.revision = k.Revision
		}
		return p, nil
	}
	p.tag = TagName(eff.Version)
	if ok && k.Version == p.tag && k.Revision != "" {
		p.revision = k.Revision
	}
	return p, nil
}

// effective returns the module that the build really uses: its replacement, if any.
func effective(m Module) Module {
	if m.Replace != nil {
		return *m.Replace
	}
	return m
}

// lockedPackages groups the imported packages by module, as package paths relative to
// the module root ("." for the root), and lists the packages that the main module's own
// packages import directly from other modules, and those modules.
func lockedPackages(in Input) (projects map[string][]string, imports, modules []string, err error) {
	byPath := map[string]Package{}
	for _, p := range in.Packages {
		byPath[p.ImportPath] = p
	}
	projects = map[string][]string{}
	direct, directModules := map[string]bool{}, map[string]bool{}
	for _, p := range in.Packages {
		if p.Module == nil {
			return nil, nil, nil, fmt.Errorf("package %s belongs to no module", p.ImportPath)
		}
		if !p.Module.Main {
			rel := "."
			if p.ImportPath != p.Module.Path {
				rel = strings.TrimPrefix(p.ImportPath, p.Module.Path+"/")
			}
			projects[p.Module.Path] = append(projects[p.Module.Path], rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := byPath[imp]
			if !ok {
				if isStandard(imp) {
					continue // the standard library, and cgo's pseudo-package "C"
				}
				return nil, nil, nil, fmt.Errorf("package %s imports %s, which go list did not report", p.ImportPath, imp)
			}
			if dep.Module != nil && !dep.Module.Main {
				direct[imp] = true
				directModules[dep.Module.Path] = true
			}
		}
	}
	for _, pkgs := range projects {
		sort.Strings(pkgs)
	}
	return projects, sortedKeys(direct), sortedKeys(directModules), nil
}

// renderManifest renders Gopkg.toml: a constraint for each module that go.mod requires
// directly or whose packages the main module imports, and the overrides.
func renderManifest(in Input, pins map[string]pin, importedModules []string) ([]byte, error) {
	direct := map[string]bool{}
	for _, m := range in.Modules {
		if !m.Indirect {
			direct[m.Path] = true
		}
	}
	for _, m := range importedModules {
		if _, ok := pins[m]; !ok {
			return nil, fmt.Errorf("imported module %s is not in the build list of %s", m, in.MainModule)
		}
		direct[m] = true
	}
	overridden := map[string]bool{}
	for _, o := range Overrides {
		if _, ok := pins[o]; !ok {
			return nil, fmt.Errorf("override %s is not in the build list of %s", o, in.MainModule)
		}
		overridden[o] = true
	}

	var w tomlWriter
	w.comment(
		ManifestFile+" is generated from go.mod by "+Script+"; do not edit it.",
		"Change go.mod instead and run `make generate`: go.mod is the source of truth and",
		"this file pins dep to its build list.",
		"",
		"Tagged versions are exact (\"=vX.Y.Z\"). A pseudo-version becomes a revision: the",
		"full commit hash where "+in.RevisionSource+"'s Gopkg.lock records it, else",
		"the pseudo-version's 12-character hash (the generator cannot reach git to expand it).",
	)
	writePins := func(table string, names []string) {
		for _, name := range names {
			p := pins[name]
			w.table("[" + table + "]")
			w.str("name", p.name)
			if p.source != "" {
				w.str("source", p.source)
			}
			if p.tag != "" {
				w.str("version", "="+p.tag)
			} else {
				w.str("revision", p.revision)
			}
		}
	}
	var constraints []string
	for name := range direct {
		if !overridden[name] {
			constraints = append(constraints, name)
		}
	}
	sort.Strings(constraints)
	writePins("[constraint]", constraints)
	overrides := append([]string(nil), Overrides...)
	sort.Strings(overrides)
	writePins("[override]", overrides)

	w.table("[prune]")
	w.boolean("go-tests", true)
	w.boolean("unused-packages", true)
	return w.bytes(), nil
}

// renderLock renders Gopkg.lock: one project per module that provides an imported
// package, then the solve metadata.
func renderLock(in Input, pins map[string]pin, projects map[string][]string, imports []string) []byte {
	var w tomlWriter
	w.comment(
		LockFile+" is generated from go.mod's build list by "+Script+"; do not edit it.",
		"It locks each module that provides a package imported by",
		in.MainModule+", at its go.mod version,",
		"with the packages that are imported from it.",
		"",
		"revision: the full commit hash where "+in.RevisionSource+"'s Gopkg.lock",
		"records the same commit or tag; else a pseudo-version's 12-character hash; omitted",
		"for other tags. The generator cannot reach git, so it cannot resolve the rest.",
		"digest: omitted; dep recomputes it on the next `dep ensure`.",
	)
	for _, name := range sortedKeys(projects) {
		p := pins[name]
		w.table("[[projects]]")
		w.str("name", p.name)
		w.strs("packages", projects[name])
		w.str("pruneopts", PruneOpts)
		if p.revision != "" {
			w.str("revision", p.revision)
		}
		if p.source != "" {
			w.str("source", p.source)
		}
		if p.tag != "" {
			w.str("version", p.tag)
		}
	}
	w.table("[solve-meta]")
	w.str("analyzer-name", "dep")
	w.integer("analyzer-version", 1)
	w.strs("input-imports", imports)
	w.str("solver-name", "gps-cdcl")
	w.integer("solver-version", 1)
	return w.bytes()
}

// isStandard reports whether path is a standard-library import path: one whose first
// element has no dot, the rule the go command uses.
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tomlWriter writes the small subset of TOML that dep's files use, in dep's layout: a
// header comment, then tables separated by blank lines with two-space indented keys.
type tomlWriter struct {
	buf bytes.Buffer
}

func (w *tomlWriter) comment(lines ...string) {
	for _, l := range lines {
		w.buf.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
}

func (w *tomlWriter) table(header string) {
	w.buf.WriteString("\n" + header + "\n")
}

func (w *tomlWriter) str(key, value string) {
	fmt.Fprintf(&w.buf, "  %s = %s\n", key, tomlQuote(value))
}

func (w *tomlWriter) integer(key string, value int) {
	fmt.Fprintf(&w.buf, "  %s = %d\n", key, value)
}

func (w *tomlWriter) boolean(key string, value bool) {
	fmt.Fprintf(&w.buf, "  %s = %t\n", key, value)
}

// strs writes a string array inline when it has at most one element and one element per
// line otherwise, as dep does.
func (w *tomlWriter) strs(key string, values []string) {
	switch len(values) {
	case 0:
		fmt.Fprintf(&w.buf, "  %s = []\n", key)
		return
	case 1:
		fmt.Fprintf(&w.buf, "  %s = [%s]\n", key, tomlQuote(values[0]))
		return
	}
	fmt.Fprintf(&w.buf, "  %s = [\n", key)
	for _, v := range values {
		fmt.Fprintf(&w.buf, "    %s,\n", tomlQuote(v))
	}
	w.buf.WriteString("  ]\n")
}

func (w *tomlWriter) bytes() []byte {
	return w.buf.Bytes()
}

// tomlQuote returns s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
