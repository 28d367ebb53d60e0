package memcached_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The testdata files are a Deployment of a Memcached with TLS, auth and
// monitoring, applied.json as the operator applied it, and the API server's
// answers (kube-apiserver v1.37.2, kubectl get -o json --show-managed-fields)
// after that apply and after each hand edit in turn, each file with the edits
// of those before it:
//   - live-applied: right after the apply;
//   - live-others-added: kubectl rollout restart (a template annotation),
//     kubectl set env FOO=bar (an env var the operator does not set),
//     kubectl scale --replicas=3;
//   - live-image-changed: kubectl set image memcached=other:1;
//   - live-label-removed: kubectl label deploy example app-;
//   - live-sidecar-removed: a JSON patch that removes the second container.

func readJSON(t *testing.T, name string) map[string]interface{} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return u.Object
}

func TestOwnedDigestTellsHandEditsOfWhatTheOperatorSet(t *testing.T) {
	want, err := memcached.DesiredDigest(readJSON(t, "applied.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		live string
		edit func(live map[string]interface{})
		same bool
	}{
		{live: "live-applied.json", same: true},
		{live: "live-others-added.json", same: true},
		{live: "live-image-changed.json", same: false},
		{live: "live-label-removed.json", same: false},
		{live: "live-sidecar-removed.json", same: false},
		{
			live: "live-applied.json",
			edit: func(live map[string]interface{}) {
				// The record of how the template came about is not what it runs.
				_ = unstructured.SetNestedField(live, "another", "spec", "template", "metadata", "annotations", memcached.SpecHashAnnotation)
				_ = unstructured.SetNestedField(live, "true", "spec", "template", "metadata", "annotations", memcached.PacedRollAnnotation)
			},
			same: true,
		},
		{
			live: "live-applied.json",
			edit: func(live map[string]interface{}) {
				// An object without the operator's apply: one an operator
				// version without server-side apply created.
				unstructured.RemoveNestedField(live, "metadata", "managedFields")
			},
			same: false,
		},
	}
	for _, tt := range tests {
		live := readJSON(t, tt.live)
		name := tt.live
		if tt.edit != nil {
			tt.edit(live)
			name += " edited"
		}
		got, err := memcached.OwnedDigest(live)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if (got == want) != tt.same {
			t.Errorf("%s: OwnedDigest %q, DesiredDigest %q: got same %t, want %t", name, got, want, got == want, tt.same)
		}
	}
}

func TestOwnedDigestWithoutTheOperatorsApplyIsEmpty(t *testing.T) {
	live := readJSON(t, "live-applied.json")
	entries, _, _ := unstructured.NestedSlice(live, "metadata", "managedFields")
	for _, e := range entries {
		e.(map[string]interface{})["operation"] = "Update"
	}
	_ = unstructured.SetNestedSlice(live, entries, "metadata", "managedFields")
	if got, err := memcached.OwnedDigest(live); err != nil || got != "" {
		t.Errorf("OwnedDigest of an object the operator only updated: got %q, %v; want \"\", nil", got, err)
	}
}

func TestDesiredDigestIgnoresWhatTheAPIServerDropsAndRecordAnnotations(t *testing.T) {
	base := map[string]interface{}{
		"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "memcached"}},
		"spec": map[string]interface{}{
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"creationTimestamp": nil, "annotations": map[string]interface{}{memcached.TemplateHashAnnotation: "h"}},
				"spec":     map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "memcached", "resources": map[string]interface{}{}}}},
			},
		},
	}
	same := map[string]interface{}{
		"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "memcached"}},
		"spec": map[string]interface{}{
			"strategy": map[string]interface{}{},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"annotations": map[string]interface{}{memcached.TemplateHashAnnotation: "h", memcached.SpecHashAnnotation: "s"}},
				"spec":     map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "memcached"}}, "volumes": []interface{}{}},
			},
		},
	}
	other := map[string]interface{}{
		"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "memcached"}},
		"spec": map[string]interface{}{
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"annotations": map[string]interface{}{memcached.TemplateHashAnnotation: "other"}},
				"spec":     map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "memcached"}}},
			},
		},
	}
	a, _ := memcached.DesiredDigest(base)
	b, _ := memcached.DesiredDigest(same)
	c, _ := memcached.DesiredDigest(other)
	if a != b {
		t.Errorf("nulls, empty maps and lists, and record annotations: got digests %q and %q, want them equal", a, b)
	}
	if a == c {
		t.Errorf("another template hash: got digest %q for both, want them to differ", a)
	}
}

func TestProjectFollowsTheFieldSet(t *testing.T) {
	containers := []interface{}{
		map[string]interface{}{"name": "memcached", "image": "m:1", "imagePullPolicy": "IfNotPresent",
			"ports": []interface{}{map[string]interface{}{"containerPort": int64(11211), "protocol": "TCP", "name": "memcached"}}},
		map[string]interface{}{"name": "sidecar", "image": "s:1"},
	}
	tests := []struct {
		name   string
		value  interface{}
		fields string
		want   string
	}{
		{
			name:   "a keyed list keeps the named items and their owned fields",
			value:  containers,
			fields: `{"k:{\"name\":\"memcached\"}":{".":{},"f:name":{},"f:image":{},"f:ports":{"k:{\"containerPort\":11211,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}`,
			want:   `[{"image":"m:1","name":"memcached","ports":[{"containerPort":11211,"protocol":"TCP"}]}]`,
		},
		{
			name:   "an atomic list is owned whole",
			value:  map[string]interface{}{"command": []interface{}{"memcached", "-m", "64"}, "args": []interface{}{"x"}},
			fields: `{"f:command":{}}`,
			want:   `{"command":["memcached","-m","64"]}`,
		},
		{
			name:   "a set keeps the values it names",
			value:  []interface{}{"a", "b", "c"},
			fields: `{"v:\"a\"":{},"v:\"c\"":{}}`,
			want:   `["a","c"]`,
		},
		{
			name:   "an index names an item",
			value:  []interface{}{"a", "b"},
			fields: `{"i:1":{}}`,
			want:   `["b"]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fields map[string]interface{}
			if err := json.Unmarshal([]byte(tt.fields), &fields); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(memcached.Project(tt.value, fields))
			if err != nil {
				t.Fatal(err)
			}
			var g, w interface{}
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tt.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestConvertUpdatesMakesTheOperatorsUpdatesItsApply(t *testing.T) {
	applied := readJSON(t, "live-applied.json")
	entries, _, _ := unstructured.NestedSlice(applied, "metadata", "managedFields")
	updated := runtime.DeepCopyJSONValue(entries).([]interface{})
	for _, e := range updated {
		if e.(map[string]interface{})["manager"] == memcached.FieldManager {
			e.(map[string]interface{})["operation"] = "Update"
		}
	}
	others := []interface{}{map[string]interface{}{"manager": "kubectl-edit", "operation": "Update", "fieldsV1": map[string]interface{}{}}}
	tests := []struct {
		name        string
		in          []interface{}
		want        []interface{}
		wantChanged bool
	}{
		{name: "the operator's updates become its apply", in: updated, want: entries, wantChanged: true},
		{name: "an object the operator applied stays", in: entries, want: entries},
		{name: "others' updates stay", in: others, want: others},
		{name: "no entries", in: nil, want: nil},
	}
	for _, tt := range tests {
		got, changed := memcached.ConvertUpdates(tt.in)
		if changed != tt.wantChanged || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, changed %t; want %v, changed %t", tt.name, got, changed, tt.want, tt.wantChanged)
		}
	}
	if tests[0].in[0].(map[string]interface{})["operation"] != "Update" {
		t.Errorf("ConvertUpdates changed its argument")
	}
}
