package memcached

import (
	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	// SpecHashAnnotation, on the Deployment's pod template, holds a hash of
	// what of the Memcached's spec reaches the template (see SpecHash), of
	// the spec that the template was built from. When the template differs from the desired one but the spec does
	// not differ from the recorded one, the difference is the operator's.
	// It is set after the template is hashed, so that it never rolls pods by
	// itself.
	SpecHashAnnotation = "cache.example.com/spec-hash"
	// PacedRollAnnotation, on the Deployment's pod template, marks a
	// template set by a paced roll. Such a Deployment holds a roll slot for
	// as long as a live pod of another template is left.
	PacedRollAnnotation = "cache.example.com/paced-roll"

	// ReasonRollPending is the reason of a Progressing condition that is
	// True while the operator's pod template changed for the Memcached and
	// it waits for a slot among --max-concurrent-rolls.
	ReasonRollPending = "RollPending"
)

// SpecHash is a short hash of what of m's spec reaches the pod template
// (see templateSpec). A spec edit that changes nothing of the template
// must change nothing of the hash: the template step writes nothing for
// it, so the hash recorded on the template (SpecHashAnnotation) stays the
// one of the spec before the edit, and a hash that moved would make the
// operator's next change of the template, a new default image under
// --maintenance-window, look like the user's, and roll at once, outside
// the window and the pacing; a roll of the operator's that waits would
// start at the edit. A spec without any field that templateSpec drops
// or normalises hashes as it did before.
func SpecHash(m *v1alpha1.Memcached) (string, error) {
	return shortHash(templateSpec(m))
}

// legacySpecHash is SpecHash as operator versions before templateSpec
// computed it: the spec without spec.size and spec.maintenanceWindow, nor
// spec.networkPolicy, which those versions did not know, and so never
// decoded or hashed. Their Deployments keep that record until the template next changes,
// since rewriting it would roll their pods; OperatorChanged accepts it, so
// that the upgrade itself is no spec change. The two agree on every spec
// that holds nothing templateSpec drops or normalises, so such a record
// also stays good through the template-neutral edits after the upgrade.
func legacySpecHash(m *v1alpha1.Memcached) (string, error) {
	spec := m.Spec.DeepCopy()
	spec.Size = 0
	spec.MaintenanceWindow = nil
	spec.NetworkPolicy = nil
	return shortHash(spec)
}

// templateSpec returns a copy of m's spec reduced to what the pod template
// depends on, the operator's own inputs (its default and sidecar images,
// its release) aside. It is a spec, not the template: the template of the
// same spec changes with each operator release, and the record must tell
// such a change from the user's across the upgrade. Every field of the
// spec is kept, dropped or normalised here, as
// TestSpecHashFollowsThePodTemplate checks field by field:
//   - spec.size, which the Deployment's replicas carry,
//     spec.maintenanceWindow, which says when the operator rolls, and
//     spec.networkPolicy, which shapes a NetworkPolicy that selects the
//     pods by their labels, are dropped;
//   - spec.monitoring reaches the template only through enabled: its
//     labels and prometheusRule shape the ServiceMonitor and the
//     PrometheusRule, and a block that is off is no block;
//   - spec.discovery that is off is none;
//   - spec.tls.clientCertificates None is the default, "";
//   - spec.memoryMB equal to what the memory limit derives is none, and
//     spec.resources whose JSON is the default's, which the template holds
//     as JSON, is none.
//
// Only edits whose templates are identical collapse here: one that merges
// two specs of different templates would make the user's change wait as
// the operator's.
func templateSpec(m *v1alpha1.Memcached) *v1alpha1.MemcachedSpec {
	spec := m.Spec.DeepCopy()
	spec.Size = 0
	spec.MaintenanceWindow = nil
	spec.NetworkPolicy = nil
	spec.Monitoring, spec.Discovery = nil, nil
	if Monitored(m) {
		spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	}
	if Discovered(m) {
		spec.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true}
	}
	if spec.TLS != nil && spec.TLS.ClientCertificates == v1alpha1.ClientCertificatesNone {
		spec.TLS.ClientCertificates = ""
	}
	if spec.MemoryMB != nil {
		derived := &v1alpha1.Memcached{Spec: v1alpha1.MemcachedSpec{Resources: spec.Resources}}
		if *spec.MemoryMB == cacheMB(derived) {
			spec.MemoryMB = nil
		}
	}
	if spec.Resources != nil && equalJSON(*spec.Resources, memcachedResources(&v1alpha1.Memcached{})) {
		spec.Resources = nil
	}
	return spec
}

// OperatorChanged reports whether d's pod template, which differs from the
// one m asks for, differs because of the operator rather than m's spec: the
// template records the spec it was built from and m's spec is still that
// one, as SpecHash, or, for a record of an earlier operator version, as
// legacySpecHash, sees it. A template of an operator version that recorded
// no spec counts as the operator's when the status shows that the operator
// has seen m's current generation, since it then applied it already.
func OperatorChanged(m *v1alpha1.Memcached, d *appsv1.Deployment) bool {
	recorded, ok := d.Spec.Template.Annotations[SpecHashAnnotation]
	if !ok {
		return m.Status.ObservedGeneration == m.Generation
	}
	if current, err := SpecHash(m); err == nil && recorded == current {
		return true
	}
	legacy, err := legacySpecHash(m)
	return err == nil && recorded == legacy
}

// PacedRollInFlight reports whether d holds a roll slot: its template was
// set by a paced roll, its controller has not said that the roll is over
// (RolloutComplete), and a live pod of another template is left among pods.
// The controller's word wins over the pods: anyone who may create pods in
// the namespace can make pods that look like d's, with its labels and a
// ReplicaSet of its name, and keep the slot held forever; the Deployment
// controller counts only the pods of the ReplicaSets that d controls.
func PacedRollInFlight(d *appsv1.Deployment, pods []*corev1.Pod) bool {
	if d.Spec.Template.Annotations[PacedRollAnnotation] == "" || RolloutComplete(d) {
		return false
	}
	for _, p := range livePods(pods) {
		if isOutdated(p, TemplateOf(d)) {
			return true
		}
	}
	return false
}

// RolloutComplete reports whether d's controller says that every pod of d
// runs its current template: it has observed d's generation and all the
// pods it counts are updated ones, as `kubectl rollout status` decides.
// A Deployment whose controller has not observed it yet says nothing.
func RolloutComplete(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration > 0 && s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == s.Replicas
}

// WithPacedRoll returns a copy of manifest whose pod template carries
// PacedRollAnnotation.
func WithPacedRoll(manifest *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u := manifest.DeepCopy()
	err := unstructured.SetNestedField(u.Object, "true", "spec", "template", "metadata", "annotations", PacedRollAnnotation)
	return u, err
}

// WithRecordOf returns a copy of manifest whose pod template has the record
// annotations (SpecHashAnnotation, PacedRollAnnotation) of annotations, a
// live template's, and no others.
func WithRecordOf(manifest *unstructured.Unstructured, annotations map[string]string) (*unstructured.Unstructured, error) {
	u := manifest.DeepCopy()
	for _, a := range recordAnnotations {
		path := []string{"spec", "template", "metadata", "annotations", a}
		v, ok := annotations[a]
		if !ok {
			unstructured.RemoveNestedField(u.Object, path...)
			continue
		}
		if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// RecordSpec sets SpecHashAnnotation for m on manifest's pod template.
func RecordSpec(manifest *unstructured.Unstructured, m *v1alpha1.Memcached) error {
	hash, err := SpecHash(m)
	if err != nil {
		return err
	}
	return unstructured.SetNestedField(manifest.Object, hash, "spec", "template", "metadata", "annotations", SpecHashAnnotation)
}

// RollAnnotations returns the annotations of a pod template that the
// reconcile reads: the template hash and the roll's record, or nil
// without any of them.
func RollAnnotations(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{TemplateHashAnnotation, SpecHashAnnotation, PacedRollAnnotation} {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
