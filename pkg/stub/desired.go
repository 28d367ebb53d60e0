package stub

import (
	"sync"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// desiredDeployment is the Deployment a Memcached asks for, as one reconcile
// needs it: the hash of its pod template on every reconcile, the manifest
// only for a create or a roll. Building the manifest was the largest pure
// CPU cost of a reconcile in the profile at 1,000 resources, and most
// reconciles, those that pods' changes bring, need only the hash.
type desiredDeployment struct {
	m            *v1alpha1.Memcached
	image        string
	sidecarImage string
	hash         string
	// digest is memcached.DesiredDigest of the manifest: what the
	// Deployment's memcached.ObservedDigestAnnotation says while nobody
	// changed what the operator applied.
	digest   string
	manifest *unstructured.Unstructured
	// pendingHash, pending and pendingReason are set while the Deployment
	// keeps its template, pendingHash, because the roll to hash waits for
	// a slot (see rolls.go) or the maintenance window (see window.go):
	// pending says why, pendingReason is the Progressing reason that says
	// for what.
	pendingHash   string
	pending       string
	pendingReason string
	// restoring is set when the reconcile put back what someone changed
	// of the Deployment; it says what, for the Progressing condition.
	restoring string
}

// statusHash returns the template hash the status counts pods of an older
// template against: the Deployment's own while its roll waits, else the
// desired one; "" for a nil d.
func (d *desiredDeployment) statusHash() string {
	switch {
	case d == nil:
		return ""
	case d.pending != "":
		return d.pendingHash
	}
	return d.hash
}

// rollPending returns why the roll to d waits and the reason, or "".
func (d *desiredDeployment) rollPending() (message, reason string) {
	if d == nil {
		return "", ""
	}
	return d.pending, d.pendingReason
}

// wait records that the Deployment keeps its template, from, because the
// roll to d waits, for reason, with message.
func (d *desiredDeployment) wait(from, reason, message string) {
	d.pendingHash, d.pendingReason, d.pending = from, reason, message
}

// restoringMessage returns what the reconcile put back of d, or "".
func (d *desiredDeployment) restoringMessage() string {
	if d == nil {
		return ""
	}
	return d.restoring
}

// desired returns m's desired Deployment, with its template hash and
// digest from h.templates when m's generation has not changed since they
// were computed.
func (h *Handler) desired(m *v1alpha1.Memcached) (*desiredDeployment, error) {
	d := &desiredDeployment{m: m, image: h.image, sidecarImage: h.sidecarImage}
	key := m.Namespace + "/" + m.Name
	if e, ok := h.templates.get(key, m.UID, m.Generation); ok {
		d.hash, d.digest = e.hash, e.digest
		return d, nil
	}
	if _, err := d.build(); err != nil {
		return nil, err
	}
	h.templates.put(key, templateHashEntry{uid: m.UID, generation: m.Generation, hash: d.hash, digest: d.digest})
	return d, nil
}

// build returns the manifest, building it on first use.
func (d *desiredDeployment) build() (*unstructured.Unstructured, error) {
	if d.manifest != nil {
		return d.manifest, nil
	}
	manifest, err := memcached.DeploymentManifest(memcached.NewDeployment(d.m, d.image, d.sidecarImage))
	if err == nil {
		err = memcached.RecordSpec(manifest, d.m)
	}
	if err != nil {
		return nil, err
	}
	digest, err := memcached.DesiredDigest(manifest.Object)
	if err != nil {
		return nil, err
	}
	d.manifest, d.hash, d.digest = manifest, memcached.ManifestTemplateHash(manifest), digest
	return manifest, nil
}

// templateHashes remembers the template hash and digest of each Memcached,
// by namespace/name, for the UID and generation they were computed from: the
// pod template depends only on the spec, which moves the generation, and
// on the handler's images, which never change. Safe for concurrent use.
type templateHashes struct {
	mu    sync.Mutex
	items map[string]templateHashEntry
}

type templateHashEntry struct {
	uid          types.UID
	generation   int64
	hash, digest string
}

func newTemplateHashes() *templateHashes {
	return &templateHashes{items: map[string]templateHashEntry{}}
}

func (t *templateHashes) get(key string, uid types.UID, generation int64) (templateHashEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.items[key]
	if !ok || e.uid != uid || e.generation != generation {
		return templateHashEntry{}, false
	}
	return e, true
}

func (t *templateHashes) put(key string, e templateHashEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.items[key] = e
}

func (t *templateHashes) delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.items, key)
}
