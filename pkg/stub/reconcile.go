package stub

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// ReasonDeploymentScaled is the reason of the Normal Event recorded when
	// the operator changes the Deployment's replicas to spec.size.
	ReasonDeploymentScaled = "DeploymentScaled"
	// ReasonDeploymentUpdated is the reason of the Normal Event recorded when
	// the operator sets the Deployment's pod template to the one the spec
	// asks for.
	ReasonDeploymentUpdated = "DeploymentUpdated"
	// ReasonDeploymentRestored is the reason of the Normal Event recorded
	// when the operator puts back what someone changed of the labels, pod
	// template or strategy it set on the Deployment.
	ReasonDeploymentRestored = "DeploymentRestored"
	// ReasonSecurityRestored is the reason of the Warning Event recorded
	// when the operator puts back the pod spec of a Deployment whose pod
	// template someone loosened (see memcached.LooserSecurity): a Warning,
	// unlike DeploymentRestored, because the pods ran, or were about to
	// run, with less confinement than the operator gives them, which
	// whoever watches a namespace's Warnings should hear of.
	ReasonSecurityRestored = "SecurityRestored"
	// ReasonReconcilePanicked is the reason of the Warning Event recorded
	// when a reconcile panicked; it is retried with backoff.
	ReasonReconcilePanicked = "ReconcilePanicked"
)

// errStale reports that a write was refused because the object changed
// after the reconcile read it, typically because a cache had not yet seen the
// operator's own previous write. Such a reconcile is simply run again.
var errStale = errors.New("the memcached changed since it was read")

// reconcile drives m's children and status toward m.Spec. Every step reads
// the current state and writes only what differs, so running it again, after
// an error or a restart, is always safe. A step that fails is reported on m
// (see updateStatus) and returned, and the caller retries with backoff.
//
// A panic in a step costs that reconcile, not the process: it is recovered,
// logged with its stack, recorded as a Warning Event, and returned as an
// error that wraps ErrPanicked, so that m is retried with backoff like any
// failure (TestAPanicCostsOneReconcile).
func (h *Handler) reconcile(m *v1alpha1.Memcached) error {
	start := time.Now()
	err := h.recoveredSteps(m)
	if h.observe != nil {
		h.observe(time.Since(start), err)
	}
	return err
}

// ErrPanicked is wrapped by the error of a reconcile that panicked.
var ErrPanicked = errors.New("the reconcile panicked")

// recoveredSteps runs reconcileSteps and turns a panic into an error.
func (h *Handler) recoveredSteps(m *v1alpha1.Memcached) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		// The stack is only here; the error that goes up says what panicked.
		logrus.Errorf("reconcile of memcached %s/%s panicked: %v\n%s", m.Namespace, m.Name, r, debug.Stack())
		err = fmt.Errorf("%w: %v", ErrPanicked, r)
		h.recorder.Event(m, corev1.EventTypeWarning, ReasonReconcilePanicked, err.Error())
	}()
	return h.reconcileSteps(m)
}

// reconcileSteps runs the steps of reconcile.
func (h *Handler) reconcileSteps(m *v1alpha1.Memcached) error {
	if m.DeletionTimestamp != nil {
		// The garbage collector is removing m's children; recreating them would fight it.
		return nil
	}
	if err := memcached.ValidateSpec(m); err != nil {
		return h.updateStatus(m, nil, nil, false, newFailure(memcached.ReasonInvalidSpec, "%v", err))
	}
	if err := h.policy.Check(m); err != nil {
		return h.updateStatus(m, nil, nil, false, newFailure(memcached.ReasonPolicyViolation, "%v", err))
	}
	want, err := h.desired(m)
	if err != nil {
		return h.updateStatus(m, nil, nil, false, newFailure(memcached.ReasonDeploymentCreateFailed, "%v", err))
	}
	d, created, applied, f := h.ensureChildren(m, want)
	if f != nil && (errors.Is(f, kube.ErrReplaced) || errors.Is(f, kube.ErrChanged) || errors.Is(f, ErrWritesStopped)) {
		// Nothing failed: a child was replaced or changed within the cache's lag, or
		// this process may not write now (see GateWrites). The reconcile
		// runs again, with backoff, and acts on the new child once the
		// cache shows it, or once it may write.
		return f
	}
	if created && f == nil {
		// The new pods take a moment to appear. Their own changes bring the
		// reconcile that reports them, batched; this one only makes sure a
		// reconcile comes even if none of them does.
		key := m.Namespace + "/" + m.Name
		h.progress.started(key)
		h.enqueueBatched(key)
		return nil
	}
	return h.updateStatus(m, want, d, applied, f)
}

// ensureChildren makes sure that m's Deployment, as want, exists, is
// m's own and runs spec.size replicas of the current pod template, then
// ensures m's other children, in order (see children): its Service, with
// more than one pod its PodDisruptionBudget, and with monitoring its
// ServiceMonitor and PrometheusRule where that API is served.
// It returns the Deployment as it found it, if any, reports whether it
// created it and whether the Deployment now runs m's spec, its size and pod
// template (the operator acted on m's generation; see
// memcached.Observation.Behind), and returns the step that failed, or nil.
// The steps stop at the first failure: a Deployment that is not m's, in
// particular, gets no Service that would route to its pods.
func (h *Handler) ensureChildren(m *v1alpha1.Memcached, want *desiredDeployment) (d *appsv1.Deployment, created, applied bool, f *failure) {
	deployments := typed[*appsv1.Deployment]{h.client, kube.DeploymentKind}
	d, created, f = ensureExists(m, deploymentChild, deployments.get, deployments.read,
		func() (*appsv1.Deployment, error) {
			manifest, err := want.build()
			if err != nil {
				return nil, err
			}
			return as[*appsv1.Deployment](h.client.ApplyNew(kube.DeploymentKind, manifest))
		})
	if f != nil {
		return nil, false, false, f
	}
	if created || !metav1.IsControlledBy(d, m) {
		h.observeRoll(m.Namespace+"/"+m.Name, d)
	}
	if !created {
		if !metav1.IsControlledBy(d, m) {
			// Someone else's: leave it alone, and retry in case its owner
			// removes it.
			return d, false, false, notOwned(m, deploymentChild, d)
		}
		if f := h.ensureSize(m, d); f != nil {
			return d, false, false, f
		}
		if f := h.ensurePodTemplate(m, d, want); f != nil {
			return d, false, false, f
		}
		if f := h.ensureProgressDeadline(d); f != nil {
			return d, false, true, f
		}
	}
	for _, c := range children {
		if f := c.ensure(h, m); f != nil {
			return d, created, true, f
		}
	}
	return d, created, true, nil
}

// ensureSize sets the Deployment's replicas to spec.size when they differ.
func (h *Handler) ensureSize(m *v1alpha1.Memcached, d *appsv1.Deployment) *failure {
	if d.Spec.Replicas != nil && *d.Spec.Replicas == m.Spec.Size {
		return nil
	}
	if err := h.client.ScaleDeployment(d.Namespace, d.Name, d.UID, m.Spec.Size); err != nil {
		return newFailure(memcached.ReasonDeploymentScaleFailed, "failed to scale deployment %s/%s to %d: %w", d.Namespace, d.Name, m.Spec.Size, err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentScaled, "Scaled deployment %s to %d replicas", d.Name, m.Spec.Size)
	return nil
}

// ensurePodTemplate sets the Deployment's labels, pod template and
// strategy to want's when the template's hash differs, which rolls the pods
// one at a time (see memcached.NewDeployment). A Deployment of an operator
// version that did not annotate its template gets the current one too.
// When the hash is want's, what someone changed of what the operator set is
// put back (see restoreDeployment).
//
// A difference that m's spec did not cause, but the operator's default
// image or version did, waits for m's maintenance window, if it has one
// (see window.go), then for a roll slot (see rolls.go): until it gets
// one, want records why, for the Progressing condition, and m is queued
// for the window's opening, or for its close while it waits for a slot
// inside it. A template that someone loosened (see memcached.Loosened) is
// no such difference, whatever its record says: its pod spec is put back
// at once (see putBackPodSpec), with the operator's new template.
func (h *Handler) ensurePodTemplate(m *v1alpha1.Memcached, d *appsv1.Deployment, want *desiredDeployment) *failure {
	key := m.Namespace + "/" + m.Name
	h.observeRoll(key, d)
	h.releaseStaleGrant(key, want.hash)
	if memcached.TemplateOf(d) == want.hash {
		h.rollNotWaiting(key)
		return h.restoreDeployment(m, d, want)
	}
	loosened := memcached.Loosened(d)
	paced := loosened == nil && memcached.OperatorChanged(m, d)
	if paced {
		w := h.windowAt(m)
		if w.closed() {
			h.rollNotWaiting(key)
			h.work().AddAfter(key, w.until.Sub(w.now))
			want.wait(memcached.TemplateOf(d), memcached.ReasonWaitingForMaintenanceWindow, w.waitMessage())
			return nil
		}
		ok, pending := h.acquireRoll(key, want.hash)
		if !ok {
			if w.has {
				// Once the window closes, the status says that the roll
				// waits for the next one, not for a slot.
				h.work().AddAfter(key, w.until.Sub(w.now))
			}
			want.wait(memcached.TemplateOf(d), memcached.ReasonRollPending, pending)
			return nil
		}
	} else {
		h.rollNotWaiting(key)
	}
	manifest, err := want.build()
	if err == nil && paced {
		manifest, err = memcached.WithPacedRoll(manifest)
	}
	if err == nil && loosened != nil {
		err = h.putBackPodSpec(d, manifest, loosened)
	}
	if err == nil {
		err = h.client.Apply(kube.DeploymentKind, manifest, d.UID)
	}
	if err != nil {
		if paced {
			h.releaseRoll(key)
		}
		return newFailure(memcached.ReasonDeploymentUpdateFailed, "failed to update the pod template of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	if loosened != nil {
		h.securityRestored(m, d, want, loosened)
	}
	if paced {
		h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentUpdated, "Updated the pod template of deployment %s (template %s) to the operator's new one, in a paced roll (--max-concurrent-rolls), rolling its pods one at a time", d.Name, want.hash)
		return nil
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentUpdated, "Updated the pod template of deployment %s (template %s), rolling its pods one at a time", d.Name, want.hash)
	// A spec change that took over a paced roll frees its slot once the
	// cache shows the patch, which queues m again (see observeRoll).
	return nil
}

// restoreDeployment puts back what someone changed or removed of the
// labels, pod template and strategy that the operator applied to d, whose
// template hash is want's: the API server's record of the fields the
// operator set no longer holds what it applied (see memcached.OwnedDigest
// and memcached.ObservedDigestAnnotation). Fields that others added and the
// operator does not set stay. The pod template's record annotations are
// d's, so that a template that still runs what the spec asks for is not
// changed, and rolls no pod; an edit that changed what the pods run did
// roll them, and its restore rolls them back, one at a time. A Deployment
// that an operator version without server-side apply created has no
// record: what that version set becomes the apply's first (see
// memcached.ConvertUpdates), so that the apply owns it, and later removes
// what the spec no longer asks for.
//
// What others added stays, unless it loosens the pods' security (see
// memcached.Loosened): then the pod spec is put back whole first (see
// putBackPodSpec), even when the operator's fields all hold what it
// applied, and the apply follows only when they did not, since the patch
// changes nothing that the operator's apply owns and that still holds its
// value.
func (h *Handler) restoreDeployment(m *v1alpha1.Memcached, d *appsv1.Deployment, want *desiredDeployment) *failure {
	digest := d.Annotations[memcached.ObservedDigestAnnotation]
	loosened := memcached.Loosened(d)
	if digest == want.digest && loosened == nil {
		return nil
	}
	var err error
	if digest == "" {
		err = h.client.ConvertUpdates(kube.DeploymentKind, d.Namespace, d.Name, d.UID)
	}
	var manifest *unstructured.Unstructured
	if err == nil {
		manifest, err = want.build()
	}
	if err == nil {
		manifest, err = memcached.WithRecordOf(manifest, d.Spec.Template.Annotations)
	}
	if err == nil && loosened != nil {
		err = h.putBackPodSpec(d, manifest, loosened)
	}
	if err == nil && digest != want.digest {
		err = h.client.Apply(kube.DeploymentKind, manifest, d.UID)
	}
	if err != nil {
		return newFailure(memcached.ReasonDeploymentUpdateFailed, "failed to restore deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	if loosened != nil {
		h.securityRestored(m, d, want, loosened)
		return nil
	}
	want.restoring = fmt.Sprintf("restored the labels, pod template and strategy of deployment %s, which someone changed", d.Name)
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentRestored, "Restored the labels, pod template and strategy of deployment %s to the operator's, which someone changed", d.Name)
	return nil
}

// putBackPodSpec makes d's pod spec manifest's, d's pod template having
// the findings loosened (see memcached.PutBackPodSpec): a server-side apply
// would leave what others added, and this is a hand edit being put back,
// so it happens at once, never in the maintenance window, and rolls the
// pods once, as the edit did.
func (h *Handler) putBackPodSpec(d *appsv1.Deployment, manifest *unstructured.Unstructured, loosened []string) error {
	patch, err := memcached.PutBackPodSpec(d, manifest.Object, loosened)
	if err != nil {
		return err
	}
	return h.client.Patch(kube.DeploymentKind, d.Namespace, d.Name, d.UID, patch)
}

// securityRestored records that the reconcile put back d's pod spec, which
// someone loosened where loosened says: a Warning Event, and want's
// restoring message for the Progressing condition.
func (h *Handler) securityRestored(m *v1alpha1.Memcached, d *appsv1.Deployment, want *desiredDeployment, loosened []string) {
	what := memcached.LoosenedSummary(loosened)
	want.restoring = fmt.Sprintf("put back the pod spec of deployment %s, which someone loosened (%s)", d.Name, what)
	h.recorder.Eventf(m, corev1.EventTypeWarning, ReasonSecurityRestored, "Put back the operator's pod spec of deployment %s, which someone loosened: %s", d.Name, what)
}

// ensureProgressDeadline sets the Deployment's progressDeadlineSeconds to
// memcached.ProgressDeadlineSeconds when it differs, as on Deployments that an
// operator version without it created, where the API server defaulted it
// to 600. It rolls no pod and needs no Event: only the Deployment
// controller's deadline changes.
func (h *Handler) ensureProgressDeadline(d *appsv1.Deployment) *failure {
	if s := d.Spec.ProgressDeadlineSeconds; s != nil && *s == memcached.ProgressDeadlineSeconds {
		return nil
	}
	patch, err := memcached.JSONPatchSet(d.UID, map[string]interface{}{"/spec/progressDeadlineSeconds": memcached.ProgressDeadlineSeconds})
	if err == nil {
		err = h.client.Patch(kube.DeploymentKind, d.Namespace, d.Name, d.UID, patch)
	}
	if err != nil {
		return newFailure(memcached.ReasonDeploymentUpdateFailed, "failed to set the progress deadline of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// updateStatus writes the status that m's pods and Service, want (the desired
// Deployment, nil when the reconcile stopped before it; see
// memcached.Observation), d (m's Deployment as the reconcile found it, or nil),
// applied (whether the Deployment runs m's spec; see ensureChildren) and f, the
// failed step or nil, call for, when it differs from the stored one, and
// returns f, or the write's error.
//
// A failure is recorded as a Warning Event only when the stored Degraded
// condition does not already report it, so a step that keeps failing the same
// way on every retry leaves one Event, and the condition shows it persists.
// When the status cannot be written, Events are all that is left: the
// failure and the write's error are recorded on every attempt, and client-go's
// event correlator folds the repeats into one Event each, with a count.
func (h *Handler) updateStatus(m *v1alpha1.Memcached, want *desiredDeployment, d *appsv1.Deployment, applied bool, f *failure) error {
	status, f, warn := h.desiredStatus(m, want, d, applied, f)
	status.DiscoveryVersion = h.discoveryVersion(m)
	err := h.writeStatus(m, status)
	switch {
	case errors.Is(err, errStale), errors.Is(err, ErrWritesStopped):
		// The reconcile runs again on the newer Memcached, whose status
		// tells whether the failure is already reported.
		return err
	case err != nil:
		h.recorder.Event(m, corev1.EventTypeWarning, memcached.ReasonStatusUpdateFailed, err.Error())
		if f == nil {
			return err
		}
		h.recorder.Event(m, corev1.EventTypeWarning, f.reason, f.Error())
		return fmt.Errorf("%v; %v", f, err)
	case f == nil:
		// A sidecar's problem is no failed step, nothing to retry: the
		// next report that changes brings the next reconcile.
		if warn != nil && !reported(m.Status, warn) {
			h.recorder.Event(m, corev1.EventTypeWarning, warn.reason, warn.Error())
		}
		return nil
	}
	if !reported(m.Status, f) {
		h.recorder.Event(m, corev1.EventTypeWarning, f.reason, f.Error())
	}
	return f
}

// desiredStatus returns the status m should have after the steps before it,
// with want, d, applied and f as updateStatus has them; the failure to
// report, which is f or, when the pods cannot be listed, that; and, without
// one, the sidecar's problem that the status's Degraded condition reports,
// if it reports one, for its Warning Event.
//
// Until the Deployment runs m's spec, the status reports the rollout of
// what it runs instead, for the generation the operator last acted on
// (see memcached.Observation.Behind): a refused spec never reads as one
// whose roll is complete.
func (h *Handler) desiredStatus(m *v1alpha1.Memcached, want *desiredDeployment, d *appsv1.Deployment, applied bool, f *failure) (status v1alpha1.MemcachedStatus, failed, warn *failure) {
	now := h.now()
	if f != nil && f.reason == memcached.ReasonDeploymentNotOwned {
		// None of the pods with m's labels are m's.
		return memcached.NotOwnedStatus(m, f.Error(), now), f, nil
	}
	pods, err := h.client.ListPods(m.Namespace, m.Name)
	pods = memcached.OwnPods(m.Name, pods)
	if err != nil {
		if f == nil {
			f = newFailure(memcached.ReasonPodListFailed, "failed to list pods of memcached %s/%s: %v", m.Namespace, m.Name, err)
		}
		return memcached.UnobservedStatus(m, !applied, f.reason, f.Error(), now), f, nil
	}
	o := memcached.Observation{Pods: pods, TemplateHash: want.statusHash(), Restoring: want.restoringMessage(), ServiceName: h.serviceName(m), Behind: !applied}
	o.RollPending, o.RollPendingReason = want.rollPending()
	if want == nil {
		// The reconcile stopped before it looked for the Deployment: a
		// cache read. An error leaves d nil, as if m had none, which
		// leaves Progressing out and so claims no rollout.
		d, _ = typed[*appsv1.Deployment]{h.client, kube.DeploymentKind}.get(m.Namespace, m.Name)
	}
	if d != nil && metav1.IsControlledBy(d, m) {
		o.DeploymentConditions = d.Status.Conditions
		if !applied {
			o.Deployed = &memcached.Rollout{Size: replicas(d), TemplateHash: memcached.TemplateOf(d)}
		}
	}
	for _, p := range pods {
		if msg := h.client.MountFailure(p.Namespace, p.UID); msg != "" {
			if o.MountFailures == nil {
				o.MountFailures = map[types.UID]string{}
			}
			o.MountFailures[p.UID] = msg
		}
	}
	if h.sidecars != nil {
		o.SidecarProblems = h.sidecars.Problems(pods)
	}
	if f != nil {
		return memcached.FailedStatus(m, o, f.reason, f.Error(), now), f, nil
	}
	status = memcached.ComputeStatus(m, o, now)
	if reason, message, ok := memcached.SidecarFailure(o); ok {
		w := &failure{reason: reason, err: errors.New(message)}
		if reported(status, w) {
			warn = w
		}
	}
	return status, nil, warn
}

// replicas returns d's spec.replicas, which the API server defaults to 1.
func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// serviceName returns the name of m's own Service as the cache shows it,
// or "" when m has none.
func (h *Handler) serviceName(m *v1alpha1.Memcached) string {
	s, err := typed[*corev1.Service]{h.client, serviceChild.api}.get(m.Namespace, m.Name)
	if err != nil || !metav1.IsControlledBy(s, m) {
		return ""
	}
	return s.Name
}

// reported reports whether status already holds f as its Degraded condition.
func reported(status v1alpha1.MemcachedStatus, f *failure) bool {
	c := memcached.FindCondition(status.Conditions, v1alpha1.MemcachedDegraded)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == f.reason && c.Message == f.Error()
}

// writeStatus stores status on m through the status subresource, unless m
// already has it, or status only reports progress that must wait (see
// progressReports): then m is queued again for when it may be written.
func (h *Handler) writeStatus(m *v1alpha1.Memcached, status v1alpha1.MemcachedStatus) error {
	if equality.Semantic.DeepEqual(m.Status, status) {
		return nil
	}
	key := m.Namespace + "/" + m.Name
	if wait := h.progress.hold(key, m.Status, status); wait > 0 {
		h.work().AddAfter(key, wait)
		return nil
	}
	updated := m.DeepCopy()
	updated.Status = status
	stored, err := h.client.UpdateMemcachedStatus(updated)
	if err == nil {
		// The next reconcile starts from this version, not from the one the
		// SDK delivered before: a write based on that would conflict.
		h.memcacheds.update(key, m.ResourceVersion, stored)
		h.progress.wrote(key, status)
		return nil
	}
	if apierrors.IsNotFound(err) {
		// Deleted since it was read, as when many are deleted at once: no
		// status is left to write, and the garbage collector removes
		// whatever this reconcile created for it.
		return nil
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("failed to update status of memcached %s/%s: %w", m.Namespace, m.Name, errStale)
	}
	return fmt.Errorf("failed to update status of memcached %s/%s: %w", m.Namespace, m.Name, err)
}
