package dep

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// sidecarImageRef matches every reference to the sidecar's image in deploy/.
var sidecarImageRef = regexp.MustCompile(`quay\.io/example/memcached-sidecar:\S+`)

// TestSidecarVersionFollowsItsSources fails when the sidecar's sources (SidecarSources)
// differ from those recorded for its version in pkg/sidecar/SOURCES: a change of the
// sidecar that keeps its version would ship under an image tag that already names other
// content, and one that took the operator's release instead would roll every pod with
// TLS or monitoring on each operator upgrade. It also checks that the version is the one
// that deploy/operator.yaml and every CSV name, and that the sidecar does not import the
// operator's release.
func TestSidecarVersionFollowsItsSources(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, SidecarVersionFile))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	data, err := os.ReadFile(filepath.Join(root, SidecarReleasesFile))
	if err != nil {
		t.Fatal(err)
	}
	releases, err := ParseSidecarReleases(data)
	if err != nil {
		t.Fatalf("%s: %v", SidecarReleasesFile, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sources, err := SidecarSources(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sources.Packages, OperatorVersionPackage) {
		t.Errorf("the sidecar imports %s, the operator's release: every operator release would change it; use pkg/sidecar.Version", OperatorVersionPackage)
	}

	last := releases[len(releases)-1]
	switch {
	case last.Version != version:
		t.Errorf("%s says %s, but the last release in %s is %s: append %q to %s",
			SidecarVersionFile, version, SidecarReleasesFile, last.Version, version+" "+sources.Digest, SidecarReleasesFile)
	case last.Digest != sources.Digest:
		t.Errorf("the sidecar's sources changed since its release %s (%s recorded, %s now): give it a new version in %s "+
			"and append that version and %s to %s; its image gets a new tag, and the next operator release rolls the pods "+
			"with TLS or monitoring, paced by --max-concurrent-rolls.\nThe sources now:\n  %s",
			version, last.Digest, sources.Digest, SidecarVersionFile, sources.Digest, SidecarReleasesFile, strings.Join(sources.Lines, "\n  "))
	}

	want := "quay.io/example/memcached-sidecar:v" + version
	found := 0
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, ref := range sidecarImageRef.FindAllString(string(data), -1) {
			found++
			if ref != want {
				t.Errorf("%s names the sidecar image %s, want %s (%s)", path, ref, want, SidecarVersionFile)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Errorf("no file in deploy/ names the sidecar image %s", want)
	}
}

func TestParseSidecarReleases(t *testing.T) {
	const a, b = "sha256:aa", "sha256:bb"
	tests := []struct {
		name    string
		in      string
		want    []SidecarRelease
		wantErr string
	}{
		{name: "one", in: "0.1.0 " + a + "\n", want: []SidecarRelease{{"0.1.0", a}}},
		{name: "comments and two", in: "# header\n\n0.1.0 " + a + "\n0.2.0 " + b + "\n", want: []SidecarRelease{{"0.1.0", a}, {"0.2.0", b}}},
		{name: "none", in: "# only a header\n", wantErr: "no release"},
		{name: "not newer", in: "0.2.0 " + a + "\n0.1.0 " + b + "\n", wantErr: "not newer than 0.2.0"},
		{name: "same version twice", in: "0.1.0 " + a + "\n0.1.0 " + b + "\n", wantErr: "not newer than 0.1.0"},
		{name: "no digest", in: "0.1.0\n", wantErr: "is not VERSION sha256:DIGEST"},
		{name: "not a version", in: "v0.1 " + a + "\n", wantErr: "not a semantic version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSidecarReleases([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v, want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}
