// Package vuln is the gate of `make vulncheck`: it reads govulncheck's JSON
// reports (govulncheck -format json) of the operator's binaries and of the test
// module, and fails on every vulnerability that a report finds called, at the
// symbol level, unless reviewed.yaml, beside this file, says why it cannot be
// exploited as shipped. It fails as well on an entry of reviewed.yaml that no
// report finds called any more, so that the list never outlives its reasons.
// Vulnerabilities in modules that are required or imported but not called
// are printed, never fatal: govulncheck found no path to them.
// test/cmd/vulngate is its command; test/scripts/vulncheck.sh runs both.
package vuln

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Entry is one reviewed vulnerability: a called vulnerability that the
// operator ships with, and why it cannot be exploited as shipped.
type Entry struct {
	// ID is the Go vulnerability database's ID, such as GO-2021-0064.
	ID string `json:"id"`
	// Module is the module whose code is vulnerable; a report that finds ID
	// called in another module is not covered by this entry.
	Module string `json:"module"`
	// Summary is what the vulnerability is, in a line.
	Summary string `json:"summary"`
	// Reason says why the operator, as shipped, cannot be exploited through
	// it: what the vulnerable code is, whether the operator reaches it with
	// untrusted input, and who could send that.
	Reason string `json:"reason"`
	// Tests are the tests that back the reason, as "DIR TestName" with DIR
	// relative to the repository's root; none where no test can.
	Tests []string `json:"tests,omitempty"`
}

// idPattern is the form of a Go vulnerability database ID.
var idPattern = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]{4,}$`)

// testPattern is the form of an Entry's test: a directory and a test's name,
// with an optional subtest.
var testPattern = regexp.MustCompile(`^([a-z0-9._/-]+) (Test[A-Za-z0-9_]*)(/[^ ]+)?$`)

// ReadReviewed reads and checks the reviewed list at path.
func ReadReviewed(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	for i, e := range entries {
		switch {
		case !idPattern.MatchString(e.ID):
			return nil, fmt.Errorf("%s: entry %d: id %q is not a Go vulnerability ID such as GO-2021-0064", path, i+1, e.ID)
		case seen[e.ID]:
			return nil, fmt.Errorf("%s: %s is reviewed twice", path, e.ID)
		case e.Module == "":
			return nil, fmt.Errorf("%s: %s: module is empty", path, e.ID)
		case strings.TrimSpace(e.Summary) == "":
			return nil, fmt.Errorf("%s: %s: summary is empty", path, e.ID)
		case strings.TrimSpace(e.Reason) == "":
			return nil, fmt.Errorf("%s: %s: reason is empty: say why it cannot be exploited as shipped", path, e.ID)
		}
		for _, test := range e.Tests {
			if !testPattern.MatchString(test) {
				return nil, fmt.Errorf("%s: %s: test %q is not \"DIR TestName\"", path, e.ID, test)
			}
		}
		seen[e.ID] = true
	}
	return entries, nil
}

// ParseTest splits an Entry's test into its directory and the name of its
// top-level test function.
func ParseTest(test string) (dir, name string, ok bool) {
	m := testPattern.FindStringSubmatch(test)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// Frame is one function of a finding's trace.
type Frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
}

// String names the frame's function as package.(receiver).function.
func (f Frame) String() string {
	switch {
	case f.Function == "":
		return f.Package
	case f.Receiver != "":
		return fmt.Sprintf("%s.(%s).%s", f.Package, f.Receiver, f.Function)
	default:
		return f.Package + "." + f.Function
	}
}

// Finding is one of govulncheck's findings: Trace[0] is in the vulnerable
// module, and the last frame, for a called vulnerability, is where the scanned
// code calls into the path to it.
type Finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []Frame `json:"trace"`
}

// Called reports whether the finding is at the symbol level: the scanned code
// calls the vulnerable code, as far as govulncheck can tell.
func (f Finding) Called() bool {
	return len(f.Trace) > 0 && f.Trace[0].Function != ""
}

// Level says how deep govulncheck found the vulnerability: called, imported
// (a vulnerable package is imported, none of its vulnerable symbols is
// reached) or required (only the module is).
func (f Finding) Level() string {
	switch {
	case f.Called():
		return "called"
	case len(f.Trace) > 0 && f.Trace[0].Package != "":
		return "imported"
	default:
		return "required"
	}
}

// Report is one govulncheck run.
type Report struct {
	// Name says what was scanned, such as "operator binaries".
	Name string
	// Scanner, DB and GoVersion are from the run's config.
	Scanner, DB, GoVersion string
	// Findings are all of the run's findings.
	Findings []Finding
	// Summaries are the summaries of the vulnerabilities of the
	// database that the run looked at, by ID.
	Summaries map[string]string
}

// message is one JSON object of govulncheck's -format json stream; only
// the fields the gate reads.
type message struct {
	Config *struct {
		ScannerName    string `json:"scanner_name"`
		ScannerVersion string `json:"scanner_version"`
		DB             string `json:"db"`
		GoVersion      string `json:"go_version"`
		ScanLevel      string `json:"scan_level"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *Finding `json:"finding"`
}

// ReadReport reads govulncheck's -format json stream from r. The run must
// have been at the symbol level: at a coarser one, a vulnerability that is
// called cannot be told from one that is only imported.
func ReadReport(name string, r io.Reader) (*Report, error) {
	rep := &Report{Name: name, Summaries: map[string]string{}}
	dec := json.NewDecoder(bufio.NewReader(r))
	sawConfig := false
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: failed to read govulncheck's JSON: %v", name, err)
		}
		switch {
		case m.Config != nil:
			if m.Config.ScanLevel != "symbol" {
				return nil, fmt.Errorf("%s: govulncheck scanned at the %q level, want symbol", name, m.Config.ScanLevel)
			}
			sawConfig = true
			rep.Scanner = m.Config.ScannerName + " " + m.Config.ScannerVersion
			rep.DB, rep.GoVersion = m.Config.DB, m.Config.GoVersion
		case m.OSV != nil:
			rep.Summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil:
			if len(m.Finding.Trace) == 0 {
				return nil, fmt.Errorf("%s: finding of %s has no trace", name, m.Finding.OSV)
			}
			rep.Findings = append(rep.Findings, *m.Finding)
		}
	}
	if !sawConfig {
		return nil, fmt.Errorf("%s: no config in govulncheck's output: not a complete -format json run", name)
	}
	return rep, nil
}

// Vuln is one vulnerability that a report found, at its deepest level there.
type Vuln struct {
	ID      string
	Report  string
	Level   string
	Module  string
	Version string
	Fixed   string
	Summary string
	// Example is the shortest of its traces.
	Example []Frame
}

// Where names the vulnerable module's version and its fix.
func (v Vuln) Where() string {
	fixed := "no fix"
	if v.Fixed != "" {
		fixed = "fixed in " + v.Fixed
	}
	return fmt.Sprintf("%s@%s, %s", v.Module, v.Version, fixed)
}

// Path names the shortest path from the scanned code to the vulnerable
// symbol: its first and last function and how many are between.
func (v Vuln) Path() string {
	n := len(v.Example)
	switch n {
	case 0:
		return ""
	case 1:
		return v.Example[0].String()
	case 2:
		return v.Example[1].String() + " -> " + v.Example[0].String()
	default:
		return fmt.Sprintf("%s -> (%d more) -> %s", v.Example[n-1], n-2, v.Example[0])
	}
}

// levelRank orders the levels from the deepest.
var levelRank = map[string]int{"called": 0, "imported": 1, "required": 2}

// Vulns returns the vulnerabilities of the report, one per ID at its deepest
// level, sorted by ID.
func (r *Report) Vulns() []Vuln {
	byID := map[string]*Vuln{}
	for _, f := range r.Findings {
		lvl := f.Level()
		v, ok := byID[f.OSV]
		if ok && (levelRank[lvl] > levelRank[v.Level] || (lvl == v.Level && len(f.Trace) >= len(v.Example))) {
			continue
		}
		byID[f.OSV] = &Vuln{
			ID: f.OSV, Report: r.Name, Level: lvl,
			Module: f.Trace[0].Module, Version: f.Trace[0].Version, Fixed: f.FixedVersion,
			Summary: r.Summaries[f.OSV], Example: f.Trace,
		}
	}
	vulns := make([]Vuln, 0, len(byID))
	for _, v := range byID {
		vulns = append(vulns, *v)
	}
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	return vulns
}

// Result is what Check found.
type Result struct {
	// Reviewed are the called vulnerabilities that the list explains.
	Reviewed []Vuln
	// NotCalled are the vulnerabilities found in required or imported code
	// only.
	NotCalled []Vuln
	// Problems fail the gate: a called vulnerability that the list does
	// not explain, or an entry that no report finds called.
	Problems []string
}

// Check compares the reports with the reviewed list.
func Check(reviewed []Entry, reports []*Report) Result {
	var res Result
	entries := map[string]Entry{}
	for _, e := range reviewed {
		entries[e.ID] = e
	}
	calledSomewhere := map[string]bool{}
	for _, r := range reports {
		for _, v := range r.Vulns() {
			if v.Level != "called" {
				res.NotCalled = append(res.NotCalled, v)
				continue
			}
			e, ok := entries[v.ID]
			switch {
			case !ok:
				res.Problems = append(res.Problems, fmt.Sprintf(
					"%s: %s (%s) is called and not reviewed: %s\n    path: %s\n    fix it, or say in test/vuln/reviewed.yaml why it cannot be exploited as shipped",
					r.Name, v.ID, v.Where(), v.Summary, v.Path()))
			case e.Module != v.Module:
				res.Problems = append(res.Problems, fmt.Sprintf(
					"%s: %s is called in %s, but test/vuln/reviewed.yaml reviews it in %s\n    path: %s",
					r.Name, v.ID, v.Module, e.Module, v.Path()))
			default:
				calledSomewhere[v.ID] = true
				res.Reviewed = append(res.Reviewed, v)
			}
		}
	}
	for _, e := range reviewed {
		if !calledSomewhere[e.ID] {
			res.Problems = append(res.Problems, fmt.Sprintf(
				"%s (%s) is reviewed in test/vuln/reviewed.yaml, but no scan finds it called in %s any more: remove its entry (and tests that only it needs)",
				e.ID, e.Summary, e.Module))
		}
	}
	return res
}
