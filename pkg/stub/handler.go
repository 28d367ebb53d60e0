// Package stub holds the memcached-operator's event handler: for every
// Memcached it keeps a memcached Deployment of spec.size pods and lists
// those pods in status.nodes.
package stub

import (
	"context"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// DefaultImage is the memcached image of new Deployments unless
// --memcached-image or MEMCACHED_IMAGE say otherwise.
const DefaultImage = "memcached:1.6-alpine"

// Handler reconciles Memcached resources on the SDK's events. It is safe for
// concurrent use: it keeps no state between events, and conflicting writes
// from concurrent events fail on resourceVersion and are retried.
type Handler struct {
	client   Client
	recorder record.EventRecorder
	image    string
	now      func() metav1.Time
}

// NewHandler returns a Handler that talks to the API server through client,
// records Events with recorder and runs image in new memcached Deployments.
func NewHandler(client Client, recorder record.EventRecorder, image string) *Handler {
	return &Handler{client: client, recorder: recorder, image: image, now: metav1.Now}
}

// Handle reconciles the Memcached that an event concerns. main.go watches
// Memcached resources and, to react to drift and to pod changes, the
// Deployments and pods labelled app=memcached.
func (h *Handler) Handle(ctx context.Context, event sdk.Event) error {
	switch o := event.Object.(type) {
	case *v1alpha1.Memcached:
		if event.Deleted {
			// The Deployment has a controller owner reference to the
			// Memcached, so the garbage collector removes it and its pods.
			return nil
		}
		return h.reconcile(o)
	case *appsv1.Deployment:
		return h.reconcileOwner(o.Namespace, o.Labels)
	case *corev1.Pod:
		return h.reconcileOwner(o.Namespace, o.Labels)
	}
	return nil
}

// reconcileOwner reconciles the Memcached named by a child's memcached_cr
// label, after a change to that child, including its deletion.
func (h *Handler) reconcileOwner(namespace string, labels map[string]string) error {
	name := labels[crLabel]
	if name == "" {
		return nil
	}
	m, err := h.client.GetMemcached(namespace, name)
	if apierrors.IsNotFound(err) {
		// No Memcached of that name: nothing here is ours to manage.
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get memcached %s/%s: %v", namespace, name, err)
	}
	return h.reconcile(m)
}
