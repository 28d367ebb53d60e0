package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// ReportPort and ReportPath are where every sidecar serves its Report over
// HTTP, on the pod's IP: the operator asks there (see package sidecarpoll),
// since it may not read the pods' Secrets and the pods hold no API token.
// The port is the metrics port, whose server serves the report too.
const (
	ReportPort = 9150
	ReportPath = "/status"
)

// The reasons of a Report's problems, which the Memcached's Degraded
// condition takes over.
const (
	// ReasonCertificateRefreshFailed: memcached does not serve the mounted
	// certificate, because the files do not load (a key that does not
	// match its certificate), memcached refused refresh_certs, or the
	// sidecar could not reach or log in to memcached to send it.
	ReasonCertificateRefreshFailed = "CertificateRefreshFailed"
	// ReasonAuthReloadFailed: memcached does not have the mounted -Y file,
	// because it is malformed, the sidecar cannot signal memcached, or
	// memcached did not load it, so the sidecar cannot log in with it.
	ReasonAuthReloadFailed = "AuthReloadFailed"
	// ReasonSidecarFailing: the sidecar's worker, which does all of the
	// above and serves the metrics, exited and has not run for its
	// Supervisor's Stable since; nothing is refreshed or reloaded while it
	// is down.
	ReasonSidecarFailing = "SidecarFailing"
)

// Problem is one thing the sidecar could not make memcached do.
type Problem struct {
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// Message says what failed, with memcached's reply when it gave one.
	Message string `json:"message"`
}

// Report is what the sidecar serves at ReportPath: its problems now, none
// when memcached serves what is mounted and the worker runs.
type Report struct {
	Problems []Problem `json:"problems"`
	// Worker is the state of the worker, from a sidecar that runs its work
	// under a Supervisor; nil from the worker itself.
	Worker *WorkerState `json:"worker,omitempty"`
}

// WorkerState is what a Supervisor tells of its worker, for people and
// tests: the operator reads only the problems.
type WorkerState struct {
	// Running says whether the worker runs now.
	Running bool `json:"running"`
	// Restarts counts the worker's restarts since the sidecar started.
	Restarts int `json:"restarts"`
	// LastExit says how the worker last exited, with the message it left;
	// empty before its first exit.
	LastExit string `json:"lastExit,omitempty"`
}

// problemSource is a part of the sidecar that may have a problem of
// reason: problem returns "" while it has none.
type problemSource struct {
	reason  string
	problem func() string
}

// ReportHandler serves the Report of refresher's and reloader's problems;
// either may be nil, when the pod has no TLS or no auth.
func ReportHandler(refresher *Refresher, reloader *AuthReloader) http.Handler {
	var sources []problemSource
	if refresher != nil {
		sources = append(sources, problemSource{ReasonCertificateRefreshFailed, refresher.Problem})
	}
	if reloader != nil {
		sources = append(sources, problemSource{ReasonAuthReloadFailed, reloader.Problem})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := Report{Problems: []Problem{}}
		for _, s := range sources {
			if p := s.problem(); p != "" {
				r.Problems = append(r.Problems, Problem{Reason: s.reason, Message: p})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r) // a client that went away gets nothing
	})
}

// FetchReport GETs the Report served at url: the operator's poll asks each
// sidecar for it, and the supervisor its worker.
func FetchReport(ctx context.Context, client *http.Client, url string) (Report, error) {
	var r Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return r, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("GET %s: %v", url, err)
	}
	return r, nil
}
