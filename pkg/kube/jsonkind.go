package kube

import (
	"fmt"
	"io"

	jsoniter "github.com/json-iterator/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The kinds that travel as JSON are decoded here in one pass each, by
// json-iterator straight into the kind's type, as apimachinery's own JSON
// serializer decodes: client-go 1.11's watch decoder reads each event three
// times before its object (the framer, the serializer's search for the
// kind, the event), and the dynamic client decodes the object into maps,
// which the Deployments' cache then converted to their type by reflection.
// The Deployments' events were most of the operator's CPU (test/README,
// "Where the operator's CPU goes").

// jsonAPI decodes JSON case-sensitively, as apimachinery's serializer does.
// Its decoders refuse a document nested deeper than 10,000 levels, before
// any recursion could exhaust the stack (see TestDeepJSONIsRefused).
var jsonAPI = jsoniter.Config{EscapeHTML: true, SortMapKeys: true, CaseSensitive: true}.Froze()

// cachedFunc returns the cache's copy of a kind's object, trimmed, or nil.
type cachedFunc func(namespace, name string) Object

// decodeJSON returns the object of k whose JSON the API server sent as raw,
// decoded into k's type, with what k.Observe derives from raw and from the
// cache's copy of the object, which cached returns (cached may be nil).
func (k *Kind) decodeJSON(raw []byte, cached cachedFunc) (Object, error) {
	o := k.New()
	if err := jsonAPI.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("failed to decode %s: %v", k, err)
	}
	if k.Observe != nil {
		var previous Object
		if cached != nil {
			previous = cached(o.GetNamespace(), o.GetName())
		}
		if err := k.Observe(raw, previous, o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// jsonListPage is how many objects one page of a JSON kind's list holds, as
// client-go's pager pages by default.
const jsonListPage = 500

// jsonListWatch returns the list and watch functions of the cache of k, a
// kind that travels as JSON, in namespace, through client, whose parameter
// codec is codec: each object decoded by k.decodeJSON, with the cache's
// copies that cached returns.
func jsonListWatch(client rest.Interface, codec runtime.ParameterCodec, k *Kind, namespace string, cached cachedFunc) (listFunc, watchFunc) {
	list := func(o metav1.ListOptions) (runtime.Object, error) {
		// Page by page, each object trimmed before the next page comes, so
		// that a starting replica's list holds one page of JSON at a time,
		// not every object's: the pages of one list are one snapshot, that
		// of the first page's resourceVersion.
		o.Limit = jsonListPage
		var items []runtime.Object
		var version string
		for {
			body, err := client.Get().NamespaceIfScoped(namespace, namespace != "").Resource(k.Resource.Resource).
				VersionedParams(&o, codec).Do().Raw()
			if err != nil {
				return nil, err
			}
			var page struct {
				Metadata metav1.ListMeta       `json:"metadata"`
				Items    []jsoniter.RawMessage `json:"items"`
			}
			if err := jsonAPI.Unmarshal(body, &page); err != nil {
				return nil, fmt.Errorf("failed to decode the list of %s: %v", k, err)
			}
			if version == "" {
				version = page.Metadata.ResourceVersion
			}
			for _, raw := range page.Items {
				obj, err := k.decodeJSON(raw, cached)
				if err != nil {
					return nil, err
				}
				if k.Trim != nil {
					k.Trim(obj)
				}
				items = append(items, obj)
			}
			if o.Continue = page.Metadata.Continue; o.Continue == "" {
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
		o.Watch = true
		body, err := client.Get().NamespaceIfScoped(namespace, namespace != "").Resource(k.Resource.Resource).
			VersionedParams(&o, codec).Stream()
		if err != nil {
			return nil, err
		}
		return watch.NewStreamWatcher(&jsonEvents{kind: k, body: body, events: jsonAPI.NewDecoder(body), cached: cached}), nil
	}
	return list, watchFn
}

// jsonEvents decodes a JSON watch stream of one kind's events, a watch.Decoder.
type jsonEvents struct {
	kind   *Kind
	body   io.ReadCloser
	events *jsoniter.Decoder
	cached cachedFunc
}

// Decode returns the next event. An object that does not decode comes as an
// error event, upon which the cache lists again, as after an error that
// the API server sends; a stream that breaks ends the watch, which the
// cache then opens again.
func (d *jsonEvents) Decode() (watch.EventType, runtime.Object, error) {
	var e struct {
		Type   watch.EventType     `json:"type"`
		Object jsoniter.RawMessage `json:"object"`
	}
	// More reads past the newline that ends an event: the end of the
	// stream, and a stream that breaks, end the watch.
	if !d.events.More() {
		return "", nil, io.EOF
	}
	if err := d.events.Decode(&e); err != nil {
		return "", nil, err
	}
	switch e.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.kind.decodeJSON(e.Object, d.cached)
		if err != nil {
			return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}, nil
		}
		return e.Type, obj, nil
	case watch.Error:
		status := &metav1.Status{}
		if err := jsonAPI.Unmarshal(e.Object, status); err != nil {
			return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("failed to decode an error of the %s watch: %v", d.kind, err)}, nil
		}
		return watch.Error, status, nil
	default:
		return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("the %s watch sent an event of unknown type %q", d.kind, e.Type)}, nil
	}
}

// Close closes the stream.
func (d *jsonEvents) Close() {
	d.body.Close()
}
