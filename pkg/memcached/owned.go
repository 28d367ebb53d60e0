package memcached

import (
	"encoding/json"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// FieldManager is the name under which the operator applies its
	// Deployments (server-side apply). The API server records, in each
	// object's metadata.managedFields, the fields that this manager's apply
	// set, and moves a field to another manager, or drops it from every
	// manager, when someone else changes or removes it. The set it keeps for
	// the operator is therefore the operator's own record of what still
	// holds the value it applied, kept by the API server, not by the object's
	// annotations.
	FieldManager = "memcached-operator"

	// ObservedDigestAnnotation holds, on the operator's trimmed, cached copy
	// of a Deployment or a NetworkPolicy only (the kube package's cache sets
	// it; it is never sent to the API server), OwnedDigest of the live
	// Deployment, or NetworkPolicyDigest of the live policy's spec. The cache
	// keeps this digest instead of the pod template or the policy's rules,
	// so that its memory stays that of a trimmed object, and so that it sees
	// fields that client-go 1.11's types cannot hold.
	ObservedDigestAnnotation = "cache.example.com/observed-digest"
)

// digestScope are the parts of a Deployment that the operator applies and
// restores whole when someone changed what it set in them. spec.replicas
// and spec.progressDeadlineSeconds have steps of their own.
var digestScope = [][]string{
	{"metadata", "labels"},
	{"spec", "strategy"},
	{"spec", "template"},
}

// recordAnnotations are pod template annotations that record how a template
// came about (see SpecHashAnnotation, PacedRollAnnotation) rather than what
// it runs. They are left out of digests: a restore keeps the live ones, so
// that it never changes a template that still runs what the spec asks for.
var recordAnnotations = []string{SpecHashAnnotation, PacedRollAnnotation}

// OwnedDigest returns the digest of the values that the operator's own
// apply (FieldManager, operation Apply) owns in live, a Deployment as the
// API server returns it with its managedFields, under digestScope. It
// equals DesiredDigest of the manifest the operator last applied for as
// long as nobody changed or removed a field that it set; fields that
// others add, such as an annotation of kubectl rollout restart, do not
// count. It is "" when the operator never applied live, as for an object
// created by an operator version that did not apply its Deployments.
func OwnedDigest(live map[string]interface{}) (string, error) {
	fields := appliedFields(live)
	if fields == nil {
		return "", nil
	}
	owned := map[string]interface{}{}
	for _, path := range digestScope {
		value, ok, _ := unstructured.NestedFieldNoCopy(live, path...)
		if !ok {
			continue
		}
		set, ok := fieldSetAt(fields, path)
		if !ok {
			continue
		}
		setAt(owned, project(value, set), path)
	}
	return digestOf(owned)
}

// setAt sets value at path in m, a path of maps that it creates as needed;
// unlike unstructured.SetNestedField, it does not copy value, which
// digestOf copies before it changes anything.
func setAt(m map[string]interface{}, value interface{}, path []string) {
	for _, name := range path[:len(path)-1] {
		next, ok := m[name].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[name] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// DesiredDigest returns the digest of what manifest, a Deployment the
// operator applies, sets under digestScope: OwnedDigest of the object the
// API server stores from it, while nobody else changed it.
func DesiredDigest(manifest map[string]interface{}) (string, error) {
	desired := map[string]interface{}{}
	for _, path := range digestScope {
		value, ok, _ := unstructured.NestedFieldNoCopy(manifest, path...)
		if !ok {
			continue
		}
		setAt(desired, value, path)
	}
	return digestOf(desired)
}

// IsOwnApply reports whether a managedFields entry of manager, operation and
// subresource is the one OwnedDigest reads: FieldManager's apply of the
// main resource.
func IsOwnApply(manager, operation, subresource string) bool {
	return manager == FieldManager && operation == "Apply" && subresource == ""
}

// appliedFields returns the fieldsV1 of live's managedFields entry for
// FieldManager's apply of the main resource, or nil without one.
func appliedFields(live map[string]interface{}) map[string]interface{} {
	field, _, _ := unstructured.NestedFieldNoCopy(live, "metadata", "managedFields")
	entries, _ := field.([]interface{})
	for _, e := range entries {
		entry, ok := e.(map[string]interface{})
		if !ok {
			continue
		}
		manager, _ := entry["manager"].(string)
		operation, _ := entry["operation"].(string)
		subresource, _ := entry["subresource"].(string)
		if !IsOwnApply(manager, operation, subresource) {
			continue
		}
		fields, _ := entry["fieldsV1"].(map[string]interface{})
		if fields == nil {
			fields = map[string]interface{}{}
		}
		return fields
	}
	return nil
}

// fieldSetAt returns the part of the field set fields under path, a path
// of map fields.
func fieldSetAt(fields map[string]interface{}, path []string) (map[string]interface{}, bool) {
	for _, name := range path {
		next, ok := fields["f:"+name].(map[string]interface{})
		if !ok {
			return nil, false
		}
		fields = next
	}
	return fields, true
}

// project returns the part of value that the field set set (a fieldsV1 tree,
// as structured-merge-diff writes it) covers: a set with no members but
// "." owns value whole, as for a scalar or an atomic list; a map keeps its
// "f:" members; a list keeps its items that a "k:" (key fields), "v:"
// (value) or "i:" (index) member names, in their order in value, each
// projected on its member's set.
func project(value interface{}, set map[string]interface{}) interface{} {
	if !hasMembers(set) {
		return value
	}
	switch v := value.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for member, sub := range set {
			if !strings.HasPrefix(member, "f:") {
				continue
			}
			name := strings.TrimPrefix(member, "f:")
			if x, ok := v[name]; ok {
				subset, _ := sub.(map[string]interface{})
				out[name] = project(x, subset)
			}
		}
		return out
	case []interface{}:
		members := listMembers(set)
		out := []interface{}{}
		for i, item := range v {
			if subset, ok := members.itemSet(item, i); ok {
				out = append(out, project(item, subset))
			}
		}
		return out
	}
	return value
}

// hasMembers reports whether set names any member besides ".", the mark
// that the map or list item itself is owned.
func hasMembers(set map[string]interface{}) bool {
	for member := range set {
		if member != "." {
			return true
		}
	}
	return false
}

// listMember is a member of a list's field set that names its items: by
// the JSON of their key fields ("k:"), of their value ("v:"), or by their
// index ("i:").
type listMember struct {
	key   map[string]interface{}
	value interface{}
	index int
	set   map[string]interface{}
}

// itemMembers are the members of one list's field set, each decoded once
// for all the list's items.
type itemMembers []listMember

// listMembers returns the members of set, a list's field set, that name
// items; those that do not decode name none.
func listMembers(set map[string]interface{}) itemMembers {
	var out itemMembers
	for member, sub := range set {
		subset, _ := sub.(map[string]interface{})
		m := listMember{index: -1, set: subset}
		switch {
		case strings.HasPrefix(member, "k:"):
			if decodeNumbers(strings.TrimPrefix(member, "k:"), &m.key) != nil || m.key == nil {
				continue
			}
		case strings.HasPrefix(member, "v:"):
			if decodeNumbers(strings.TrimPrefix(member, "v:"), &m.value) != nil {
				continue
			}
		case strings.HasPrefix(member, "i:"):
			n, err := strconv.Atoi(strings.TrimPrefix(member, "i:"))
			if err != nil || n < 0 {
				continue
			}
			m.index = n
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// itemSet returns the field set of the member that names item, the i-th
// item of the list.
func (members itemMembers) itemSet(item interface{}, i int) (map[string]interface{}, bool) {
	for _, m := range members {
		switch {
		case m.key != nil:
			if matchesKey(item, m.key) {
				return m.set, true
			}
		case m.index >= 0:
			if m.index == i {
				return m.set, true
			}
		default:
			if equalJSON(item, m.value) {
				return m.set, true
			}
		}
	}
	return nil, false
}

// decodeNumbers decodes the JSON text raw into v, its numbers as
// json.Number, which equalJSON compares by value with an int64.
func decodeNumbers(raw string, v interface{}) error {
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// matchesKey reports whether item, a map, has the fields and values of
// key, an associative list's key fields.
func matchesKey(item interface{}, key map[string]interface{}) bool {
	m, ok := item.(map[string]interface{})
	if !ok {
		return false
	}
	for name, want := range key {
		got, ok := m[name]
		if !ok || !equalJSON(got, want) {
			return false
		}
	}
	return true
}

// equalJSON reports whether a and b encode alike, so that an int64 of a
// decoded object and a json.Number of a key compare by value.
func equalJSON(a, b interface{}) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// digestOf returns a short hash of v, normalized so that the object the
// operator applies and the one the API server stores from it hash alike:
// the record annotations of a pod template go (see recordAnnotations), and
// nulls, empty maps and empty lists, which the API server does not keep,
// are dropped.
func digestOf(v map[string]interface{}) (string, error) {
	v = runtime.DeepCopyJSON(v)
	for _, a := range recordAnnotations {
		unstructured.RemoveNestedField(v, "spec", "template", "metadata", "annotations", a)
	}
	normalized, _ := prune(v)
	if normalized == nil {
		normalized = map[string]interface{}{}
	}
	return shortHash(normalized)
}

// prune drops nulls, empty maps and empty lists from v, recursively, and
// reports whether anything is left.
func prune(v interface{}) (interface{}, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case map[string]interface{}:
		for k, item := range x {
			if p, ok := prune(item); ok {
				x[k] = p
			} else {
				delete(x, k)
			}
		}
		return x, len(x) > 0
	case []interface{}:
		out := x[:0]
		for _, item := range x {
			if p, ok := prune(item); ok {
				out = append(out, p)
			}
		}
		return out, len(out) > 0
	}
	return v, true
}

// ConvertUpdates returns managedFields, an object's metadata.managedFields,
// with the entry that FieldManager's creates and patches of the main
// resource left (operation Update) made its apply's (operation Apply), and
// reports whether it changed anything: only an object that the operator
// never applied has such an entry and no apply's. This is what client-go's
// csaupgrade does for kubectl: afterwards the operator's next apply owns
// every field that an operator version without server-side apply set, and
// so removes those the desired Deployment no longer has, as that version's
// patches of the whole pod template did.
func ConvertUpdates(managedFields []interface{}) ([]interface{}, bool) {
	convert := -1
	for i, e := range managedFields {
		entry, ok := e.(map[string]interface{})
		if !ok || entry["manager"] != FieldManager {
			continue
		}
		if sub, _ := entry["subresource"].(string); sub != "" {
			continue
		}
		switch entry["operation"] {
		case "Apply":
			return managedFields, false
		case "Update":
			convert = i
		}
	}
	if convert < 0 {
		return managedFields, false
	}
	out := runtime.DeepCopyJSONValue(managedFields).([]interface{})
	out[convert].(map[string]interface{})["operation"] = "Apply"
	return out, true
}
