package kube

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// liveFixtures are Deployments as the API server sent them: applied by the
// operator, then changed by others in the ways that its digest must see.
var liveFixtures = []string{"live-applied.json", "live-image-changed.json", "live-label-removed.json", "live-others-added.json", "live-sidecar-removed.json"}

// wholeObject returns what the Deployments' cache derived from live before
// it decoded the parts that observeDeployment reads alone: live converted
// to the typed object, and the digest and findings of the whole object.
func wholeObject(t *testing.T, live map[string]interface{}) (*appsv1.Deployment, string, string) {
	t.Helper()
	want := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live, want); err != nil {
		t.Fatal(err)
	}
	digest, err := memcached.OwnedDigest(live)
	if err != nil {
		t.Fatal(err)
	}
	template, _, _ := unstructured.NestedMap(live, "spec", "template")
	var loosened string
	if findings := memcached.LooserSecurity(template); findings != nil {
		loosened = memcached.LoosenedValue(findings)
	}
	return want, digest, loosened
}

// loosen adds a privileged container and the host's network to live's pod
// template.
func loosen(t *testing.T, live map[string]interface{}) {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(live, "spec", "template", "spec")
	spec["containers"] = append(spec["containers"].([]interface{}), map[string]interface{}{
		"name": "debug", "image": "busybox", "securityContext": map[string]interface{}{"privileged": true},
	})
	spec["hostNetwork"] = true
	if err := unstructured.SetNestedMap(live, spec, "spec", "template", "spec"); err != nil {
		t.Fatal(err)
	}
}

func marshal(t *testing.T, v interface{}) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeJSONAgreesWithTheWholeObject: one pass of json-iterator into
// the typed Deployment, and the digest and findings of the parts alone,
// give what decoding the whole object into maps gave, for every fixture,
// and for a template loosened by hand.
func TestDecodeJSONAgreesWithTheWholeObject(t *testing.T) {
	for _, name := range append(liveFixtures, "loosened") {
		t.Run(name, func(t *testing.T) {
			var live map[string]interface{}
			if name == "loosened" {
				live = readTestdata(t, "live-applied.json").Object
				loosen(t, live)
			} else {
				live = readTestdata(t, name).Object
			}
			want, digest, loosened := wholeObject(t, live)

			obj, err := DeploymentKind.decodeJSON(marshal(t, live), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*appsv1.Deployment)
			if got.Annotations[memcached.ObservedDigestAnnotation] != digest || got.Annotations[memcached.LoosenedAnnotation] != loosened {
				t.Errorf("digest %q, findings %q; want %q and %q", got.Annotations[memcached.ObservedDigestAnnotation], got.Annotations[memcached.LoosenedAnnotation], digest, loosened)
			}
			if name == "loosened" && loosened == "" {
				t.Fatalf("the fixture loosened nothing")
			}
			got = got.DeepCopy()
			for _, a := range []string{memcached.ObservedDigestAnnotation, memcached.LoosenedAnnotation, observedInputsAnnotation} {
				delete(got.Annotations, a)
			}
			if len(got.Annotations) == 0 {
				got.Annotations = want.Annotations
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("typed object differs from the whole object's conversion:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestObserveCarriesOverOnlyWhileItsInputsHold: a Deployment's next version
// takes the digest and findings of the cache's copy when none of the parts
// they are computed from changed (the controller's status writes), and
// computes them afresh when any did.
func TestObserveCarriesOverOnlyWhileItsInputsHold(t *testing.T) {
	const carried = "carried-over"
	withStatus := func(live map[string]interface{}, replicas int64, at string) {
		live["status"] = map[string]interface{}{"observedGeneration": int64(1), "replicas": replicas, "updatedReplicas": replicas}
		entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
		var kept []interface{}
		for _, e := range entries {
			if e.(map[string]interface{})["manager"] != "kube-controller-manager" {
				kept = append(kept, e)
			}
		}
		kept = append(kept, map[string]interface{}{
			"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "apiVersion": "apps/v1", "time": at,
			"fieldsType": "FieldsV1", "fieldsV1": map[string]interface{}{"f:status": map[string]interface{}{"f:replicas": map[string]interface{}{}}},
		})
		if err := unstructured.SetNestedSlice(live, kept, "metadata", "managedFields"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		edit      func(live map[string]interface{})
		carryOver bool
	}{
		{"the controller writes the status", func(live map[string]interface{}) {
			withStatus(live, 2, "2026-12-01T20:00:00Z")
			live["metadata"].(map[string]interface{})["resourceVersion"] = "999"
		}, true},
		{"the operator applies the same again", func(live map[string]interface{}) {
			entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
			entries[0].(map[string]interface{})["time"] = "2026-12-01T21:00:00Z"
			_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
		}, true},
		{"someone changes the image", func(live map[string]interface{}) {
			containers, _, _ := unstructured.NestedSlice(live, "spec", "template", "spec", "containers")
			containers[0].(map[string]interface{})["image"] = "memcached:other"
			_ = unstructured.SetNestedSlice(live, containers, "spec", "template", "spec", "containers")
		}, false},
		{"someone loosens the template", func(live map[string]interface{}) { loosen(t, live) }, false},
		{"someone removes a label", func(live map[string]interface{}) {
			unstructured.RemoveNestedField(live, "metadata", "labels", memcached.CRLabel)
		}, false},
		{"someone changes the strategy", func(live map[string]interface{}) {
			_ = unstructured.SetNestedField(live, "Recreate", "spec", "strategy", "type")
		}, false},
		{"the operator's field set changes", func(live map[string]interface{}) {
			entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
			entries[0].(map[string]interface{})["fieldsV1"] = map[string]interface{}{"f:metadata": map[string]interface{}{}}
			_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
		}, false},
		{"the controller's field set of the status grows", func(live map[string]interface{}) {
			withStatus(live, 2, "2026-12-01T20:00:00Z")
			entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
			entries[len(entries)-1].(map[string]interface{})["fieldsV1"] = map[string]interface{}{"f:status": map[string]interface{}{"f:replicas": map[string]interface{}{}, "f:readyReplicas": map[string]interface{}{}}}
			_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
		}, true},
		{"someone else applies too", func(live map[string]interface{}) {
			entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
			entries = append(entries, map[string]interface{}{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
				"fieldsType": "FieldsV1", "fieldsV1": map[string]interface{}{"f:metadata": map[string]interface{}{"f:labels": map[string]interface{}{"f:team": map[string]interface{}{}}}}})
			_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
			_ = unstructured.SetNestedField(live, "shop", "metadata", "labels", "team")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := readTestdata(t, "live-applied.json").Object
			withStatus(base, 1, "2026-12-01T19:52:33Z")
			first, err := DeploymentKind.decodeJSON(marshal(t, base), nil)
			if err != nil {
				t.Fatal(err)
			}
			DeploymentKind.Trim(first)
			// The cache's copy carries a digest that no computation gives,
			// so that the test sees whether it was carried over.
			first.GetAnnotations()[memcached.ObservedDigestAnnotation] = carried
			cached := func(namespace, name string) Object {
				if namespace != first.GetNamespace() || name != first.GetName() {
					t.Errorf("cached(%s, %s), want %s/%s", namespace, name, first.GetNamespace(), first.GetName())
				}
				return first
			}

			next := readTestdata(t, "live-applied.json").Object
			withStatus(next, 1, "2026-12-01T19:52:33Z")
			tt.edit(next)
			_, digest, loosened := wholeObject(t, next)
			obj, err := DeploymentKind.decodeJSON(marshal(t, next), cached)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.GetAnnotations()
			want := digest
			if tt.carryOver {
				want = carried
			}
			if got[memcached.ObservedDigestAnnotation] != want || got[memcached.LoosenedAnnotation] != loosened {
				t.Errorf("digest %q, findings %q; want %q and %q", got[memcached.ObservedDigestAnnotation], got[memcached.LoosenedAnnotation], want, loosened)
			}
		})
	}
}

// TestJSONWatchDecodesEachEvent reads a watch stream one byte at a time,
// as a slow connection delivers it: each event's object decoded and
// observed, an error event's Status kept, an object that does not decode
// turned into an error event, upon which the cache lists again, and the
// end of the stream closing the watch.
func TestJSONWatchDecodesEachEvent(t *testing.T) {
	applied := readTestdata(t, "live-applied.json").Object
	changed := readTestdata(t, "live-image-changed.json").Object
	_, wantDigest, _ := wholeObject(t, changed)
	expired := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	// A label whose value holds braces, brackets and escaped quotes, which
	// the framing must read as a string.
	applied["metadata"].(map[string]interface{})["labels"].(map[string]interface{})["tricky"] = `}]"{[\`
	var stream bytes.Buffer
	for _, e := range []struct {
		Type   string      `json:"type"`
		Object interface{} `json:"object"`
	}{
		{"ADDED", applied},
		{"MODIFIED", changed},
		{"DELETED", changed},
		{"ERROR", expired},
		{"ADDED", map[string]interface{}{"metadata": 5}},
		{"BOOKMARK", map[string]interface{}{}},
	} {
		stream.Write(marshal(t, e))
		stream.WriteByte('\n')
	}
	// Laid out otherwise than the API server does: the object first, a key
	// after it, no newline between events, spaces.
	other := marshal(t, changed)
	fmt.Fprintf(&stream, `{"object":%s,"type":"MODIFIED"}{"type":"MODIFIED","object":%s,"extra":1}  {"type" : "MODIFIED", "object" : %s}`, other, other, other)
	body := io.NopCloser(iotest.OneByteReader(&stream))
	w := watch.NewStreamWatcher(&jsonEvents{kind: DeploymentKind, body: body, stream: bufio.NewReader(body)})
	defer w.Stop()

	var got []string
	for e := range w.ResultChan() {
		switch o := e.Object.(type) {
		case *appsv1.Deployment:
			got = append(got, fmt.Sprintf("%s %s digest=%v", e.Type, o.Name, o.Annotations[memcached.ObservedDigestAnnotation] == wantDigest))
		case *metav1.Status:
			got = append(got, fmt.Sprintf("%s %d %s", e.Type, o.Code, o.Reason))
		default:
			got = append(got, fmt.Sprintf("%s %T", e.Type, o))
		}
	}
	want := []string{
		"ADDED " + applied["metadata"].(map[string]interface{})["name"].(string) + " digest=false",
		"MODIFIED " + changed["metadata"].(map[string]interface{})["name"].(string) + " digest=true",
		"DELETED " + changed["metadata"].(map[string]interface{})["name"].(string) + " digest=true",
		"ERROR 410 Expired",
		"ERROR 0 ",
		"ERROR 0 ",
		"MODIFIED " + changed["metadata"].(map[string]interface{})["name"].(string) + " digest=true",
		"MODIFIED " + changed["metadata"].(map[string]interface{})["name"].(string) + " digest=true",
		"MODIFIED " + changed["metadata"].(map[string]interface{})["name"].(string) + " digest=true",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\ngot  %q\nwant %q", got, want)
	}
}

// BenchmarkDeploymentEvent compares, side by side, the cost of one
// Deployment of a watch event as the cache took it before (the dynamic
// client's maps, converted to the type, the digest and findings of the
// whole object) with decodeJSON's, for a new version of the template and
// for a status write that carries the digest over. Run it with
// go test -run '^$' -bench DeploymentEvent -benchmem ./pkg/kube/.
func BenchmarkDeploymentEvent(b *testing.B) {
	live := readTestdata(b, "live-applied.json").Object
	raw, err := json.Marshal(live)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole object into maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				b.Fatal(err)
			}
			if _, err := memcached.OwnedDigest(u.Object); err != nil {
				b.Fatal(err)
			}
			template, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template")
			memcached.LooserSecurity(template.(map[string]interface{}))
		}
	})
	b.Run("decodeJSON, inputs changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DeploymentKind.decodeJSON(raw, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	first, err := DeploymentKind.decodeJSON(raw, nil)
	if err != nil {
		b.Fatal(err)
	}
	DeploymentKind.Trim(first)
	cached := func(string, string) Object { return first }
	b.Run("decodeJSON, carried over", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DeploymentKind.decodeJSON(raw, cached); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzWatchFraming: whatever strings a tenant writes into an object, and
// whatever an event's type, the framing of a watch stream finds each event
// whole, and its type and object are what was written.
func FuzzWatchFraming(f *testing.F) {
	f.Add("MODIFIED", `}]"{[\`, "a")
	f.Add("ADDED", `","object":{`, `\u0000"}`)
	f.Fuzz(func(t *testing.T, eventType, label, annotation string) {
		object := map[string]interface{}{"metadata": map[string]interface{}{
			"name": "x", "labels": map[string]interface{}{"l": label}, "annotations": map[string]interface{}{annotation: label},
		}}
		event := marshal(t, map[string]interface{}{"type": eventType, "object": object})
		r := bufio.NewReader(bytes.NewReader(append(append(append([]byte{}, event...), '\n'), event...)))
		for i := 0; i < 2; i++ {
			frame, err := nextJSONValue(r, nil)
			if err != nil || !bytes.Equal(frame, event) {
				t.Fatalf("frame %d: got %q, %v; want %q", i, frame, err, event)
			}
			gotType, gotObject, err := splitEvent(frame)
			if err != nil {
				t.Fatal(err)
			}
			var got, want interface{}
			if err := json.Unmarshal(gotObject, &got); err != nil {
				t.Fatalf("object %q: %v", gotObject, err)
			}
			if err := json.Unmarshal(marshal(t, object), &want); err != nil {
				t.Fatal(err)
			}
			var wantType string
			if err := json.Unmarshal(marshal(t, eventType), &wantType); err != nil {
				t.Fatal(err)
			}
			if string(gotType) != wantType || !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("got %q %v, want %q %v", gotType, got, wantType, want)
			}
		}
		if _, err := nextJSONValue(r, nil); err != io.EOF {
			t.Errorf("after the last event: %v, want io.EOF", err)
		}
	})
}

// TestCarriedOverDigestsMatchInAnyOrder: in random sequences of a
// Deployment's changes (status writes, re-applies, images, loosened
// templates, labels, strategies, the operator's field set, another
// manager's apply, each toggled back and forth, so that earlier versions
// come back), each version observed with the cache's copy of the one
// before, or with none, as after a relist, carries the same digest and
// findings as the version observed afresh.
func TestCarriedOverDigestsMatchInAnyOrder(t *testing.T) {
	base := readTestdata(t, "live-applied.json").Object
	edits := []func(live map[string]interface{}, on bool){
		func(live map[string]interface{}, on bool) { // the controller's status write
			replicas := int64(1)
			if on {
				replicas = 2
			}
			live["status"] = map[string]interface{}{"replicas": replicas, "updatedReplicas": replicas}
		},
		func(live map[string]interface{}, on bool) { // a re-apply: the entry's time alone
			entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
			entries[0].(map[string]interface{})["time"] = map[bool]string{true: "2026-12-02T00:00:00Z", false: "2026-12-01T19:52:32Z"}[on]
			_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
		},
		func(live map[string]interface{}, on bool) { // the image
			containers, _, _ := unstructured.NestedSlice(live, "spec", "template", "spec", "containers")
			if on {
				containers[0].(map[string]interface{})["image"] = "memcached:other"
			}
			_ = unstructured.SetNestedSlice(live, containers, "spec", "template", "spec", "containers")
		},
		func(live map[string]interface{}, on bool) { // a loosened template
			if on {
				_ = unstructured.SetNestedField(live, true, "spec", "template", "spec", "hostNetwork")
			}
		},
		func(live map[string]interface{}, on bool) { // a label
			if on {
				unstructured.RemoveNestedField(live, "metadata", "labels", memcached.CRLabel)
			}
		},
		func(live map[string]interface{}, on bool) { // the strategy
			if on {
				_ = unstructured.SetNestedField(live, "Recreate", "spec", "strategy", "type")
			}
		},
		func(live map[string]interface{}, on bool) { // the operator's field set loses the template
			if on {
				entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
				unstructured.RemoveNestedField(entries[0].(map[string]interface{}), "fieldsV1", "f:spec", "f:template")
				_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
			}
		},
		func(live map[string]interface{}, on bool) { // another manager's apply
			if on {
				entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
				entries = append(entries, map[string]interface{}{"manager": "kubectl", "operation": "Apply", "fieldsV1": map[string]interface{}{"f:spec": map[string]interface{}{}}})
				_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
			}
		},
	}
	var carried, computed int
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		state := make([]bool, len(edits))
		var cached Object
		for step := 0; step < 40; step++ {
			state[rng.Intn(len(edits))] = rng.Intn(2) == 1
			live := runtime.DeepCopyJSON(base)
			for i, on := range state {
				edits[i](live, on)
			}
			raw := marshal(t, live)
			fresh, err := DeploymentKind.decodeJSON(raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rng.Intn(5) == 0 {
				cached = nil // a relist: no copy to carry over from
			}
			var copyOf cachedFunc
			if cached != nil {
				copyOf = func(string, string) Object { return cached }
			}
			got, err := DeploymentKind.decodeJSON(raw, copyOf)
			if err != nil {
				t.Fatal(err)
			}
			if cached != nil && cached.GetAnnotations()[observedInputsAnnotation] == got.GetAnnotations()[observedInputsAnnotation] {
				carried++
			} else {
				computed++
			}
			for _, a := range []string{memcached.ObservedDigestAnnotation, memcached.LoosenedAnnotation} {
				if got.GetAnnotations()[a] != fresh.GetAnnotations()[a] {
					t.Fatalf("seed %d, step %d, edits %v: %s %q, observed afresh %q", seed, step, state, a, got.GetAnnotations()[a], fresh.GetAnnotations()[a])
				}
			}
			DeploymentKind.Trim(got)
			cached = got
		}
	}
	if carried == 0 || computed == 0 {
		t.Errorf("%d versions carried over, %d computed: the sequences must try both", carried, computed)
	}
}

// TestJSONWatchKeepsNoLargeBuffer: after an event larger than
// maxKeptFrame, such as a Deployment a tenant filled with annotations,
// the watch lets its buffer go, and decodes the next event as before.
func TestJSONWatchKeepsNoLargeBuffer(t *testing.T) {
	large := readTestdata(t, "live-applied.json").Object
	large["metadata"].(map[string]interface{})["annotations"] = map[string]interface{}{"big": strings.Repeat("x", 2*maxKeptFrame)}
	small := readTestdata(t, "live-applied.json").Object
	var stream bytes.Buffer
	for _, o := range []interface{}{large, small} {
		stream.Write(marshal(t, map[string]interface{}{"type": "MODIFIED", "object": o}))
	}
	body := io.NopCloser(&stream)
	d := &jsonEvents{kind: DeploymentKind, body: body, stream: bufio.NewReader(body)}
	for i, want := range []int{2 * maxKeptFrame, 0} {
		eventType, obj, err := d.Decode()
		if err != nil || eventType != watch.Modified {
			t.Fatalf("event %d: %s, %v", i, eventType, err)
		}
		if got := len(obj.(*appsv1.Deployment).Annotations["big"]); got != want {
			t.Errorf("event %d: annotation of %d bytes, want %d", i, got, want)
		}
		if cap(d.frame) > maxKeptFrame {
			t.Errorf("event %d: the watch keeps a buffer of %d bytes", i, cap(d.frame))
		}
	}
}
