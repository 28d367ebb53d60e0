package stub

import (
	"errors"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ReasonDeploymentCreated is the reason of the Normal Event recorded when
	// the operator creates a Memcached's Deployment.
	ReasonDeploymentCreated = "DeploymentCreated"
	// ReasonDeploymentScaled is the reason of the Normal Event recorded when
	// the operator changes the Deployment's replicas to spec.size.
	ReasonDeploymentScaled = "DeploymentScaled"
)

// errStale reports that a write was refused because the object changed
// after the reconcile read it, typically because a cache had not yet seen the
// operator's own previous write. Such a reconcile is simply run again.
var errStale = errors.New("the memcached changed since it was read")

// reconcile drives m's Deployment and status toward m.Spec. Every step reads
// the current state and writes only what differs, so running it again, after
// an error or a restart, is always safe.
func (h *Handler) reconcile(m *v1alpha1.Memcached) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.DeletionTimestamp != nil {
		// The garbage collector is removing m's children; recreating them would fight it.
		return nil
	}
	d, err := h.ensureDeployment(m)
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(d, m) {
		return h.reportNotOwned(m, d)
	}
	if err := h.ensureSize(m, d); err != nil {
		return err
	}
	return h.updateStatus(m)
}

// ensureDeployment returns the Deployment named after m, creating it first
// when there is none.
func (h *Handler) ensureDeployment(m *v1alpha1.Memcached) (*appsv1.Deployment, error) {
	d, err := h.client.GetDeployment(m.Namespace, m.Name)
	if err == nil {
		return d, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to get deployment %s/%s: %v", m.Namespace, m.Name, err)
	}
	manifest, err := deploymentManifest(newDeploymentForMemcached(m, h.image))
	if err != nil {
		return nil, err
	}
	err = h.client.CreateDeployment(manifest)
	if apierrors.IsAlreadyExists(err) {
		// Created since the read above, by a concurrent reconcile or by
		// someone else: read it back and decide on what is really there.
		return h.getDeployment(m)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to create deployment %s/%s: %v", m.Namespace, m.Name, err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentCreated, "Created deployment %s with %d replicas", m.Name, m.Spec.Size)
	return h.getDeployment(m)
}

// getDeployment reads the Deployment named after m.
func (h *Handler) getDeployment(m *v1alpha1.Memcached) (*appsv1.Deployment, error) {
	d, err := h.client.GetDeployment(m.Namespace, m.Name)
	if err != nil {
		return nil, fmt.Errorf("failed to get deployment %s/%s: %v", m.Namespace, m.Name, err)
	}
	return d, nil
}

// ensureSize sets the Deployment's replicas to spec.size when they differ.
func (h *Handler) ensureSize(m *v1alpha1.Memcached, d *appsv1.Deployment) error {
	if d.Spec.Replicas != nil && *d.Spec.Replicas == m.Spec.Size {
		return nil
	}
	if err := h.client.ScaleDeployment(d.Namespace, d.Name, m.Spec.Size); err != nil {
		return fmt.Errorf("failed to scale deployment %s/%s to %d: %v", d.Namespace, d.Name, m.Spec.Size, err)
	}
	h.recorder.Eventf(m, corev1.EventTypeNormal, ReasonDeploymentScaled, "Scaled deployment %s to %d replicas", d.Name, m.Spec.Size)
	return nil
}

// reportNotOwned leaves d alone, because it belongs to someone else, and
// makes that visible: a Warning Event, a status that lists no pods (none of
// them are m's) with Degraded and Available conditions saying so, and an
// error, so the SDK retries in case the owner removes it.
func (h *Handler) reportNotOwned(m *v1alpha1.Memcached, d *appsv1.Deployment) error {
	msg := fmt.Sprintf("deployment %s/%s already exists and is not controlled by memcached %s", d.Namespace, d.Name, m.Name)
	h.recorder.Event(m, corev1.EventTypeWarning, ReasonDeploymentNotOwned, msg)
	if err := h.writeStatus(m, notOwnedStatus(m, msg, h.now())); err != nil {
		return err
	}
	return errors.New(msg)
}

// updateStatus writes the status computed from m's pods, readiness and
// failures included, when it differs from the stored one.
func (h *Handler) updateStatus(m *v1alpha1.Memcached) error {
	pods, err := h.client.ListPods(m.Namespace, selectorForMemcached(m.Name))
	if err != nil {
		return fmt.Errorf("failed to list pods of memcached %s/%s: %v", m.Namespace, m.Name, err)
	}
	return h.writeStatus(m, computeStatus(m, pods, h.now()))
}

// writeStatus stores status on m through the status subresource, unless m
// already has it.
func (h *Handler) writeStatus(m *v1alpha1.Memcached, status v1alpha1.MemcachedStatus) error {
	if equality.Semantic.DeepEqual(m.Status, status) {
		return nil
	}
	updated := m.DeepCopy()
	updated.Status = status
	err := h.client.UpdateMemcachedStatus(updated)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("failed to update status of memcached %s/%s: %w", m.Namespace, m.Name, errStale)
	}
	if err != nil {
		return fmt.Errorf("failed to update status of memcached %s/%s: %v", m.Namespace, m.Name, err)
	}
	return nil
}
