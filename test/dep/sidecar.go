package dep

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

const (
	// SidecarPackage is the sidecar's main package, relative to the module root.
	SidecarPackage = "./cmd/memcached-sidecar"
	// SidecarDockerfile builds the sidecar's image; it is one of its sources.
	SidecarDockerfile = "tmp/build/Dockerfile.sidecar"
	// SidecarVersionFile holds the sidecar's own release, which the sidecar embeds
	// and which tags its image. It is not a source: SidecarSources leaves it out, so
	// that a digest printed before a version's change still holds after it.
	SidecarVersionFile = "pkg/sidecar/VERSION"
	// SidecarReleasesFile records, beside the version, each sidecar release with the
	// digest of its sources, oldest first.
	SidecarReleasesFile = "pkg/sidecar/SOURCES"
	// OperatorVersionPackage holds the operator's release, which the sidecar must not
	// import: every operator release would then change the sidecar's sources.
	OperatorVersionPackage = "github.com/example-inc/memcached-operator/pkg/version"
)

// sidecarPlatform is the image's platform, whose files the build compiles.
var sidecarPlatform = []string{"GOOS=linux", "GOARCH=amd64"}

// SidecarSourceSet is what the sidecar image is built from, as SidecarSources finds it.
type SidecarSourceSet struct {
	// Digest is "sha256:" and the hash of Lines.
	Digest string
	// Lines name, one each and sorted, every file of the main module that the build
	// reads (the Go, assembly and embedded files of each package that the sidecar
	// depends on, and the Dockerfile) with its content's SHA-256, and every other
	// module of its build with its version.
	Lines []string
	// Packages are the main module's packages among the sidecar's dependencies.
	Packages []string
}

// SidecarSources lists the sources of the sidecar's image in the module at root:
// `go list -deps` of SidecarPackage for linux/amd64, the packages of this module with
// their files, the modules of the others, and SidecarDockerfile. The Go toolchain and
// tmp/build/build.sh's flags are not in it.
func SidecarSources(ctx context.Context, root string) (SidecarSourceSet, error) {
	out, err := goCommand(ctx, root, sidecarPlatform, "list", "-deps",
		"-json=ImportPath,Standard,Dir,Module,GoFiles,CgoFiles,SFiles,EmbedFiles", SidecarPackage)
	if err != nil {
		return SidecarSourceSet{}, err
	}
	type listed struct {
		ImportPath string
		Standard   bool
		Dir        string
		Module     *Module
		GoFiles    []string
		CgoFiles   []string
		SFiles     []string
		EmbedFiles []string
	}
	var set SidecarSourceSet
	files := []string{SidecarDockerfile}
	modules := map[string]bool{}
	err = decodeStream(out, func(p *listed) {
		switch {
		case p.Standard:
		case p.Module == nil:
			modules["(no module) "+p.ImportPath] = true
		case p.Module.Main:
			set.Packages = append(set.Packages, p.ImportPath)
			for _, group := range [][]string{p.GoFiles, p.CgoFiles, p.SFiles, p.EmbedFiles} {
				for _, f := range group {
					files = append(files, filepath.Join(p.Dir, f))
				}
			}
		default:
			m := p.Module
			if m.Replace != nil {
				m = m.Replace
			}
			modules["module "+m.Path+" "+m.Version] = true
		}
	})
	if err != nil {
		return SidecarSourceSet{}, fmt.Errorf("failed to decode go list -deps %s: %v", SidecarPackage, err)
	}
	for _, f := range files {
		rel := f
		if filepath.IsAbs(f) {
			if rel, err = filepath.Rel(root, f); err != nil {
				return SidecarSourceSet{}, err
			}
		}
		rel = filepath.ToSlash(rel)
		if rel == SidecarVersionFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return SidecarSourceSet{}, err
		}
		sum := sha256.Sum256(data)
		set.Lines = append(set.Lines, "file "+rel+" "+hex.EncodeToString(sum[:]))
	}
	for m := range modules {
		set.Lines = append(set.Lines, m)
	}
	sort.Strings(set.Lines)
	sort.Strings(set.Packages)
	sum := sha256.Sum256([]byte(strings.Join(set.Lines, "\n") + "\n"))
	set.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return set, nil
}

// SidecarRelease is one line of SidecarReleasesFile: a version and its sources' digest.
type SidecarRelease struct {
	Version string
	Digest  string
}

// ParseSidecarReleases reads SidecarReleasesFile's content: one "VERSION DIGEST" line
// per release, oldest first, each VERSION a semantic version newer than the one before;
// blank lines and lines starting with # are comments.
func ParseSidecarReleases(data []byte) ([]SidecarRelease, error) {
	var releases []SidecarRelease
	s := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || !strings.HasPrefix(fields[1], "sha256:") {
			return nil, fmt.Errorf("line %d: %q is not VERSION sha256:DIGEST", n, line)
		}
		r := SidecarRelease{Version: fields[0], Digest: fields[1]}
		if !semver.IsValid("v" + r.Version) {
			return nil, fmt.Errorf("line %d: %q is not a semantic version", n, r.Version)
		}
		if len(releases) > 0 {
			if prev := releases[len(releases)-1]; semver.Compare("v"+r.Version, "v"+prev.Version) <= 0 {
				return nil, fmt.Errorf("line %d: release %s is not newer than %s before it", n, r.Version, prev.Version)
			}
		}
		releases = append(releases, r)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(releases) == 0 {
		return nil, fmt.Errorf("no release")
	}
	return releases, nil
}
