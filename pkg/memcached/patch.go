package memcached

import (
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// JSONPatchSet returns a JSON patch (RFC 6902) that first tests that the
// object's UID is uid, then sets each path to its value, whole, or removes
// it where the value is nil. The test makes the API server refuse the whole
// patch when the object of that name is no longer the one the caller saw,
// because someone deleted it and created another within the lag of the
// operator's cache (see kube.ErrReplaced). It sets with "add", which replaces a
// member that exists and creates one that does not, unlike "replace"; and,
// unlike a merge patch, it drops the keys of a map value that the new value
// leaves out. Paths are applied in sorted order, so equal inputs give equal
// patches.
func JSONPatchSet(uid types.UID, values map[string]interface{}) ([]byte, error) {
	paths := make([]string, 0, len(values))
	for p := range values {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	ops := make([]map[string]interface{}, 0, len(paths)+1)
	ops = append(ops, map[string]interface{}{"op": "test", "path": "/metadata/uid", "value": uid})
	for _, p := range paths {
		if values[p] == nil {
			ops = append(ops, map[string]interface{}{"op": "remove", "path": p})
			continue
		}
		ops = append(ops, map[string]interface{}{"op": "add", "path": p, "value": values[p]})
	}
	return json.Marshal(ops)
}

// ToManifest returns obj as unstructured content to send to the API server;
// an obj that is unstructured already is returned as it is.
func ToManifest(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: content}, nil
}
