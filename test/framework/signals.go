package framework

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// CleanupOnSignal runs cleanup, then exits with status 1, when the test binary gets
// SIGINT or SIGTERM (Ctrl-C, or a CI job being stopped). The local cluster's and the
// real node's processes are not the binary's children, so without this they would
// outlive it. A `go test -timeout` panic still skips it; the next run then recreates
// the cluster and tears down a leftover node.
func CleanupOnSignal(what string, cleanup func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%v: %s\n", sig, what)
		cleanup()
		os.Exit(1)
	}()
}
