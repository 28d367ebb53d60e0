package v1alpha1

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ghodss/yaml"
)

// crdSchema returns the openAPIV3Schema of deploy/crd.yaml's only version.
func crdSchema(t *testing.T) map[string]interface{} {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "crd.yaml"))
	if err != nil {
		t.Fatalf("failed to read the CRD: %v", err)
	}
	var crd struct {
		Spec struct {
			Group    string `json:"group"`
			Names    struct{ Kind, Plural string }
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]interface{} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("failed to parse the CRD: %v", err)
	}
	if crd.Spec.Group != GroupName || crd.Spec.Names.Kind != Kind || crd.Spec.Names.Plural != Resource {
		t.Fatalf("CRD names %s %s/%s, want %s %s/%s", crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Names.Plural, GroupName, Kind, Resource)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != Version {
		t.Fatalf("CRD versions %+v, want exactly %s", crd.Spec.Versions, Version)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(typ reflect.Type) []string {
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// schemaFields returns the property names of the object schema at path,
// where "items" steps into an array's item schema.
func schemaFields(t *testing.T, schema map[string]interface{}, path ...string) []string {
	t.Helper()
	node := schema
	for _, p := range path {
		var next interface{}
		if p == "items" {
			next = node["items"]
		} else {
			props, _ := node["properties"].(map[string]interface{})
			next = props[p]
		}
		var ok bool
		if node, ok = next.(map[string]interface{}); !ok {
			t.Fatalf("schema has no %s", strings.Join(path, "."))
		}
	}
	var names []string
	for name := range node["properties"].(map[string]interface{}) {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// TestCRDSchemaMatchesTypes keeps deploy/crd.yaml and the Go types in step:
// a field missing from the schema would be pruned by the API server.
func TestCRDSchemaMatchesTypes(t *testing.T) {
	schema := crdSchema(t)
	tests := []struct {
		path []string
		typ  reflect.Type
	}{
		{path: []string{"spec"}, typ: reflect.TypeOf(MemcachedSpec{})},
		{path: []string{"status"}, typ: reflect.TypeOf(MemcachedStatus{})},
		{path: []string{"status", "conditions", "items"}, typ: reflect.TypeOf(MemcachedCondition{})},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.path, "."), func(t *testing.T) {
			got := schemaFields(t, schema, tt.path...)
			if want := jsonFields(tt.typ); !reflect.DeepEqual(got, want) {
				t.Errorf("schema properties %v, want the Go fields %v", got, want)
			}
		})
	}
}
