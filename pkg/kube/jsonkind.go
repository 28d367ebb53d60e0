package kube

import (
	"bufio"
	"bytes"
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
// Decoding the Deployments was the largest part of the operator's CPU (test/README,
// "Where the operator's CPU and memory go").

// jsonAPI decodes JSON case-sensitively, as apimachinery's serializer does.
// Its decoders refuse a document nested deeper than 10,000 levels, before
// any recursion could exhaust the stack (see TestDeepJSONIsRefusedBeforeTheRecursion).
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

// jsonListWatch returns the list and watch functions of the cache of k, a
// kind that travels as JSON, in namespace, through client, whose parameter
// codec is codec: each object decoded by k.decodeJSON, with the cache's
// copies that cached returns. The list is one page of what o asks for (see
// trimmedListWatch).
func jsonListWatch(client rest.Interface, codec runtime.ParameterCodec, k *Kind, namespace string, cached cachedFunc) (listFunc, watchFunc) {
	list := func(o metav1.ListOptions) (runtime.Object, error) {
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
		items := make([]runtime.Object, 0, len(page.Items))
		for _, raw := range page.Items {
			obj, err := k.decodeJSON(raw, cached)
			if err != nil {
				return nil, err
			}
			items = append(items, obj)
		}
		l := k.NewList()
		if err := meta.SetList(l, items); err != nil {
			return nil, err
		}
		accessor, err := meta.ListAccessor(l)
		if err != nil {
			return nil, err
		}
		accessor.SetResourceVersion(page.Metadata.ResourceVersion)
		accessor.SetContinue(page.Metadata.Continue)
		return l, nil
	}
	watchFn := func(o metav1.ListOptions) (watch.Interface, error) {
		o.Watch = true
		body, err := client.Get().NamespaceIfScoped(namespace, namespace != "").Resource(k.Resource.Resource).
			VersionedParams(&o, codec).Stream()
		if err != nil {
			return nil, err
		}
		return watch.NewStreamWatcher(&jsonEvents{kind: k, body: body, stream: bufio.NewReader(body), cached: cached}), nil
	}
	return list, watchFn
}

// jsonEvents decodes a JSON watch stream of one kind's events, a
// watch.Decoder.
type jsonEvents struct {
	kind   *Kind
	body   io.ReadCloser
	stream *bufio.Reader
	cached cachedFunc
	// frame is the buffer of the event being read, kept for the next one
	// up to maxKeptFrame.
	frame []byte
}

// maxKeptFrame bounds the buffer that a watch keeps between events: an
// object that a tenant made large, up to the API server's limit of about
// 1.5 MiB, costs its buffer once, not for the life of the watch.
const maxKeptFrame = 64 << 10

// Decode returns the next event. An object that does not decode comes as an
// error event, upon which the cache lists again, as after an error that
// the API server sends; a stream that ends or breaks ends the watch, which
// the cache then opens again.
func (d *jsonEvents) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := nextJSONValue(d.stream, d.frame[:0])
	if err != nil {
		return "", nil, err
	}
	if d.frame = frame; cap(frame) > maxKeptFrame {
		d.frame = nil
	}
	eventType, object, err := splitEvent(frame)
	if err != nil {
		return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("failed to decode an event of the %s watch: %v", d.kind, err)}, nil
	}
	switch eventType {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.kind.decodeJSON(object, d.cached)
		if err != nil {
			return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}, nil
		}
		return eventType, obj, nil
	case watch.Error:
		status := &metav1.Status{}
		if err := jsonAPI.Unmarshal(object, status); err != nil {
			return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("failed to decode an error of the %s watch: %v", d.kind, err)}, nil
		}
		return watch.Error, status, nil
	default:
		return watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("the %s watch sent an event of unknown type %q", d.kind, eventType)}, nil
	}
}

// Close closes the stream.
func (d *jsonEvents) Close() {
	d.body.Close()
}

// valueScanner follows a JSON object or array byte by byte, as far as
// framing needs: its brackets, outside strings.
type valueScanner struct {
	depth             int
	inString, escaped bool
}

// step takes the next byte c of the value and reports whether c closed it.
func (s *valueScanner) step(c byte) bool {
	switch {
	case s.escaped:
		s.escaped = false
	case s.inString:
		switch c {
		case '\\':
			s.escaped = true
		case '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
	case c == '}' || c == ']':
		s.depth--
		return s.depth == 0
	}
	return false
}

// nextJSONValue appends to buf the next JSON object or array of r, and
// returns it: the bytes up to the bracket that closes the first one, outside
// strings, as the API server writes one event after the other. It checks
// nothing else, which the decoding of the value does. It scans what r has
// buffered, a chunk at a time.
func nextJSONValue(r *bufio.Reader, buf []byte) ([]byte, error) {
	var s valueScanner
	for {
		if _, err := r.Peek(1); err != nil {
			if err == io.EOF && s.depth > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		chunk, _ := r.Peek(r.Buffered())
		start := 0
		for i, c := range chunk {
			if s.depth == 0 && c != '{' && c != '[' {
				if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
					start = i + 1
					continue
				}
				r.Discard(i)
				return buf, fmt.Errorf("unexpected %q between the events of a watch", c)
			}
			if s.step(c) {
				buf = append(buf, chunk[start:i+1]...)
				_, err := r.Discard(i + 1)
				return buf, err
			}
		}
		buf = append(buf, chunk[start:]...)
		if _, err := r.Discard(len(chunk)); err != nil {
			return buf, err
		}
	}
}

// eventPrefix and objectKey are how the API server writes a watch event:
// its type, then its object.
const (
	eventPrefix = `{"type":"`
	objectKey   = `","object":`
)

// splitEvent returns the type of the watch event frame and its object, as
// JSON: cut from the frame when the frame is laid out as the API server
// writes it, its object running to the frame's last brace, and otherwise
// decoded.
func splitEvent(frame []byte) (watch.EventType, []byte, error) {
	if bytes.HasPrefix(frame, []byte(eventPrefix)) && frame[len(frame)-1] == '}' {
		rest := frame[len(eventPrefix):]
		if end := bytes.Index(rest, []byte(objectKey)); end > 0 && !bytes.ContainsAny(rest[:end], `"\\`) {
			object := rest[end+len(objectKey) : len(rest)-1]
			if n := jsonValueLength(object); n == len(object) {
				return watch.EventType(rest[:end]), object, nil
			}
		}
	}
	var e struct {
		Type   watch.EventType     `json:"type"`
		Object jsoniter.RawMessage `json:"object"`
	}
	if err := jsonAPI.Unmarshal(frame, &e); err != nil {
		return "", nil, err
	}
	return e.Type, e.Object, nil
}

// jsonValueLength returns the length of the JSON object or array that b
// starts with, as nextJSONValue frames it, or -1 when b does not start with
// a whole one.
func jsonValueLength(b []byte) int {
	var s valueScanner
	for i, c := range b {
		if s.depth == 0 && c != '{' && c != '[' {
			return -1
		}
		if s.step(c) {
			return i + 1
		}
	}
	return -1
}
