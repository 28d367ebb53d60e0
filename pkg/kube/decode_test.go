package kube

import (
	"bytes"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
)

// maxJSONDepth is the nesting depth beyond which Go's encoding/json refuses a
// document (since Go 1.15).
const maxJSONDepth = 10000

// memcachedWithin returns a Memcached whose spec holds an unknown field that
// nests depth arrays.
func memcachedWithin(depth int) []byte {
	return []byte(`{"apiVersion":"` + v1alpha1.APIVersion() + `","kind":"` + v1alpha1.Kind +
		`","metadata":{"name":"deep","namespace":"tenant"},"spec":{"size":1,"deep":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`)
}

// deploymentWithin returns a Deployment whose pod template holds the spec
// of memcached, a Memcached of memcachedWithin.
func deploymentWithin(memcached []byte) []byte {
	spec := memcached[bytes.Index(memcached, []byte(`"spec":`))+len(`"spec":`) : len(memcached)-1]
	return append(append([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"deep","namespace":"tenant"},"spec":{"template":{"spec":`), spec...), "}}}"...)
}

// TestDeepJSONIsRefusedBeforeTheRecursion backs test/vuln/reviewed.yaml's entry
// for GO-2022-0965: apimachinery of 2018 decodes JSON with recursions that have
// no depth limit of their own (util/json's number conversion, the serializer
// over json-iterator), so a document nested deep enough would exhaust the
// stack and crash the operator. Memcacheds are written by tenants and reach the
// operator as JSON through the REST client (scheme.Codecs) and the SDK's
// dynamic client (unstructured.UnstructuredJSONScheme), but each of those
// decoders runs Go's encoding/json over the whole document first, which
// refuses it past maxJSONDepth; at that depth the recursions use a few MiB of
// stack of the 1 GiB that Go allows.
func TestDeepJSONIsRefusedBeforeTheRecursion(t *testing.T) {
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		t.Fatal(err)
	}
	decoders := []struct {
		name   string
		decode func([]byte) error
	}{
		{"scheme.Codecs (the REST client of Memcacheds, the typed clients' JSON)", func(data []byte) error {
			_, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
			return err
		}},
		{"unstructured.UnstructuredJSONScheme (the SDK's dynamic client)", func(data []byte) error {
			_, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
			return err
		}},
		{"Kind.decodeJSON (the Deployments' cache: json-iterator, then the parts observeDeployment reads)", func(data []byte) error {
			_, err := DeploymentKind.decodeJSON(deploymentWithin(data), nil)
			return err
		}},
		{"util/json.Unmarshal into a map (its recursive number conversion)", func(data []byte) error {
			var m map[string]interface{}
			return utiljson.Unmarshal(data, &m)
		}},
	}
	tests := []struct {
		name    string
		depth   int
		wantErr bool
	}{
		{name: "the deepest that is decoded", depth: maxJSONDepth - 10},
		{name: "one past the limit", depth: maxJSONDepth + 1, wantErr: true},
		{name: "a million", depth: 1000000, wantErr: true},
	}
	for _, d := range decoders {
		for _, tt := range tests {
			err := d.decode(memcachedWithin(tt.depth))
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "exceeded max depth")):
				t.Errorf("%s, %s (%d): got %v, want an error naming the exceeded max depth", d.name, tt.name, tt.depth, err)
			case !tt.wantErr && err != nil:
				t.Errorf("%s, %s (%d): got %v, want it decoded", d.name, tt.name, tt.depth, err)
			}
		}
	}
}
