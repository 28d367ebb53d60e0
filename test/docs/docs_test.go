// Package docs checks that the documentation stays true to the repository:
// the tests it cites exist, its relative links and anchors resolve, the
// reference page lists every flag and environment variable of the operator,
// and `make help` lists every target users run. It reads files only: no
// cluster, no build, well under a second.
package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, two levels above this package.
var root = filepath.Join("..", "..")

// referencePage is the page that lists every flag and environment variable.
const referencePage = "docs/reference.md"

// sdkEnv are the environment variables that the operator reads through
// operator-sdk v0.0.7's k8sutil constants, which this package cannot
// resolve from the operator's own source.
var sdkEnv = map[string]string{
	"WatchNamespaceEnvVar": "WATCH_NAMESPACE",
	"KubeConfigEnvVar":     "KUBERNETES_CONFIG",
}

// internalTargets are the Makefile's .PHONY targets that users do not run,
// and so have no `## ` comment for `make help`, each with the reason.
var internalTargets = map[string]string{
	"no-demo": "a prerequisite of test and e2e that stops them while the demo is up; users run demo-down instead",
}

// documents returns the Markdown files whose claims this package checks,
// relative to the root: README.md, test/README.md and docs/*.md.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "test/README.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatalf("no docs/*.md under %s", root)
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// line is one line of a Markdown file outside fenced code blocks.
type line struct {
	file string
	n    int
	text string
}

func (l line) String() string { return fmt.Sprintf("%s:%d", l.file, l.n) }

// prose returns the lines of file outside fenced code blocks.
func prose(t *testing.T, file string) []line {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	fence := ""
	for i, s := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(s)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, line{file, i + 1, s})
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]+`")
	// citedTest is a code span that names a test, fuzz test or benchmark,
	// maybe qualified by its package (test/realnode.TestX) or followed by
	// a subtest (TestX/case).
	citedTest = regexp.MustCompile("^`(?:[\\w/.-]+\\.)?((?:Test|Fuzz|Benchmark)[A-Z_0-9]\\w*)(?:/[^`]*)?`$")
)

// testFuncs returns the names of the top-level Test, Fuzz and Benchmark
// functions of every *_test.go of the operator's module and the test module.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor" || path == filepath.Join(root, "tmp")) {
				return filepath.SkipDir
			}
			// Another module (test/tools/...) is not ours.
			if path != root && path != filepath.Join(root, "test") {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !funcs["TestCitedTestsExist"] {
		t.Fatalf("found no tests under %s (not even this one): is the root right?", root)
	}
	return funcs
}

// TestCitedTestsExist fails on a test, fuzz test or benchmark that the
// documents cite in backticks but that no *_test.go of the repository
// defines, as after a rename.
func TestCitedTestsExist(t *testing.T) {
	funcs := testFuncs(t)
	cited := 0
	for _, file := range documents(t) {
		for _, l := range prose(t, file) {
			for _, span := range codeSpan.FindAllString(l.text, -1) {
				m := citedTest.FindStringSubmatch(span)
				if m == nil {
					continue
				}
				cited++
				if !funcs[m[1]] {
					t.Errorf("%s: %s is cited, but no *_test.go of the repository has func %s: correct the name, or remove the claim with its citation", l, span, m[1])
				}
			}
		}
	}
	if cited < 100 {
		t.Errorf("only %d test citations found in the documents: is the pattern right?", cited)
	}
}

var (
	// link is a Markdown link or image: [text](target "title").
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// anchors returns the anchors GitHub gives the headings of a Markdown file:
// lower case, punctuation removed, spaces as hyphens, and -1, -2... after
// the second and later of the same text.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(t, file) {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor of one heading's text.
func anchor(text string) string {
	// A link in a heading counts by its text.
	text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Serving only some namespaces: `--namespace-selector`", "serving-only-some-namespaces---namespace-selector"},
		{"1. Deploy the operator", "1-deploy-the-operator"},
		{"The guide's OLM flow on the local cluster", "the-guides-olm-flow-on-the-local-cluster"},
		{"Memory and memcached's options", "memory-and-memcacheds-options"},
		{"TLS, authentication and rotation", "tls-authentication-and-rotation"},
	}
	for _, tt := range tests {
		if got := anchor(tt.in); got != tt.want {
			t.Errorf("anchor(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRelativeLinksResolve fails on a relative link of the documents whose
// file does not exist, or whose #anchor is no heading of its page.
func TestRelativeLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, file := range documents(t) {
		for _, l := range prose(t, file) {
			text := codeSpan.ReplaceAllString(l.text, "")
			for _, m := range link.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s: the link %s names %s, which does not exist: point it at the file's new place", l, target, dest)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: the link %s has an anchor into %s, which is no Markdown page", l, target, dest)
					continue
				}
				if cache[dest] == nil {
					cache[dest] = anchors(t, dest)
				}
				if !cache[dest][frag] {
					var have []string
					for a := range cache[dest] {
						have = append(have, "#"+a)
					}
					slices.Sort(have)
					t.Errorf("%s: the link %s: %s has no heading whose anchor is #%s; its anchors are %s", l, target, dest, frag, strings.Join(have, " "))
				}
			}
		}
	}
}

// operatorOptions returns the operator's flags, from the fs.*Var calls of
// cmd/memcached-operator, and the environment variables it reads, from its
// calls of getenv, os.Getenv, os.LookupEnv and envBool with a string
// literal or a constant of the package.
func operatorOptions(t *testing.T) (flags, env []string) {
	t.Helper()
	dir := filepath.Join(root, "cmd", "memcached-operator")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	consts := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	str := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			s, ok := consts[e.Name]
			return s, ok
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "k8sutil" {
				s, ok := sdkEnv[e.Sel.Name]
				if !ok {
					t.Errorf("cmd/memcached-operator reads the environment variable k8sutil.%s, which sdkEnv in test/docs/docs_test.go does not name: add it there", e.Sel.Name)
				}
				return s, ok
			}
		}
		return "", false
	}
	seen := map[string]bool{}
	add := func(list *[]string, s string) {
		if !seen[s] {
			seen[s] = true
			*list = append(*list, s)
		}
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				x, _ := fun.X.(*ast.Ident)
				if x == nil {
					return true
				}
				switch {
				case x.Name == "fs" && strings.HasSuffix(fun.Sel.Name, "Var") && len(call.Args) >= 2:
					if s, ok := str(call.Args[1]); ok {
						add(&flags, s)
					}
				case x.Name == "fs" && slices.Contains([]string{"Bool", "String", "Int", "Int64", "Uint", "Float64", "Duration", "Func", "BoolFunc"}, fun.Sel.Name) && len(call.Args) >= 1:
					if s, ok := str(call.Args[0]); ok {
						add(&flags, s)
					}
				case x.Name == "os" && (fun.Sel.Name == "Getenv" || fun.Sel.Name == "LookupEnv") && len(call.Args) == 1:
					if s, ok := str(call.Args[0]); ok {
						add(&env, s)
					}
				}
			case *ast.Ident:
				switch {
				case (fun.Name == "getenv" || fun.Name == "lookup" || fun.Name == "lookupEnv") && len(call.Args) == 1:
					if s, ok := str(call.Args[0]); ok {
						add(&env, s)
					}
				case fun.Name == "envBool" && len(call.Args) == 2:
					if s, ok := str(call.Args[1]); ok {
						add(&env, s)
					}
				}
			}
			return true
		})
	}
	if len(flags) < 20 || !slices.Contains(env, "MEMCACHED_IMAGE") {
		t.Fatalf("read %d flags and the environment %v from %s: has the way options.go defines them changed?", len(flags), env, dir)
	}
	return flags, env
}

// TestReferenceListsEveryOption fails on a flag or environment variable of
// the operator that the reference page does not name in backticks.
func TestReferenceListsEveryOption(t *testing.T) {
	flags, env := operatorOptions(t)
	b, err := os.ReadFile(filepath.Join(root, referencePage))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, f := range flags {
		if !strings.Contains(page, "`--"+f+"`") {
			t.Errorf("%s does not name the flag `--%s` of cmd/memcached-operator: add a row for it to its Flags table, with its default and meaning", referencePage, f)
		}
	}
	for _, v := range env {
		if !strings.Contains(page, "`"+v+"`") && !strings.Contains(page, "`$"+v+"`") {
			t.Errorf("%s does not name the environment variable `%s` that cmd/memcached-operator reads: add it to the Environment table (or as `$%s` beside its flag)", referencePage, v, v)
		}
	}
}

// TestMakeHelpListsEveryTarget fails on a .PHONY target of the Makefile
// that `make help` does not list, unless it is one of internalTargets.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	mk, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer mk.Close()
	var phony []string
	// The rule of `make help`: a target line with a `##` comment.
	documented := map[string]bool{}
	helpLine := regexp.MustCompile(`^([a-zA-Z0-9_.-]+):.*?##`)
	sc := bufio.NewScanner(mk)
	for sc.Scan() {
		s := sc.Text()
		if rest, ok := strings.CutPrefix(s, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
		}
		if m := helpLine.FindStringSubmatch(s); m != nil {
			documented[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Where make is installed, ask it: its output is what users read.
	if makeBin, err := exec.LookPath("make"); err == nil {
		cmd := exec.Command(makeBin, "--no-print-directory", "-s", "help")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make help: %v", err)
		}
		listed := map[string]bool{}
		ansi := regexp.MustCompile(`\x1b\[[0-9;]*m`)
		for _, l := range strings.Split(ansi.ReplaceAllString(string(out), ""), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(l, "  ") {
				listed[f[0]] = true
			}
		}
		documented = listed
	}
	if len(phony) < 10 {
		t.Fatalf("found %d .PHONY targets in the Makefile: has its form changed?", len(phony))
	}
	for _, target := range phony {
		_, internal := internalTargets[target]
		switch {
		case internal && documented[target]:
			t.Errorf("the Makefile's target %s is in `make help` now: remove it from internalTargets in test/docs/docs_test.go", target)
		case !internal && !documented[target]:
			t.Errorf("`make help` does not list the Makefile's target %s: give its rule a `## <what it does>` comment (\"%s: ... ## ...\"), or, if users never run it, add it to internalTargets in test/docs/docs_test.go with the reason", target, target)
		}
	}
	for target := range internalTargets {
		if !slices.Contains(phony, target) {
			t.Errorf("internalTargets in test/docs/docs_test.go names %s, which is no .PHONY target of the Makefile: remove it", target)
		}
	}
}
