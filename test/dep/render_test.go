package dep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPinFor(t *testing.T) {
	known := map[string]LockedProject{
		"k8s.io/client-go":              {Name: "k8s.io/client-go", Revision: "1f13a808da65775f22cbf47862c4e5898d8f4ca1", Version: "kubernetes-1.11.2"},
		"github.com/ghodss/yaml":        {Name: "github.com/ghodss/yaml", Revision: "0ca9ea5df5451ffdf184b4428c902747c2c11cd7", Version: "v1.0.0"},
		"github.com/peterbourgon/diskv": {Name: "github.com/peterbourgon/diskv", Revision: "5f041e8faa004a95c88a202771f4cc3e991971e6", Version: "v2.0.1"},
		"github.com/sirupsen/logrus":    {Name: "github.com/sirupsen/logrus", Revision: "3e01752db0189b9157070a0e1668a620f9a85da2", Version: "v1.0.6"},
		"example.com/fork":              {Name: "example.com/fork", Revision: "aaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbb", Version: "v1.1.0"},
	}
	tests := []struct {
		name    string
		in      Module
		want    pin
		wantErr bool
	}{
		{
			name: "pseudo-version found in the known lock",
			in:   Module{Path: "k8s.io/client-go", Version: "v0.0.0-20180806134042-1f13a808da65"},
			want: pin{name: "k8s.io/client-go", revision: "1f13a808da65775f22cbf47862c4e5898d8f4ca1"},
		},
		{
			name: "pseudo-version of another commit keeps the short hash",
			in:   Module{Path: "k8s.io/client-go", Version: "v0.0.0-20190806134042-0123456789ab"},
			want: pin{name: "k8s.io/client-go", revision: "0123456789ab"},
		},
		{
			name: "pseudo-version of an unknown project keeps the short hash",
			in:   Module{Path: "github.com/golang/groupcache", Version: "v0.0.0-20241129210726-2c02b8208cf8"},
			want: pin{name: "github.com/golang/groupcache", revision: "2c02b8208cf8"},
		},
		{
			name: "tag found in the known lock",
			in:   Module{Path: "github.com/ghodss/yaml", Version: "v1.0.0"},
			want: pin{name: "github.com/ghodss/yaml", revision: "0ca9ea5df5451ffdf184b4428c902747c2c11cd7", tag: "v1.0.0"},
		},
		{
			name: "incompatible tag found in the known lock",
			in:   Module{Path: "github.com/peterbourgon/diskv", Version: "v2.0.1+incompatible"},
			want: pin{name: "github.com/peterbourgon/diskv", revision: "5f041e8faa004a95c88a202771f4cc3e991971e6", tag: "v2.0.1"},
		},
		{
			name: "other tag has no revision",
			in:   Module{Path: "github.com/sirupsen/logrus", Version: "v1.9.3"},
			want: pin{name: "github.com/sirupsen/logrus", tag: "v1.9.3"},
		},
		{
			name: "replacement version wins",
			in: Module{Path: "github.com/sirupsen/logrus", Version: "v1.9.3",
				Replace: &Module{Path: "github.com/sirupsen/logrus", Version: "v1.0.6"}},
			want: pin{name: "github.com/sirupsen/logrus", revision: "3e01752db0189b9157070a0e1668a620f9a85da2", tag: "v1.0.6"},
		},
		{
			name: "replacement by another module becomes the source",
			in: Module{Path: "github.com/sirupsen/logrus", Version: "v1.9.3",
				Replace: &Module{Path: "example.com/fork", Version: "v1.1.0"}},
			want: pin{name: "github.com/sirupsen/logrus", source: "example.com/fork",
				revision: "aaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbb", tag: "v1.1.0"},
		},
		{
			name:    "replacement by a directory",
			in:      Module{Path: "github.com/sirupsen/logrus", Version: "v1.9.3", Replace: &Module{Path: "../logrus"}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pinFor(tt.in, known)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// testInput is a small build: the main module imports logrus and client-go's rest, which
// imports apimachinery; mergo is in the build list but provides no imported package.
func testInput() Input {
	main := &Module{Path: "example.com/op", Main: true}
	logrus := Module{Path: "github.com/sirupsen/logrus", Version: "v1.9.3", Indirect: true}
	clientgo := Module{Path: "k8s.io/client-go", Version: "v0.0.0-20180806134042-1f13a808da65"}
	apimachinery := Module{Path: "k8s.io/apimachinery", Version: "v0.0.0-20180621070125-103fd098999d", Indirect: true}
	modules := []Module{
		{Path: "github.com/googleapis/gnostic", Version: "v0.2.0", Indirect: true},
		{Path: "github.com/imdario/mergo", Version: "v0.3.16", Indirect: true},
		{Path: "github.com/json-iterator/go", Version: "v1.1.12", Indirect: true},
		{Path: "github.com/modern-go/reflect2", Version: "v1.0.2", Indirect: true},
		logrus,
		{Path: "k8s.io/api", Version: "v0.0.0-20180712090710-2d6f90ab1293", Indirect: true},
		apimachinery,
		clientgo,
		{Path: "k8s.io/kube-openapi", Version: "v0.0.0-20180731170545-e3762e86a74c", Indirect: true},
	}
	return Input{
		MainModule: "example.com/op",
		Modules:    modules,
		Packages: []Package{
			{ImportPath: "example.com/op/cmd/op", Module: main, Imports: []string{"C", "example.com/op/pkg/stub", "fmt", "github.com/sirupsen/logrus"}},
			{ImportPath: "example.com/op/pkg/stub", Module: main, Imports: []string{"k8s.io/client-go/rest"}},
			{ImportPath: "github.com/sirupsen/logrus", Module: &logrus, Imports: []string{"os"}},
			{ImportPath: "k8s.io/apimachinery/pkg/runtime", Module: &apimachinery},
			{ImportPath: "k8s.io/apimachinery/pkg/api/errors", Module: &apimachinery},
			{ImportPath: "k8s.io/client-go/rest", Module: &clientgo, Imports: []string{"k8s.io/apimachinery/pkg/api/errors", "k8s.io/apimachinery/pkg/runtime"}},
		},
		RevisionSource: "operator-sdk v0.0.7",
		KnownProjects: []LockedProject{
			{Name: "k8s.io/client-go", Revision: "1f13a808da65775f22cbf47862c4e5898d8f4ca1", Version: "kubernetes-1.11.2"},
		},
	}
}

func TestRenderLock(t *testing.T) {
	files, err := Render(testInput())
	if err != nil {
		t.Fatal(err)
	}
	got := string(files.Lock)
	body := got[strings.Index(got, "\n\n")+1:] // after the header comment
	want := `
[[projects]]
  name = "github.com/sirupsen/logrus"
  packages = ["."]
  pruneopts = "UT"
  version = "v1.9.3"

[[projects]]
  name = "k8s.io/apimachinery"
  packages = [
    "pkg/api/errors",
    "pkg/runtime",
  ]
  pruneopts = "UT"
  revision = "103fd098999d"

[[projects]]
  name = "k8s.io/client-go"
  packages = ["rest"]
  pruneopts = "UT"
  revision = "1f13a808da65775f22cbf47862c4e5898d8f4ca1"

[solve-meta]
  analyzer-name = "dep"
  analyzer-version = 1
  input-imports = [
    "github.com/sirupsen/logrus",
    "k8s.io/client-go/rest",
  ]
  solver-name = "gps-cdcl"
  solver-version = 1
`
	if body != want {
		t.Errorf("Gopkg.lock differs:\n%s", Diff("want", "got", want, body))
	}
	for _, s := range []string{"generated from go.mod", Script, "do not edit", "digest", "operator-sdk v0.0.7"} {
		if !strings.Contains(got[:len(got)-len(body)], s) {
			t.Errorf("header comment does not mention %q:\n%s", s, got)
		}
	}
}

func TestRenderManifest(t *testing.T) {
	files, err := Render(testInput())
	if err != nil {
		t.Fatal(err)
	}
	got := string(files.Manifest)
	body := got[strings.Index(got, "\n\n")+1:]
	// logrus is marked indirect in go.mod but imported directly, so it is constrained;
	// client-go is direct but overridden, so it appears once, as an override.
	want := `
[[constraint]]
  name = "github.com/sirupsen/logrus"
  version = "=v1.9.3"

[[override]]
  name = "github.com/googleapis/gnostic"
  version = "=v0.2.0"

[[override]]
  name = "github.com/imdario/mergo"
  version = "=v0.3.16"

[[override]]
  name = "github.com/json-iterator/go"
  version = "=v1.1.12"

[[override]]
  name = "github.com/modern-go/reflect2"
  version = "=v1.0.2"

[[override]]
  name = "k8s.io/api"
  revision = "2d6f90ab1293"

[[override]]
  name = "k8s.io/apimachinery"
  revision = "103fd098999d"

[[override]]
  name = "k8s.io/client-go"
  revision = "1f13a808da65775f22cbf47862c4e5898d8f4ca1"

[[override]]
  name = "k8s.io/kube-openapi"
  revision = "e3762e86a74c"

[prune]
  go-tests = true
  unused-packages = true
`
	if body != want {
		t.Errorf("Gopkg.toml differs:\n%s", Diff("want", "got", want, body))
	}
	for _, s := range []string{"generated from go.mod", Script, "do not edit"} {
		if !strings.Contains(got[:len(got)-len(body)], s) {
			t.Errorf("header comment does not mention %q:\n%s", s, got)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Input)
		want   string
	}{
		{
			name:   "override missing from the build list",
			modify: func(in *Input) { in.Modules = in.Modules[1:] },
			want:   "override github.com/googleapis/gnostic is not in the build list",
		},
		{
			name: "import that go list did not report",
			modify: func(in *Input) {
				in.Packages[1].Imports = append(in.Packages[1].Imports, "example.org/missing")
			},
			want: "imports example.org/missing, which go list did not report",
		},
		{
			name:   "package outside any module",
			modify: func(in *Input) { in.Packages[2].Module = nil },
			want:   "package github.com/sirupsen/logrus belongs to no module",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput()
			tt.modify(&in)
			_, err := Render(in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, err := Render(testInput())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := Render(testInput())
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Manifest) != string(b.Manifest) || string(a.Lock) != string(b.Lock) {
			t.Fatalf("render %d differs from the first", i+2)
		}
	}
}

func TestTomlQuote(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"k8s.io/api", `"k8s.io/api"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"tab\there", `"tab\u0009here"`},
	}
	for _, tt := range tests {
		if got := tomlQuote(tt.in); got != tt.want {
			t.Errorf("tomlQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestDiff(t *testing.T) {
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	fifteen := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15"}
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{
			name: "one changed line with context",
			a:    lines(fifteen...),
			b:    lines("1", "2", "3", "4", "5", "six", "7", "8", "9", "10", "11", "12", "13", "14", "15"),
			want: lines("--- a", "+++ b", "@@ -3 +3 @@", " 3", " 4", " 5", "-6", "+six", " 7", " 8", " 9"),
		},
		{
			name: "two hunks far apart",
			a:    lines(fifteen...),
			b:    lines("one", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"),
			want: lines("--- a", "+++ b", "@@ -1 +1 @@", "-1", "+one", " 2", " 3", " 4",
				"@@ -13 +13 @@", " 13", " 14", " 15", "+16"),
		},
		{
			name: "equal",
			a:    lines(fifteen...),
			b:    lines(fifteen...),
			want: lines("--- a", "+++ b"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff("a", "b", tt.a, tt.b); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	files := Files{Manifest: []byte("a\n"), Lock: []byte("x\ny\n")}
	tests := []struct {
		name     string
		manifest string // committed content; "-" for a missing file
		lock     string
		want     []string
	}{
		{name: "current", manifest: "a\n", lock: "x\ny\n"},
		{name: "stale lock", manifest: "a\n", lock: "x\nz\n",
			want: []string{"Gopkg.lock is stale: run make generate", "-z", "+y"}},
		{name: "missing manifest", manifest: "-", lock: "x\ny\n",
			want: []string{"Gopkg.toml is missing: run make generate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range map[string]string{ManifestFile: tt.manifest, LockFile: tt.lock} {
				if content != "-" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := files.Compare(dir)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}
