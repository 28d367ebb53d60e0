package stub

import (
	"fmt"
	"strings"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// children are the steps of the checklist that come after the Deployment's,
// in order (see ensureChildren). A new child is one line here and a file
// that declares it.
var children = []child{serviceChild, pdbChild, networkPolicyChild, serviceMonitorChild, prometheusRuleChild, discoveryChild}

// child is one step of the checklist: one kind of a Memcached's children.
type child interface {
	// ensure makes m's child what m asks for, and reports the failure.
	ensure(h *Handler, m *v1alpha1.Memcached) *failure
	// apiKind is the kind the client reads and writes.
	apiKind() *kube.Kind
}

// Kinds returns the kinds of every child of a Memcached, the Deployment
// first, which the client given to NewHandler must serve (see
// kube.NewCachedClient).
func Kinds() []*kube.Kind {
	kinds := []*kube.Kind{kube.DeploymentKind}
	for _, c := range children {
		kinds = append(kinds, c.apiKind())
	}
	return kinds
}

// ownedChild is a child of type T, named after its Memcached and controlled
// by it, that the operator creates from a pure builder and restores,
// field by field, when someone changed what it sets, its labels included.
// Its fields are all that tell one such child from another.
type ownedChild[T kube.Object] struct {
	// childKind names the child in messages and the reasons of its failures.
	childKind
	// api is the kind the client reads and writes.
	api *kube.Kind
	// wanted, if set, reports whether m should have the child now; when it
	// says no, the child is left alone, or deleted while removeUnwanted, if
	// set, reports that m may still have one worth looking for (each look
	// at an Optional kind is a request to the API server).
	wanted         func(m *v1alpha1.Memcached) bool
	removeUnwanted func(m *v1alpha1.Memcached) bool
	// want builds the child m asks for, from m and, for a child such as the
	// discovery ConfigMap that lists m's pods, from what the handler's
	// client shows.
	want func(h *Handler, m *v1alpha1.Memcached) (T, error)
	// holds reports whether got has what want sets; restore returns the
	// JSON patch values that make it so (see memcached.JSONPatchSet).
	holds   func(got, want T) bool
	restore func(got, want T) map[string]interface{}
	// replace, if set, says why got cannot be restored in place, or "": it
	// is deleted, and its deletion brings the reconcile that creates it
	// anew.
	replace func(got T) string
	// beforeRestore, if set, runs before got is restored and may stop it.
	beforeRestore func(h *Handler, m *v1alpha1.Memcached, got T) *failure
	// restoreFailed is the message of a failed restore, formatted with the
	// child's namespace, name and the error.
	restoreFailed string
	// wrote, if set, is told the child that a create or a restore wrote.
	wrote func(h *Handler, m *v1alpha1.Memcached, written T)
	// created, restored and deleted are the Normal Events recorded when
	// the operator creates, restores or deletes the child; a zero one
	// records nothing.
	created, restored, deleted event
}

// event is a Normal Event on a Memcached: its reason, and its message
// formatted with the child's name.
type event struct {
	reason, message string
}

// record records e, if it has a reason, on m about the child name.
func (e event) record(h *Handler, m *v1alpha1.Memcached, name string) {
	if e.reason != "" {
		h.recorder.Eventf(m, corev1.EventTypeNormal, e.reason, e.message, name)
	}
}

func (c *ownedChild[T]) apiKind() *kube.Kind { return c.api }

// ensure makes sure that m has its child while wanted, that the child is
// m's own, and that it holds what want sets, restoring it when someone
// changed it. An Optional kind's child is ensured only while its API is
// served; without it nothing fails.
func (c *ownedChild[T]) ensure(h *Handler, m *v1alpha1.Memcached) *failure {
	if c.wanted != nil && !c.wanted(m) {
		if c.removeUnwanted != nil && c.removeUnwanted(m) {
			return c.remove(h, m)
		}
		return nil
	}
	if c.api.Optional && !h.client.Served(c.api) {
		return nil
	}
	want, err := c.want(h, m)
	if err != nil {
		return newFailure(c.createFailed, "failed to build %s %s/%s: %v", c.kind, m.Namespace, m.Name, err)
	}
	objects := typed[T]{h.client, c.api}
	gone := false
	got, created, f := ensureExists(m, c.childKind, objects.get, objects.read, func() (T, error) {
		manifest, err := memcached.ToManifest(want)
		if err != nil {
			var zero T
			return zero, err
		}
		o, err := objects.create(manifest)
		gone = c.api.Optional && apierrors.IsNotFound(err)
		return o, err
	})
	if gone {
		// The API went after discovery last said it was served: no error,
		// and the client asks discovery again on the next call.
		return nil
	}
	if f != nil {
		return f
	}
	if created {
		if c.wrote != nil {
			c.wrote(h, m, want)
		}
		c.created.record(h, m, m.Name)
		return nil
	}
	if !metav1.IsControlledBy(got, m) {
		return notOwned(m, c.childKind, got)
	}
	if c.replace != nil {
		if why := c.replace(got); why != "" {
			if err := h.client.Delete(c.api, got.GetNamespace(), got.GetName(), got.GetUID()); err != nil && !isGone(err) {
				return newFailure(c.updateFailed, "failed to delete %s %s/%s, %s: %w", c.kind, got.GetNamespace(), got.GetName(), why, err)
			}
			return nil
		}
	}
	holds := c.holds(got, want)
	labels := restoredLabels(got, want)
	setPath, setValue := setLabelsAnnotation(got, want)
	if holds && labels == nil && setPath == "" {
		return nil
	}
	values := map[string]interface{}{}
	if !holds {
		if c.beforeRestore != nil {
			if f := c.beforeRestore(h, m, got); f != nil {
				return f
			}
		}
		values = c.restore(got, want)
	}
	if labels != nil {
		values["/metadata/labels"] = labels
	}
	if setPath != "" {
		values[setPath] = setValue
	}
	patch, err := memcached.JSONPatchSet(got.GetUID(), values)
	if err == nil {
		err = h.client.Patch(c.api, got.GetNamespace(), got.GetName(), got.GetUID(), patch)
	}
	if err != nil {
		return newFailure(c.updateFailed, c.restoreFailed, got.GetNamespace(), got.GetName(), err)
	}
	if !holds {
		if c.wrote != nil {
			c.wrote(h, m, want)
		}
		c.restored.record(h, m, got.GetName())
	}
	if labels != nil && c.restored.reason != "" {
		h.recorder.Eventf(m, corev1.EventTypeNormal, c.restored.reason, "Restored the labels of %s %s", c.kind, got.GetName())
	}
	return nil
}

// restoredLabels returns got's labels with want's put back, when someone
// removed or changed one of those the operator sets, and without those that
// got's memcached.SetLabelsAnnotation lists and want's no longer does, or
// nil when none of that changes them. Labels that others added stay.
// Without its app label a child drops out of the operator's cache, which
// selects on it, and each reconcile then finds it through the create that
// fails; this puts it back.
func restoredLabels(got, want metav1.Object) map[string]string {
	have := got.GetLabels()
	var out map[string]string
	set := func(k string) {
		if out == nil {
			out = make(map[string]string, len(have)+len(want.GetLabels()))
			for hk, hv := range have {
				out[hk] = hv
			}
		}
		if v, ok := want.GetLabels()[k]; ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	for k, v := range want.GetLabels() {
		if have[k] != v {
			set(k)
		}
	}
	for _, k := range memcached.SetLabels(got) {
		if _, wanted := want.GetLabels()[k]; !wanted {
			if _, ok := have[k]; ok {
				set(k)
			}
		}
	}
	return out
}

// setLabelsAnnotation returns the JSON patch path and value that give got
// want's memcached.SetLabelsAnnotation (a nil value removes it), or "" when
// got has it already.
func setLabelsAnnotation(got, want metav1.Object) (string, interface{}) {
	g, hasG := got.GetAnnotations()[memcached.SetLabelsAnnotation]
	w, hasW := want.GetAnnotations()[memcached.SetLabelsAnnotation]
	path := "/metadata/annotations/" + strings.ReplaceAll(memcached.SetLabelsAnnotation, "/", "~1")
	switch {
	case hasW && got.GetAnnotations() == nil:
		// A JSON patch adds no member to a map that is not there.
		return "/metadata/annotations", map[string]string{memcached.SetLabelsAnnotation: w}
	case hasW && g != w:
		return path, w
	case !hasW && hasG:
		return path, nil
	}
	return "", nil
}

// remove deletes m's own child, if it has one and its API is served. A
// child of that name that is not m's is left alone: it is not in the way.
func (c *ownedChild[T]) remove(h *Handler, m *v1alpha1.Memcached) *failure {
	if c.api.Optional && !h.client.Served(c.api) {
		return nil
	}
	got, err := typed[T]{h.client, c.api}.get(m.Namespace, m.Name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return newFailure(c.readFailed, "failed to get %s %s/%s: %v", c.kind, m.Namespace, m.Name, err)
	}
	if !metav1.IsControlledBy(got, m) || got.GetDeletionTimestamp() != nil {
		return nil
	}
	if err := h.client.Delete(c.api, got.GetNamespace(), got.GetName(), got.GetUID()); err != nil {
		if isGone(err) {
			return nil
		}
		return newFailure(c.deleteFailed, "failed to delete %s %s/%s: %w", c.kind, got.GetNamespace(), got.GetName(), err)
	}
	c.deleted.record(h, m, got.GetName())
	return nil
}

// typed reads and creates the objects of one kind through Client as T, the
// type of the kind's objects.
type typed[T kube.Object] struct {
	client Client
	kind   *kube.Kind
}

func (t typed[T]) get(namespace, name string) (T, error) {
	return as[T](t.client.Get(t.kind, namespace, name))
}

func (t typed[T]) read(namespace, name string) (T, error) {
	return as[T](t.client.Read(t.kind, namespace, name))
}

func (t typed[T]) create(manifest *unstructured.Unstructured) (T, error) {
	return as[T](t.client.Create(t.kind, manifest))
}

// as returns o as T, with err; an o of another type is an error.
func as[T kube.Object](o kube.Object, err error) (T, error) {
	t, ok := o.(T)
	if err == nil && !ok {
		return t, fmt.Errorf("got a %T, want a %T", o, t)
	}
	return t, err
}
