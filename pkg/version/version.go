// Package version holds the operator's release, stamped at build time so that
// logs, --version and the image labels name the same build.
package version

var (
	// Version is the operator release; tmp/build/build.sh overrides it with -ldflags -X.
	Version = "0.0.2"
	// GitCommit is the commit the binary was built from; build.sh stamps it.
	GitCommit = "unknown"
)
