package kube

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	jsoniter "github.com/json-iterator/go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Object is a child kind's typed object, as the caches hold it and the
// client returns it, and as the handler's steps take it.
type Object interface {
	metav1.Object
	runtime.Object
}

// Kind describes one kind of a Memcached's children to CachedClient, which
// needs nothing else to cache, read and write it: a new kind of child is a
// Kind, declared beside the step that ensures it, and no code here.
//
// Its objects travel as protobuf when client-go's scheme knows its group
// version, and as JSON otherwise, decoded into New's type: a client-go 1.11
// struct whose JSON names the fields the operator uses, such as policy/v1
// PodDisruptionBudgets into policy/v1beta1's, or
// unstructured.Unstructured for an API that client-go 1.11 has no type for.
type Kind struct {
	// Resource is the kind's API resource, in the group version the
	// operator speaks.
	Resource schema.GroupVersionResource
	// New returns an empty object of the kind.
	New func() Object
	// NewList returns an empty list of the kind, for its cache; an
	// Optional kind has none.
	NewList func() runtime.Object
	// Trim, if set, drops from an object what the reconcile does not read,
	// before the cache stores it or the client returns what it created
	// (see TrimOf).
	Trim func(runtime.Object)
	// Changed, if set, reports whether an update of a cached object needs
	// its Memcached reconciled (see OnChildChange); without it every one
	// does.
	Changed func(old, obj interface{}) bool
	// Observe, if set, receives each object of the kind as the API server
	// sends it, as JSON, with the typed object decoded from it and the
	// cache's copy of the object, if the cache holds one, before Trim: it
	// keeps in the typed object what its Go type cannot hold, such as what
	// the Deployment's managed fields say (see memcached.OwnedDigest), and it
	// may carry over what it derived for the cached copy while the parts it
	// reads are unchanged. The kind's objects then travel as JSON.
	Observe func(raw []byte, cached, obj Object) error
	// Optional marks an API that may come and go, such as a
	// CustomResourceDefinition's: no cache watches it, Get reads the API
	// server, and Served says, as discovery saw it at most an interval ago
	// (see CheckServedEvery), whether it is served.
	Optional bool
}

// String names the kind's resource, as errors do.
func (k *Kind) String() string {
	gr := k.Resource.GroupResource()
	return gr.String()
}

// TrimOf returns trim as a Kind's Trim: it trims the objects of T's type
// and leaves others, such as the Status of a watch's error event, alone.
func TrimOf[T Object](trim func(T)) func(runtime.Object) {
	return func(obj runtime.Object) {
		if o, ok := obj.(T); ok {
			trim(o)
		}
	}
}

// DeploymentKind is the memcached Deployment, the child that the handler's
// checklist ensures first, with steps of its own (its size, its pod
// template, the fleet's rolls), and that ListDeployments and
// ScaleDeployment serve.
var DeploymentKind = &Kind{
	Resource: appsv1.SchemeGroupVersion.WithResource(memcached.DeploymentResource.Resource),
	New:      func() Object { return &appsv1.Deployment{} },
	NewList:  func() runtime.Object { return &appsv1.DeploymentList{} },
	Trim:     TrimOf(trimDeployment),
	Changed:  deploymentChanged,
	Observe:  observeDeployment,
}

// observeDeployment keeps memcached.OwnedDigest of the live Deployment raw
// in obj's memcached.ObservedDigestAnnotation, and memcached.LooserSecurity
// of its pod template, if any, in memcached.LoosenedAnnotation, both of which
// trimDeployment keeps, so that the reconcile can tell whether someone
// changed what the operator applied, or added what loosens the pods'
// security, without the cache holding pod templates.
//
// Both are functions of a few parts of raw (see deploymentInputs), whose
// fingerprint obj keeps in observedInputsAnnotation: when cached, the
// cache's copy, has the same fingerprint, both are carried over from it.
// Most of a Deployment's updates are its controller's writes of its status,
// which change none of the parts, and decoding and digesting the pod
// template was most of the cost of each.
func observeDeployment(raw []byte, cached, obj Object) error {
	var in deploymentInputs
	if err := jsonAPI.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("failed to decode deployment %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	fingerprint := in.fingerprint()
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[observedInputsAnnotation] = fingerprint
	delete(annotations, memcached.LoosenedAnnotation)
	if cached != nil && cached.GetAnnotations()[observedInputsAnnotation] == fingerprint {
		was := cached.GetAnnotations()
		annotations[memcached.ObservedDigestAnnotation] = was[memcached.ObservedDigestAnnotation]
		if loosened, ok := was[memcached.LoosenedAnnotation]; ok {
			annotations[memcached.LoosenedAnnotation] = loosened
		}
		obj.SetAnnotations(annotations)
		return nil
	}
	live, err := in.live()
	if err != nil {
		return fmt.Errorf("failed to decode deployment %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	digest, err := memcached.OwnedDigest(live)
	if err != nil {
		return fmt.Errorf("failed to digest deployment %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	annotations[memcached.ObservedDigestAnnotation] = digest
	template, _, _ := unstructured.NestedFieldNoCopy(live, "spec", "template")
	if t, ok := template.(map[string]interface{}); ok {
		if findings := memcached.LooserSecurity(t); findings != nil {
			annotations[memcached.LoosenedAnnotation] = memcached.LoosenedValue(findings)
		}
	}
	obj.SetAnnotations(annotations)
	return nil
}

// observedInputsAnnotation holds, on the cache's copy of a Deployment only,
// the fingerprint of the parts of the live Deployment that observeDeployment
// derived its annotations from.
const observedInputsAnnotation = "cache.example.com/observed-inputs"

// deploymentInputs are the parts of a live Deployment, as JSON, that
// memcached.OwnedDigest and memcached.LooserSecurity read: the labels, the
// strategy and the pod template (memcached's digest scope), and the field
// set of the operator's apply among the managed fields (see
// memcached.IsOwnApply), without the others, such as the Deployment
// controller's of the status, which grows with its first writes, and
// without its time, which moves on every apply.
type deploymentInputs struct {
	Metadata struct {
		Labels        jsoniter.RawMessage `json:"labels"`
		ManagedFields []struct {
			Manager     string              `json:"manager"`
			Operation   string              `json:"operation"`
			Subresource string              `json:"subresource"`
			FieldsV1    jsoniter.RawMessage `json:"fieldsV1"`
		} `json:"managedFields"`
	} `json:"metadata"`
	Spec struct {
		Strategy jsoniter.RawMessage `json:"strategy"`
		Template jsoniter.RawMessage `json:"template"`
	} `json:"spec"`
}

// fingerprint returns a hash of every part of in, each part length-prefixed
// so that no two different sets of parts run together the same.
func (in *deploymentInputs) fingerprint() string {
	h := sha256.New()
	part := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	part(in.Metadata.Labels)
	part(in.Spec.Strategy)
	part(in.Spec.Template)
	for _, e := range in.Metadata.ManagedFields {
		if memcached.IsOwnApply(e.Manager, e.Operation, e.Subresource) {
			part([]byte{1})
			part(e.FieldsV1)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// live returns the parts of in as the content of a Deployment, decoded as
// client-go decodes unstructured objects (integers as int64), with the
// operator's own apply alone among the managed fields.
func (in *deploymentInputs) live() (map[string]interface{}, error) {
	metadata, spec := map[string]interface{}{}, map[string]interface{}{}
	parts := []struct {
		raw  jsoniter.RawMessage
		in   map[string]interface{}
		name string
	}{
		{in.Metadata.Labels, metadata, "labels"},
		{in.Spec.Strategy, spec, "strategy"},
		{in.Spec.Template, spec, "template"},
	}
	for _, p := range parts {
		if m, err := jsonObject(p.raw); err != nil {
			return nil, err
		} else if m != nil {
			p.in[p.name] = m
		}
	}
	var entries []interface{}
	for _, e := range in.Metadata.ManagedFields {
		if !memcached.IsOwnApply(e.Manager, e.Operation, e.Subresource) {
			continue
		}
		entry := map[string]interface{}{"manager": e.Manager, "operation": e.Operation}
		fields, err := jsonObject(e.FieldsV1)
		if err != nil {
			return nil, err
		}
		if fields != nil {
			entry["fieldsV1"] = fields
		}
		entries = append(entries, entry)
	}
	if entries != nil {
		metadata["managedFields"] = entries
	}
	return map[string]interface{}{"metadata": metadata, "spec": spec}, nil
}

// jsonObject decodes raw, a JSON object or null, as client-go decodes
// unstructured objects (integers as int64); nil for null or nothing.
func jsonObject(raw jsoniter.RawMessage) (map[string]interface{}, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]interface{}
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// speaksJSON reports whether k's objects travel as JSON: those of a group
// version that client-go's scheme does not know, and those that Observe
// reads as the API server sent them.
func (k *Kind) speaksJSON() bool {
	return k.Observe != nil || !builtin(k.Resource.GroupVersion())
}

// builtin reports whether client-go 1.11's scheme knows gv, whose objects
// then travel as protobuf.
func builtin(gv schema.GroupVersion) bool {
	return scheme.Scheme.IsVersionRegistered(gv)
}

// jsonScheme returns the scheme that decodes the JSON kinds among kinds,
// and their API server's errors and list options: New's and NewList's types
// under the kind's group version, except unstructured ones, which the JSON
// decoder fills as they come.
func jsonScheme(kinds []*Kind) *runtime.Scheme {
	s := runtime.NewScheme()
	seen := map[schema.GroupVersion]bool{}
	for _, k := range kinds {
		gv := k.Resource.GroupVersion()
		if !k.speaksJSON() {
			continue
		}
		if _, ok := k.New().(*unstructured.Unstructured); !ok && k.NewList != nil {
			s.AddKnownTypes(gv, k.New(), k.NewList())
		}
		if !seen[gv] {
			seen[gv] = true
			metav1.AddToGroupVersion(s, gv)
		}
	}
	return s
}

// kindREST returns the REST client for k's group version from cfg, which
// speaks protobuf for built-in group versions (see NewClients), and the
// codec of its list options: protobuf and client-go's scheme where
// builtin, as client-go's typed clients have them, JSON and s where k
// speaks JSON (see speaksJSON).
func kindREST(cfg *rest.Config, k *Kind, s *runtime.Scheme) (rest.Interface, runtime.ParameterCodec, error) {
	gv := k.Resource.GroupVersion()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	codec := scheme.ParameterCodec
	if !k.speaksJSON() {
		cfg.NegotiatedSerializer = serializer.DirectCodecFactory{CodecFactory: scheme.Codecs}
	} else {
		if !builtin(gv) {
			// Only the clientset's group versions share its rate
			// limiter; a client of another API has one of its own.
			cfg.RateLimiter = nil
		}
		cfg.ContentType = runtime.ContentTypeJSON
		cfg.AcceptContentTypes = runtime.ContentTypeJSON
		cfg.NegotiatedSerializer = serializer.DirectCodecFactory{CodecFactory: serializer.NewCodecFactory(s)}
		codec = runtime.NewParameterCodec(s)
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create the %s client: %v", k, err)
	}
	return client, codec, nil
}
