// Module vulncheck pins govulncheck, which `make vulncheck` (test/scripts/vulncheck.sh)
// runs over the operator's binaries and the test module. It shares no library with the
// other tool modules, so test/dep's sharedToolModules leaves it out.
module github.com/example-inc/memcached-operator/test/tools/vulncheck

go 1.26.3

require golang.org/x/vuln v1.9.0

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20261010193011-f71dc92da45e // indirect
	golang.org/x/tools v0.52.0 // indirect
)
