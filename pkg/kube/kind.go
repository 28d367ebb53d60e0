package kube

import (
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
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
	// sends it, as JSON content, with the typed object decoded from it,
	// before Trim: it keeps in the typed object what its Go type cannot
	// hold, such as the Deployment's managed fields (see
	// memcached.OwnedDigest). The kind's objects then travel as JSON, and
	// its cache lists and watches them through client-go's dynamic client.
	Observe func(live map[string]interface{}, obj Object) error
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

// observeDeployment keeps memcached.OwnedDigest of live in obj's
// memcached.ObservedDigestAnnotation, and memcached.LooserSecurity of its pod
// template, if any, in memcached.LoosenedAnnotation, both of which
// trimDeployment keeps, so that the reconcile can tell whether someone
// changed what the operator applied, or added what loosens the pods'
// security, without the cache holding pod templates.
func observeDeployment(live map[string]interface{}, obj Object) error {
	digest, err := memcached.OwnedDigest(live)
	if err != nil {
		return fmt.Errorf("failed to digest deployment %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[memcached.ObservedDigestAnnotation] = digest
	delete(annotations, memcached.LoosenedAnnotation)
	template, _, _ := unstructured.NestedFieldNoCopy(live, "spec", "template")
	if t, ok := template.(map[string]interface{}); ok {
		if findings := memcached.LooserSecurity(t); findings != nil {
			annotations[memcached.LoosenedAnnotation] = memcached.LoosenedValue(findings)
		}
	}
	obj.SetAnnotations(annotations)
	return nil
}

// fromLive returns content, an object of k as the API server sent it, as
// k's typed object, with what k.Observe keeps of content.
func (k *Kind) fromLive(content map[string]interface{}) (Object, error) {
	o := k.New()
	if u, ok := o.(*unstructured.Unstructured); ok {
		u.Object = content
	} else if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, o); err != nil {
		return nil, fmt.Errorf("failed to decode %s: %v", k, err)
	}
	if k.Observe != nil {
		if err := k.Observe(content, o); err != nil {
			return nil, err
		}
	}
	return o, nil
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

// observedListPage is how many objects one page of an observed kind's list
// holds, as client-go's pager pages by default.
const observedListPage = 500

// observedListWatch returns the list and watch functions of the cache of
// k, a kind with Observe, in namespace: through client-go's dynamic client,
// which decodes the objects as the API server sent them, each then passed
// through Kind.fromLive.
func observedListWatch(cfg *rest.Config, k *Kind, namespace string) (func(metav1.ListOptions) (runtime.Object, error), func(metav1.ListOptions) (watch.Interface, error), error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create the %s client: %v", k, err)
	}
	objects := dyn.Resource(k.Resource).Namespace(namespace)
	list := func(o metav1.ListOptions) (runtime.Object, error) {
		// Page by page, each object trimmed before the next page comes,
		// so that a starting replica's list holds one page of decoded JSON at a
		// time, not every object's: the pages of one list are one snapshot,
		// that of the first page's resourceVersion.
		o.Limit = observedListPage
		var items []runtime.Object
		var version string
		for {
			ul, err := objects.List(o)
			if err != nil {
				return nil, err
			}
			if version == "" {
				version = ul.GetResourceVersion()
			}
			for i := range ul.Items {
				obj, err := k.fromLive(ul.Items[i].Object)
				if err != nil {
					return nil, err
				}
				if k.Trim != nil {
					k.Trim(obj)
				}
				items = append(items, obj)
			}
			if o.Continue = ul.GetContinue(); o.Continue == "" {
				break
			}
		}
		l := k.NewList()
		if err := meta.SetList(l, items); err != nil {
			return nil, err
		}
		accessor, err := meta.ListAccessor(l)
		if err != nil {
			return nil, err
		}
		accessor.SetResourceVersion(version)
		return l, nil
	}
	watchFn := func(o metav1.ListOptions) (watch.Interface, error) {
		w, err := objects.Watch(o)
		if err != nil {
			return nil, err
		}
		return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok || e.Type == watch.Error {
				return e, true
			}
			obj, err := k.fromLive(u.Object)
			if err != nil {
				// The reflector relists on an error event.
				return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}, true
			}
			e.Object = obj
			return e, true
		}), nil
	}
	return list, watchFn, nil
}
