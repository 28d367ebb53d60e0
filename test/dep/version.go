package dep

import (
	"strings"

	"golang.org/x/mod/module"
)

// PseudoVersionRev returns the revision that a pseudo-version encodes, such as
// "1f13a808da65" for v0.0.0-20180806134042-1f13a808da65, and false when v is not a
// pseudo-version (a tagged release such as v1.9.3 or v2.0.1+incompatible).
func PseudoVersionRev(v string) (string, bool) {
	if !module.IsPseudoVersion(v) {
		return "", false
	}
	rev, err := module.PseudoVersionRev(v)
	if err != nil {
		return "", false
	}
	return rev, true
}

// TagName returns the git tag that a tagged module version was made from: the version
// without build metadata, so v2.0.1+incompatible comes from the tag v2.0.1.
func TagName(v string) string {
	if i := strings.IndexByte(v, '+'); i >= 0 {
		return v[:i]
	}
	return v
}
