package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/transport"
)

// The tests of this file back test/vuln/reviewed.yaml's entries for GO-2021-0064
// and GO-2021-0065: client-go 1.11 logs the requests' Authorization headers, and
// with them the operator's bearer token, once glog's verbosity is 7 or more
// (transport.DebugWrappers wraps every transport it builds in a logging round
// tripper from verbosity 6, with the headers from 7, as a curl command from 9).
// glog's verbosity is its -v and -vmodule flags on flag.CommandLine, and nothing
// else: glog reads no environment variable. The operator never parses
// flag.CommandLine and never sets either flag, so no flag or environment
// variable of the operator can raise it.

// tokenLevel is the lowest glog verbosity at which client-go logs request
// headers.
const tokenLevel = 7

// globalFlags returns the flags that libraries registered on flag.CommandLine,
// those of the testing package left out.
func globalFlags() []string {
	var names []string
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") {
			names = append(names, f.Name)
		}
	})
	return names
}

// checkVerbosity fails t unless glog's verbosity is still 0 and client-go's
// transports get no logging round tripper.
func checkVerbosity(t *testing.T, after string) {
	t.Helper()
	if v := flag.CommandLine.Lookup("v").Value.String(); v != "0" {
		t.Errorf("after %s, glog's -v is %s, want 0", after, v)
	}
	if m := flag.CommandLine.Lookup("vmodule").Value.String(); m != "" {
		t.Errorf("after %s, glog's -vmodule is %q, want empty", after, m)
	}
	rt := http.DefaultTransport
	if got := transport.DebugWrappers(rt); got != rt {
		t.Errorf("after %s, client-go wraps its transports in %T, which logs requests", after, got)
	}
}

func TestGlogFlagsAreNotOptions(t *testing.T) {
	names := globalFlags()
	for _, want := range []string{"v", "vmodule"} {
		if flag.CommandLine.Lookup(want) == nil {
			t.Fatalf("glog's -%s is not on flag.CommandLine (flags: %v): client-go no longer logs through glog, so review GO-2021-0064 and GO-2021-0065 in test/vuln/reviewed.yaml again", want, names)
		}
	}
	checkVerbosity(t, "the test binary's start")
	args := [][]string{
		{"--v=10"}, {"-v=9"}, {"--v", "9"}, {"-v", strconv.Itoa(tokenLevel)},
		{"--vmodule=round_trippers=9"}, {"-vmodule=*=10"},
	}
	for _, name := range names {
		args = append(args, []string{"--" + name + "=10"})
	}
	for _, a := range args {
		_, err := parseOptions(a, noEnv, io.Discard)
		name := strings.TrimLeft(strings.SplitN(a[0], "=", 2)[0], "-")
		if want := "flag provided but not defined: -" + name; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseOptions(%q) = %v, want an error containing %q", a, err, want)
		}
		checkVerbosity(t, "parseOptions("+strings.Join(a, " ")+")")
	}
}

func TestNoOptionRaisesGlogVerbosity(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseOptions([]string{"-help"}, noEnv, &usage); err != flag.ErrHelp {
		t.Fatalf("parseOptions(-help) = %v, want flag.ErrHelp", err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(usage.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("found %d flags in the usage, want all of them:\n%s", len(names), usage.String())
	}

	// Every environment variable that parseOptions reads is set to the
	// verbosity that logs everything, 10, or to 1 where parseOptions refuses
	// 10 before it parses the flags (a boolean); then every flag is given 10
	// in turn, and the words of logrus's most verbose levels, with no
	// variable and with those.
	var read []string
	refused := map[string]bool{}
	env := func(key string) string {
		read = append(read, key)
		if refused[key] {
			return "1"
		}
		return "10"
	}
	for {
		_, err := parseOptions(nil, env, io.Discard)
		checkVerbosity(t, "parseOptions with every variable at 10")
		if err == nil {
			break
		}
		key := ""
		for _, k := range read {
			if !refused[k] && strings.Contains(err.Error(), k+"=") {
				key = k
			}
		}
		if key == "" {
			// Past the variables: a value that validate refuses.
			break
		}
		refused[key] = true
	}
	level := logrus.GetLevel()
	defer logrus.SetLevel(level)
	defer logrus.SetOutput(logrus.StandardLogger().Out)
	defer logrus.SetFormatter(logrus.StandardLogger().Formatter)
	for _, name := range names {
		for _, value := range []string{"10", "trace", "debug"} {
			arg := "--" + name + "=" + value
			for _, e := range []struct {
				name   string
				getenv func(string) string
			}{{"no variable", noEnv}, {"every variable at 10", env}} {
				o, err := parseOptions([]string{arg}, e.getenv, io.Discard)
				if err == nil {
					// What main does next with the options.
					o.configureLogging()
				}
				checkVerbosity(t, "parseOptions("+arg+") with "+e.name)
			}
		}
	}
	t.Logf("flags: %v; environment variables read: %v", names, uniq(read))
	if len(read) == 0 {
		t.Error("parseOptions read no environment variable; the test lost its reach")
	}
}

func TestOnlyLogtostderrOfTheGlobalFlags(t *testing.T) {
	// The operator's own code: this command and every package under pkg/.
	var files []string
	for _, dir := range []string{".", filepath.Join("..", "..", "pkg")} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 20 {
		t.Fatalf("found %d Go files, want the operator's code: %v", len(files), files)
	}
	for _, file := range files {
		for _, problem := range globalFlagUses(t, file) {
			t.Errorf("%s: %s; client-go logs bearer tokens once glog's -v reaches %d (GO-2021-0064, GO-2021-0065 in test/vuln/reviewed.yaml)", file, problem, tokenLevel)
		}
	}
}

// flagSetAPI is what of package flag the operator's code may use: its own
// FlagSet, which holds none of glog's flags.
var flagSetAPI = map[string]bool{
	"NewFlagSet": true, "FlagSet": true, "Flag": true, "Value": true, "Getter": true,
	"ErrorHandling": true, "ContinueOnError": true, "ExitOnError": true, "PanicOnError": true, "ErrHelp": true,
}

// globalFlagUses returns what in file could set glog's flags: an import of
// glog or klog, and every use of package flag outside flagSetAPI but the
// call flag.CommandLine.Set("logtostderr", ...).
func globalFlagUses(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	flagName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch {
		case path == "flag":
			flagName = "flag"
			if imp.Name != nil {
				flagName = imp.Name.Name
			}
		case path == "github.com/golang/glog" || strings.HasPrefix(path, "k8s.io/klog"):
			problems = append(problems, fmt.Sprintf("%s imports %s", fset.Position(imp.Pos()), path))
		}
	}
	if flagName == "" {
		return problems
	}
	isFlag := func(e ast.Expr) bool {
		id, ok := e.(*ast.Ident)
		return ok && id.Name == flagName
	}
	allowed := map[ast.Node]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		set, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || set.Sel.Name != "Set" {
			return true
		}
		cl, ok := set.X.(*ast.SelectorExpr)
		if !ok || !isFlag(cl.X) || cl.Sel.Name != "CommandLine" {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == `"logtostderr"` {
			allowed[cl] = true
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if ok && isFlag(sel.X) && !flagSetAPI[sel.Sel.Name] && !allowed[sel] {
			problems = append(problems, fmt.Sprintf("%s uses %s.%s", fset.Position(sel.Pos()), flagName, sel.Sel.Name))
		}
		return true
	})
	return problems
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// uniq returns ss without repeats, in their first order.
func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
