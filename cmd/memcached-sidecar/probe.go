package main

import (
	"fmt"
	"net/http"
	"time"
)

// healthPath is where the sidecar's servers say that the process serves,
// and what --probe asks.
const healthPath = "/healthz"

// probeTimeout bounds --probe's request: below the liveness probe's
// timeoutSeconds of 5 (pkg/memcached's sidecarContainer), so that a
// supervisor that does not answer fails the probe with a line that says so,
// rather than with the kubelet's kill of the probe.
const probeTimeout = 3 * time.Second

// probeFailed is the error of a --probe that failed, which main writes as
// one plain line rather than a log entry.
type probeFailed struct{ error }

// probe asks the /healthz at addr, a supervisor's --health-addr, and fails
// unless it answers 200 OK within timeout. It runs as the container's exec
// probe every 10 s, under the container's memory limit beside the
// supervisor and its worker: one request, with no connection kept.
func probe(addr string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + addr + healthPath
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
