package dep

import (
	"regexp"
	"strings"
)

// pseudoVersionRE matches the three pseudo-version forms of the go command, as
// golang.org/x/mod/module defines them, and captures the revision:
//
//	vX.0.0-yyyymmddhhmmss-abcdefabcdef       (no earlier tag)
//	vX.Y.Z-pre.0.yyyymmddhhmmss-abcdefabcdef (after the pre-release vX.Y.Z-pre)
//	vX.Y.(Z+1)-0.yyyymmddhhmmss-abcdefabcdef (after the release vX.Y.Z)
//
// each optionally followed by build metadata such as +incompatible.
var pseudoVersionRE = regexp.MustCompile(
	`^v[0-9]+\.(?:0\.0-|[0-9]+\.[0-9]+-(?:[^+]*\.)?0\.)[0-9]{14}-([A-Za-z0-9]+)(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$`)

// PseudoVersionRev returns the revision that a pseudo-version encodes, such as
// "1f13a808da65" for v0.0.0-20180806134042-1f13a808da65, and false when v is not a
// pseudo-version (a tagged release such as v1.9.3 or v2.0.1+incompatible).
func PseudoVersionRev(v string) (string, bool) {
	m := pseudoVersionRE.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// TagName returns the git tag that a tagged module version was made from: the version
// without build metadata, so v2.0.1+incompatible comes from the tag v2.0.1.
func TagName(v string) string {
	if i := strings.IndexByte(v, '+'); i >= 0 {
		return v[:i]
	}
	return v
}
