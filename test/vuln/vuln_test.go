package vuln

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// stream returns a govulncheck -format json stream: a config at scanLevel,
// then one osv message and the findings of each vulnerability.
func stream(t *testing.T, scanLevel string, findings ...Finding) string {
	t.Helper()
	msgs := []any{map[string]any{"config": map[string]any{
		"protocol_version": "v1.0.0", "scanner_name": "govulncheck", "scanner_version": "v1.9.0",
		"db": "file:///vulndb", "go_version": "go1.26.8", "scan_level": scanLevel,
	}}}
	for _, f := range findings {
		msgs = append(msgs, map[string]any{"osv": map[string]any{"id": f.OSV, "summary": "summary of " + f.OSV}})
		msgs = append(msgs, map[string]any{"finding": f})
	}
	var b strings.Builder
	for _, m := range msgs {
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// The findings of one vulnerability in module m at each level.
func called(id, m string) Finding {
	return Finding{OSV: id, FixedVersion: "v1.0.0", Trace: []Frame{
		{Module: m, Version: "v0.1.0", Package: m + "/pkg", Function: "Vulnerable"},
		{Module: "example.com/operator", Package: "example.com/operator/cmd", Function: "run"},
		{Module: "example.com/operator", Package: "example.com/operator/cmd", Function: "main"},
	}}
}

func imported(id, m string) Finding {
	return Finding{OSV: id, Trace: []Frame{{Module: m, Version: "v0.1.0", Package: m + "/pkg"}}}
}

func required(id, m string) Finding {
	return Finding{OSV: id, Trace: []Frame{{Module: m, Version: "v0.1.0"}}}
}

func entry(id, m string) Entry {
	return Entry{ID: id, Module: m, Summary: "s", Reason: "r"}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		reviewed []Entry
		reports  map[string][]Finding
		// wantProblems are patterns, one for each problem.
		wantProblems  []string
		wantReviewed  []string
		wantNotCalled []string
	}{
		{
			name:     "a reviewed vulnerability, called, at every level in the report",
			reviewed: []Entry{entry("GO-2021-0001", "a.example/m")},
			reports: map[string][]Finding{"binaries": {
				required("GO-2021-0001", "a.example/m"), imported("GO-2021-0001", "a.example/m"), called("GO-2021-0001", "a.example/m"),
			}},
			wantReviewed: []string{"GO-2021-0001"},
		},
		{
			name: "a vulnerability that is not called needs no review",
			reports: map[string][]Finding{"binaries": {
				imported("GO-2021-0002", "a.example/m"), required("GO-2021-0003", "b.example/m"),
			}},
			wantNotCalled: []string{"GO-2021-0002", "GO-2021-0003"},
		},
		{
			name:         "a called vulnerability that is not reviewed",
			reports:      map[string][]Finding{"binaries": {called("GO-2021-0004", "a.example/m")}},
			wantProblems: []string{`^binaries: GO-2021-0004 \(a\.example/m@v0\.1\.0, fixed in v1\.0\.0\) is called and not reviewed: summary of GO-2021-0004\n    path: example\.com/operator/cmd\.main -> \(1 more\) -> a\.example/m/pkg\.Vulnerable\n`},
		},
		{
			name:         "a reviewed entry that no report finds",
			reviewed:     []Entry{entry("GO-2021-0005", "a.example/m")},
			reports:      map[string][]Finding{"binaries": nil},
			wantProblems: []string{`^GO-2021-0005 \(s\) is reviewed .* no scan finds it called in a\.example/m any more`},
		},
		{
			name:          "a reviewed entry that is only imported now is stale",
			reviewed:      []Entry{entry("GO-2021-0006", "a.example/m")},
			reports:       map[string][]Finding{"binaries": {imported("GO-2021-0006", "a.example/m")}},
			wantProblems:  []string{`^GO-2021-0006 .* no scan finds it called`},
			wantNotCalled: []string{"GO-2021-0006"},
		},
		{
			name:         "a reviewed entry does not cover another module",
			reviewed:     []Entry{entry("GO-2021-0007", "a.example/m")},
			reports:      map[string][]Finding{"binaries": {called("GO-2021-0007", "b.example/m")}},
			wantProblems: []string{`^binaries: GO-2021-0007 is called in b\.example/m, but .* reviews it in a\.example/m`, `^GO-2021-0007 .* no scan finds it called`},
		},
		{
			name:     "an entry called in one of two reports is current",
			reviewed: []Entry{entry("GO-2021-0008", "a.example/m")},
			reports: map[string][]Finding{
				"binaries":    {called("GO-2021-0008", "a.example/m")},
				"test module": nil,
			},
			wantReviewed: []string{"GO-2021-0008"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reports []*Report
			for _, name := range []string{"binaries", "test module"} {
				findings, ok := tt.reports[name]
				if !ok {
					continue
				}
				r, err := ReadReport(name, strings.NewReader(stream(t, "symbol", findings...)))
				if err != nil {
					t.Fatal(err)
				}
				reports = append(reports, r)
			}
			res := Check(tt.reviewed, reports)
			if len(res.Problems) != len(tt.wantProblems) {
				t.Fatalf("got problems %q, want %d matching %q", res.Problems, len(tt.wantProblems), tt.wantProblems)
			}
			for i, p := range res.Problems {
				if !regexp.MustCompile(tt.wantProblems[i]).MatchString(p) {
					t.Errorf("got problem %q, want it to match %q", p, tt.wantProblems[i])
				}
			}
			if got := ids(res.Reviewed); !reflect.DeepEqual(got, tt.wantReviewed) {
				t.Errorf("got reviewed %v, want %v", got, tt.wantReviewed)
			}
			if got := ids(res.NotCalled); !reflect.DeepEqual(got, tt.wantNotCalled) {
				t.Errorf("got not called %v, want %v", got, tt.wantNotCalled)
			}
		})
	}
}

// ids returns the vulnerabilities' IDs, nil for none.
func ids(vulns []Vuln) []string {
	var out []string
	for _, v := range vulns {
		out = append(out, v.ID)
	}
	return out
}

func TestReadReport(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "a symbol-level scan", in: stream(t, "symbol", called("GO-2021-0001", "a.example/m"))},
		{name: "a module-level scan cannot tell called from required", in: stream(t, "module"), wantErr: `scanned at the "module" level, want symbol`},
		{name: "no config: an interrupted run", in: `{"progress":{"message":"Scanning..."}}`, wantErr: "no config"},
		{name: "empty", in: "", wantErr: "no config"},
		{name: "not JSON", in: "Scanning your code...\n", wantErr: "failed to read govulncheck's JSON"},
		{name: "a finding without a trace", in: stream(t, "symbol", Finding{OSV: "GO-2021-0001"}), wantErr: "has no trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadReport("r", strings.NewReader(tt.in))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestReadReviewedRefuses(t *testing.T) {
	const good = "- id: GO-2021-0001\n  module: a.example/m\n  summary: s\n  reason: r\n"
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "a good entry", in: good + "  tests:\n    - pkg/kube TestX/sub\n"},
		{name: "an unknown field", in: good + "  reasons: r\n", wantErr: "unknown field"},
		{name: "a duplicate", in: good + good, wantErr: "reviewed twice"},
		{name: "no reason", in: "- id: GO-2021-0001\n  module: a.example/m\n  summary: s\n", wantErr: "reason is empty"},
		{name: "no module", in: "- id: GO-2021-0001\n  summary: s\n  reason: r\n", wantErr: "module is empty"},
		{name: "an alias for an ID", in: "- id: CVE-2020-8565\n  module: a.example/m\n  summary: s\n  reason: r\n", wantErr: "not a Go vulnerability ID"},
		{name: "a test without its directory", in: good + "  tests:\n    - TestX\n", wantErr: `not "DIR TestName"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reviewed.yaml")
			if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadReviewed(path)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestReviewedTestsExist reads the repository's reviewed list and checks that
// every test it names is a test function in its directory, so that a reason
// never rests on a test that was renamed or removed.
func TestReviewedTestsExist(t *testing.T) {
	entries, err := ReadReviewed("reviewed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	for _, e := range entries {
		for _, test := range e.Tests {
			dir, name, _ := ParseTest(test)
			files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
			if err != nil {
				t.Fatal(err)
			}
			decl := regexp.MustCompile(`(?m)^func ` + name + `\(t \*testing\.T\) \{$`)
			found := false
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				found = found || decl.Match(data)
			}
			if !found {
				t.Errorf("%s: test %q: no func %s(t *testing.T) in %s/*_test.go", e.ID, test, name, dir)
			}
		}
	}
}
