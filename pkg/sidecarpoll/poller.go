// Package sidecarpoll asks the sidecar of every memcached pod for its report
// (pkg/sidecar's Report): what it could not make memcached do, such as load
// a certificate or a -Y file that changed in the mounted Secret. memcached
// keeps serving with what it has then, so the kubelet sees nothing wrong.
//
// # Why the operator polls
//
// The operator may not read the pods' Secrets (it has no Secret RBAC), and
// the memcached pods have no API token, so a sidecar cannot write anything
// to the API server. What a container can show without one, its state,
// would cost the cache: a sidecar that failed its readiness probe, or exited
// to leave a termination message, would make the pod not Ready and take a
// serving memcached out of its Service. That holds for the sidecar's own
// failures too: its container runs a supervisor that stays up and restarts
// the worker doing the work (pkg/sidecar.Supervisor), and reports a worker
// that exited as SidecarFailing, while the container runs and the pod stays
// Ready. So the operator, which reaches pod
// IPs as any client in the cluster does, GETs
// http://<pod IP>:9150/status (sidecar.ReportPort, sidecar.ReportPath) of
// every pod whose sidecar runs among those its pods function names (the
// operator's names the pods of served Memcacheds alone, see
// stub.Handler.PolledPods), every interval, a few at a time; when a
// pod's report changes it queues the pod's Memcached, whose reconcile reads
// the last reports (Problems) into its Degraded condition. Only pods with a
// sidecar are asked, those of Memcacheds with TLS, auth or monitoring, and
// a report costs the API server nothing.
//
// A sidecar the operator cannot reach, as while the pod starts, when a
// NetworkPolicy keeps the operator out, or a pod of an operator version
// whose sidecar served no report, tells nothing new: its last report
// stands, and before the first there is none. One that answers with no
// report, too large, malformed or too slow, has that for its problem
// (ReasonReportInvalid); at most sidecar.MaxReportBytes of an answer is
// read, within the timeout, and what is kept of a report is bounded too
// (sidecar.DecodeReport). The reports live in memory
// only, as observations like the informers' caches: a new leader asks
// again within one interval.
package sidecarpoll

import (
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultInterval is how often every sidecar is asked unless
// --sidecar-poll-interval says otherwise: with the kubelet's default sync of
// a Secret volume (up to 90 s) and the sidecar's own second, a failure that
// a Secret's change brings shows on the Memcached within 2 minutes.
const DefaultInterval = 20 * time.Second

// parallel is how many sidecars are asked at once, so that a round over
// thousands of pods, some of which do not answer before timeout, still
// fits an interval.
const parallel = 8

// timeout bounds one request: a sidecar on the pod network answers at once.
const timeout = 3 * time.Second

// maxHeaderBytes bounds the header of a sidecar's answer, which fits in a
// few hundred bytes; Go's client takes 10 MiB by default.
const maxHeaderBytes = 16 << 10

// ReasonReportInvalid is the reason of the problem that stands for a pod's
// report when its sidecar answered with no report: one larger than
// sidecar.MaxReportBytes, one that is not a report within its bounds, or
// one that did not come whole within the timeout. Whatever answers at the
// sidecar's port of a pod of the Memcached, such as a pod that a tenant
// made to pass for one, shows on that Memcached's status, with what was
// wrong, and nowhere else.
const ReasonReportInvalid = "SidecarReportInvalid"

// Poller asks the sidecars, and keeps their last reports that hold a
// problem.
type Poller struct {
	pods     func() []*corev1.Pod
	changed  func(namespace, name string)
	get      func(ctx context.Context, url string) (sidecar.Report, error)
	interval time.Duration
	log      logrus.FieldLogger

	mu sync.Mutex
	// reports are the last reports with a problem, by pod UID.
	reports map[types.UID]podReport
}

// podReport is a pod's last report.
type podReport struct {
	pod      string
	problems []sidecar.Problem
}

// New returns a Poller that asks the sidecars of the pods that pods
// returns, every interval, and calls changed with the
// namespace and Memcached name of a pod whose report changed.
func New(pods func() []*corev1.Pod, changed func(namespace, name string), interval time.Duration, log logrus.FieldLogger) *Poller {
	client := &http.Client{
		Timeout: timeout,
		// Pod IPs are reached directly, never through a proxy of the
		// operator's environment.
		Transport: &http.Transport{
			DialContext:            (&net.Dialer{Timeout: timeout}).DialContext,
			MaxResponseHeaderBytes: maxHeaderBytes,
			ResponseHeaderTimeout:  timeout,
			MaxIdleConns:           2 * parallel,
			IdleConnTimeout:        90 * time.Second,
		},
	}
	return &Poller{
		pods:    pods,
		changed: changed,
		get: func(ctx context.Context, url string) (sidecar.Report, error) {
			return sidecar.FetchReport(ctx, client, url)
		},
		interval: interval,
		log:      log,
		reports:  map[types.UID]podReport{},
	}
}

// Run asks every interval until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll asks every running sidecar once, and forgets the reports of pods
// that are gone.
func (p *Poller) Poll(ctx context.Context) {
	pods := p.pods()
	live := make(map[types.UID]bool, len(pods))
	var asked []*corev1.Pod
	for _, pod := range pods {
		live[pod.UID] = true
		if sidecarRuns(pod) {
			asked = append(asked, pod)
		}
	}
	p.mu.Lock()
	for uid := range p.reports {
		if !live[uid] {
			// Its Memcached is reconciled for the pod's deletion anyway.
			delete(p.reports, uid)
		}
	}
	p.mu.Unlock()

	next := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pod := range next {
				p.ask(ctx, pod)
			}
		}()
	}
	for _, pod := range asked {
		next <- pod
	}
	close(next)
	wg.Wait()
}

// ask asks pod's sidecar and, when its problems changed, keeps them and
// calls changed.
func (p *Poller) ask(ctx context.Context, pod *corev1.Pod) {
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(sidecar.ReportPort)) + sidecar.ReportPath
	r, err := p.get(ctx, url)
	switch {
	case errors.Is(err, sidecar.ErrReportTooLarge), errors.Is(err, sidecar.ErrReportInvalid), errors.Is(err, sidecar.ErrReportIncomplete):
		r = sidecar.Report{Problems: []sidecar.Problem{{Reason: ReasonReportInvalid, Message: err.Error()}}}
	case err != nil:
		p.log.Debugf("no report from the sidecar of pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	p.mu.Lock()
	old := p.reports[pod.UID].problems
	same := reflect.DeepEqual(old, r.Problems) || len(old) == 0 && len(r.Problems) == 0
	if !same {
		if len(r.Problems) == 0 {
			delete(p.reports, pod.UID)
		} else {
			p.reports[pod.UID] = podReport{pod: pod.Name, problems: r.Problems}
		}
	}
	p.mu.Unlock()
	if !same {
		p.changed(pod.Namespace, pod.Labels[memcached.CRLabel])
	}
}

// Problems returns the problems that the sidecars of pods last reported,
// sorted by pod name.
func (p *Poller) Problems(pods []*corev1.Pod) []memcached.SidecarProblem {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []memcached.SidecarProblem
	for _, pod := range pods {
		for _, pr := range p.reports[pod.UID].problems {
			out = append(out, memcached.SidecarProblem{Pod: pod.Name, Reason: pr.Reason, Message: pr.Message})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

// sidecarRuns reports whether pod has an IP and a sidecar container that
// neither waits nor has terminated, as the trimmed pod cache keeps its
// state, and is not being deleted.
func sidecarRuns(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == memcached.SidecarName {
			return s.State.Waiting == nil && s.State.Terminated == nil
		}
	}
	return false
}
