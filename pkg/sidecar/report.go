package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"unicode/utf8"
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

// The bounds of a Report that FetchReport accepts. Any pod can answer on a
// sidecar's IP and port, and the operator asks every sidecar: a reply is
// read only up to MaxReportBytes, and what it says goes into a Memcached's
// status within these bounds, so that no pod can take the operator's
// memory or fill the status. The sidecar itself sends one problem per
// reason, with messages of a few hundred bytes, far below them.
const (
	// MaxReportBytes bounds the body of a report.
	MaxReportBytes = 64 << 10
	// MaxReportProblems bounds the problems of a report: more, and the
	// report is no sidecar's (ErrReportInvalid); three reasons exist.
	MaxReportProblems = 8
	// MaxReportReasonBytes bounds a problem's reason, a CamelCase word
	// that becomes a condition's reason.
	MaxReportReasonBytes = 64
	// MaxReportMessageBytes bounds a problem's message, and the worker's
	// LastExit: a longer one is cut, ending in TruncatedMarker, since its
	// start says what failed, and a failure with a long reply from
	// memcached must still show.
	MaxReportMessageBytes = 1024
	// TruncatedMarker ends a message that FetchReport cut.
	TruncatedMarker = " [truncated]"
)

// ErrReportTooLarge is the error of a report whose body is larger than
// MaxReportBytes, which FetchReport did not read further; ErrReportInvalid
// that of a body that is no Report within the bounds above;
// ErrReportIncomplete that of a body whose reading failed, as when it did
// not come whole before the client's timeout. FetchReport's errors wrap
// them (errors.Is), after the URL: each says that the sidecar answered,
// and what it answered is no report.
var (
	ErrReportTooLarge   = fmt.Errorf("report larger than %d KiB", MaxReportBytes>>10)
	ErrReportInvalid    = errors.New("invalid report")
	ErrReportIncomplete = errors.New("incomplete report")
)

// FetchReport GETs the Report served at url: the operator's poll asks each
// sidecar for it, and the supervisor its worker. It reads at most
// MaxReportBytes of the body, and returns the Report that DecodeReport
// makes of it, or an error that says, in a bounded line that quotes little
// of the body, why there is none: the status of a reply that is not 200
// OK, ErrReportTooLarge, ErrReportInvalid or ErrReportIncomplete. A body it does not read to its
// end is not drained, so its connection closes rather than returning to
// the client's pool.
func FetchReport(ctx context.Context, client *http.Client, url string) (Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Report{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Report{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if resp.ContentLength > MaxReportBytes {
		return Report{}, fmt.Errorf("GET %s: %w", url, ErrReportTooLarge)
	}
	r, err := DecodeReport(resp.Body)
	if err != nil {
		return Report{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return r, nil
}

// reasonPattern is what a problem's reason must be: a CamelCase word, as
// a condition's reason is.
var reasonPattern = regexp.MustCompile("^[A-Z][A-Za-z0-9]*$")

// DecodeReport reads a Report from the first MaxReportBytes of body, and
// checks it against the bounds above: a larger body is ErrReportTooLarge,
// more than MaxReportProblems problems, or a reason that is not a CamelCase
// word of at most MaxReportReasonBytes, is ErrReportInvalid, and a message
// longer than MaxReportMessageBytes is cut. A reason that is none of the
// Reason constants stays, and the operator shows it as it shows those: a
// newer sidecar may have a reason that this operator does not know.
func DecodeReport(body io.Reader) (Report, error) {
	b, err := io.ReadAll(io.LimitReader(body, MaxReportBytes+1))
	if err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrReportIncomplete, err)
	}
	if len(b) > MaxReportBytes {
		return Report{}, ErrReportTooLarge
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrReportInvalid, err)
	}
	if len(r.Problems) > MaxReportProblems {
		return Report{}, fmt.Errorf("%w: %d problems, more than %d", ErrReportInvalid, len(r.Problems), MaxReportProblems)
	}
	for i := range r.Problems {
		p := &r.Problems[i]
		if len(p.Reason) > MaxReportReasonBytes || !reasonPattern.MatchString(p.Reason) {
			return Report{}, fmt.Errorf("%w: problem %d's reason %q is not a CamelCase word of at most %d bytes",
				ErrReportInvalid, i+1, truncate(p.Reason, MaxReportReasonBytes), MaxReportReasonBytes)
		}
		p.Message = truncate(p.Message, MaxReportMessageBytes)
	}
	if r.Worker != nil {
		r.Worker.LastExit = truncate(r.Worker.LastExit, MaxReportMessageBytes)
	}
	return r, nil
}

// truncate returns s if it has at most max bytes, or else its start, cut
// between two runes, and TruncatedMarker, in max bytes.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(TruncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncatedMarker
}
