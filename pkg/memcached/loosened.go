package memcached

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

const (
	// LoosenedAnnotation holds, on the operator's trimmed, cached copy of a
	// Deployment only (the kube package's cache sets it; it is never sent
	// to the API server), LooserSecurity of the live pod template, joined
	// by commas; the cache leaves it out when there is none. Like
	// ObservedDigestAnnotation, it stands for the pod template, which the
	// cache drops.
	LoosenedAnnotation = "cache.example.com/loosened"

	// maxFindings bounds LooserSecurity's list, and so the cached
	// annotation and the Event that name it: past it, one last entry says
	// how many more there are. The restore puts the whole pod spec back
	// whatever the list holds.
	maxFindings = 16

	// appArmorAnnotationPrefix is the prefix of the pod template annotation
	// that sets a container's AppArmor profile, which kubelets still honour
	// beside the appArmorProfile field (KEP-24).
	appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
)

// LooserSecurity returns where template, a Deployment's pod template as
// the API server returns it (JSON content, so that it sees the fields that
// client-go 1.11's types lack), lets its pods do more than any pod template
// that PodSpec and DeploymentManifest build: host namespaces or a host
// path, root, privilege, added capabilities, a writable root file system,
// no seccomp confinement, or an SELinux or AppArmor exception, at the pod's
// level or in any container or init container, the operator's or another.
// Each finding is the field's path in the template's spec, with containers,
// volumes and ports named by their name, such as
// "containers[memcached].securityContext.runAsNonRoot"; the list is sorted
// and holds at most maxFindings entries. It is nil for every template the
// operator builds (TestOperatorTemplatesAreNeverLooser), so that putting
// the operator's template back can never loop.
//
// An effective value counts: a container without its own runAsNonRoot
// takes the pod's, and a container without its own seccomp profile the
// pod's, so a pod-level profile that is missing is a finding only while a
// container runs without a profile of its own.
func LooserSecurity(template map[string]interface{}) []string {
	spec, _ := template["spec"].(map[string]interface{})
	var findings []string
	add := func(path string) { findings = append(findings, path) }

	for _, host := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if spec[host] == true {
			add(host)
		}
	}
	if spec["hostUsers"] == false {
		add("hostUsers")
	}
	for i, v := range items(spec["volumes"]) {
		if _, ok := v["hostPath"]; ok {
			add(fmt.Sprintf("volumes[%s].hostPath", itemName(v, i)))
		}
	}
	pod, _ := spec["securityContext"].(map[string]interface{})
	looserIdentity(pod, "securityContext", add)
	for _, g := range list(pod["supplementalGroups"]) {
		if isZero(g) {
			add("securityContext.supplementalGroups")
			break
		}
	}
	if _, ok := pod["fsGroup"]; ok && isZero(pod["fsGroup"]) {
		add("securityContext.fsGroup")
	}
	if len(list(pod["sysctls"])) > 0 {
		add("securityContext.sysctls")
	}
	podSeccomp, podHasSeccomp := pod["seccompProfile"].(map[string]interface{})
	if podHasSeccomp && !confinedSeccomp(podSeccomp) {
		add("securityContext.seccompProfile.type")
	}
	if a, ok := pod["appArmorProfile"].(map[string]interface{}); ok && a["type"] == "Unconfined" {
		add("securityContext.appArmorProfile.type")
	}
	if _, ok := pod["seLinuxOptions"]; ok {
		add("securityContext.seLinuxOptions")
	}
	if w, ok := pod["windowsOptions"].(map[string]interface{}); ok && w["hostProcess"] == true {
		add("securityContext.windowsOptions.hostProcess")
	}

	takesPodSeccomp := false
	for _, field := range []string{"initContainers", "containers"} {
		for i, c := range items(spec[field]) {
			if looserContainer(c, fmt.Sprintf("%s[%s]", field, itemName(c, i)), add) {
				takesPodSeccomp = true
			}
		}
	}
	if takesPodSeccomp && !podHasSeccomp {
		add("securityContext.seccompProfile")
	}

	metadata, _ := template["metadata"].(map[string]interface{})
	annotations, _ := metadata["annotations"].(map[string]interface{})
	for k, v := range annotations {
		if strings.HasPrefix(k, appArmorAnnotationPrefix) && v == "unconfined" {
			add("metadata.annotations[" + k + "]")
		}
	}
	return bounded(findings)
}

// looserContainer adds the findings of c, a container of a pod template,
// whose path is prefix, and reports whether c has no seccomp profile of
// its own, so that it runs with the pod's.
func looserContainer(c map[string]interface{}, prefix string, add func(string)) (noSeccomp bool) {
	for i, p := range items(c["ports"]) {
		if _, ok := p["hostPort"]; ok && !isZero(p["hostPort"]) {
			add(fmt.Sprintf("%s.ports[%s].hostPort", prefix, itemName(p, i)))
		}
	}
	s, _ := c["securityContext"].(map[string]interface{})
	path := prefix + ".securityContext"
	if s["privileged"] == true {
		add(path + ".privileged")
	}
	if s["allowPrivilegeEscalation"] != false {
		add(path + ".allowPrivilegeEscalation")
	}
	if s["readOnlyRootFilesystem"] != true {
		add(path + ".readOnlyRootFilesystem")
	}
	caps, _ := s["capabilities"].(map[string]interface{})
	if len(list(caps["add"])) > 0 {
		add(path + ".capabilities.add")
	}
	dropsAll := false
	for _, d := range list(caps["drop"]) {
		dropsAll = dropsAll || d == "ALL"
	}
	if !dropsAll {
		add(path + ".capabilities.drop")
	}
	looserIdentity(s, path, add)
	if m, ok := s["procMount"]; ok && m != "Default" {
		add(path + ".procMount")
	}
	if _, ok := s["seLinuxOptions"]; ok {
		add(path + ".seLinuxOptions")
	}
	if a, ok := s["appArmorProfile"].(map[string]interface{}); ok && a["type"] == "Unconfined" {
		add(path + ".appArmorProfile.type")
	}
	if w, ok := s["windowsOptions"].(map[string]interface{}); ok && w["hostProcess"] == true {
		add(path + ".windowsOptions.hostProcess")
	}
	seccomp, ok := s["seccompProfile"].(map[string]interface{})
	if ok && !confinedSeccomp(seccomp) {
		add(path + ".seccompProfile.type")
	}
	return !ok
}

// looserIdentity adds the findings of s, a pod's or a container's
// securityContext at path: runAsNonRoot false, or root's user or group.
// The operator runs every pod as memcachedUID with runAsNonRoot, so any of
// them is someone else's.
func looserIdentity(s map[string]interface{}, path string, add func(string)) {
	if s["runAsNonRoot"] == false {
		add(path + ".runAsNonRoot")
	}
	for _, f := range []string{"runAsUser", "runAsGroup"} {
		if v, ok := s[f]; ok && isZero(v) {
			add(path + "." + f)
		}
	}
}

// confinedSeccomp reports whether p, a seccompProfile, confines its
// container: the runtime's default profile or one from the node.
func confinedSeccomp(p map[string]interface{}) bool {
	return p["type"] == "RuntimeDefault" || p["type"] == "Localhost"
}

// items returns the maps in v, a JSON list of objects; others are skipped.
func items(v interface{}) []map[string]interface{} {
	var out []map[string]interface{}
	for _, x := range list(v) {
		if m, ok := x.(map[string]interface{}); ok {
			out = append(out, m)
		}
	}
	return out
}

// list returns v as a JSON list, or nil.
func list(v interface{}) []interface{} {
	l, _ := v.([]interface{})
	return l
}

// itemName names item, the i-th of its list, by its name, or by its index
// without one. A name that the API server would refuse, holding a comma,
// a bracket or a space, is named by its index too, so that a finding never
// holds the separator of LoosenedAnnotation.
func itemName(item map[string]interface{}, i int) string {
	if name, ok := item["name"].(string); ok && name != "" && !strings.ContainsAny(name, ",[] ") {
		return name
	}
	return strconv.Itoa(i)
}

// isZero reports whether v, a JSON number, is 0.
func isZero(v interface{}) bool {
	switch n := v.(type) {
	case int64:
		return n == 0
	case int:
		return n == 0
	case int32:
		return n == 0
	case float64:
		return n == 0
	case fmt.Stringer: // json.Number
		return n.String() == "0"
	}
	return false
}

// bounded returns findings sorted, without repeats, and at most
// maxFindings long; nil when empty.
func bounded(findings []string) []string {
	if len(findings) == 0 {
		return nil
	}
	sort.Strings(findings)
	out := findings[:1]
	for _, f := range findings[1:] {
		if f != out[len(out)-1] {
			out = append(out, f)
		}
	}
	if len(out) > maxFindings {
		more := len(out) - (maxFindings - 1)
		out = append(out[:maxFindings-1:maxFindings-1], fmt.Sprintf("and %d more", more))
	}
	return out
}

// Loosened returns the findings that the cache recorded on d, a cached
// Deployment, in LoosenedAnnotation; nil without any.
func Loosened(d *appsv1.Deployment) []string {
	v := d.Annotations[LoosenedAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// maxSummarized is how many findings LoosenedSummary names.
const maxSummarized = 4

// LoosenedSummary returns findings, as LooserSecurity returns them, for an
// Event or a condition's message: the first few by name, then how many
// more there are.
func LoosenedSummary(findings []string) string {
	more := 0
	if n := len(findings); n > 0 {
		var m int
		if _, err := fmt.Sscanf(findings[n-1], "and %d more", &m); err == nil {
			findings, more = findings[:n-1], m
		}
	}
	if len(findings) > maxSummarized {
		findings, more = findings[:maxSummarized], more+len(findings)-maxSummarized
	}
	s := strings.Join(findings, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// LoosenedValue returns findings as LoosenedAnnotation holds them.
func LoosenedValue(findings []string) string {
	return strings.Join(findings, ",")
}

// PutBackPodSpec returns the JSON patch that makes the pod template of
// live, a cached Deployment, while its UID is live's, the one manifest holds, the
// operator's Deployment, as to everything LooserSecurity checks, in one
// write: it sets spec.template.spec whole, which drops the containers,
// volumes and fields that others added, sets the operator's annotations of
// the template (TemplateHashAnnotation and the record annotations) to
// manifest's, removing those that manifest lacks and live has, and removes
// the AppArmor annotations that findings name. A server-side apply cannot
// do this: it takes back the fields the operator set but leaves those that
// others added. Others' template labels and annotations stay, so that a
// kubectl rollout restart still holds. The apply that follows then finds
// the template as it wants it, and changes only the record of who set it,
// so that the pods roll once.
func PutBackPodSpec(live *appsv1.Deployment, manifest map[string]interface{}, findings []string) ([]byte, error) {
	spec, ok := nestedMap(manifest, "spec", "template", "spec")
	if !ok {
		return nil, fmt.Errorf("the manifest has no pod spec")
	}
	values := map[string]interface{}{"/spec/template/spec": spec}
	wanted, _ := nestedMap(manifest, "spec", "template", "metadata", "annotations")
	for _, a := range append([]string{TemplateHashAnnotation}, recordAnnotations...) {
		path := "/spec/template/metadata/annotations/" + pointerEscape(a)
		switch v, ok := wanted[a]; {
		case ok:
			values[path] = v
		case live.Spec.Template.Annotations[a] != "":
			values[path] = nil
		}
	}
	for _, f := range findings {
		if strings.HasPrefix(f, "metadata.annotations[") && strings.HasSuffix(f, "]") {
			key := strings.TrimSuffix(strings.TrimPrefix(f, "metadata.annotations["), "]")
			values["/spec/template/metadata/annotations/"+pointerEscape(key)] = nil
		}
	}
	if len(live.Spec.Template.Annotations) == 0 {
		// The cache shows none of the operator's annotations, as on a
		// template of an operator version that set none: the template
		// may have no annotations to add them to, so they are set whole,
		// with manifest's alone.
		all := map[string]interface{}{}
		for k, v := range wanted {
			all[k] = v
		}
		for p := range values {
			if strings.HasPrefix(p, "/spec/template/metadata/annotations/") {
				delete(values, p)
			}
		}
		values["/spec/template/metadata/annotations"] = all
	}
	return JSONPatchSet(live.UID, values)
}

// nestedMap returns the map at path in obj.
func nestedMap(obj map[string]interface{}, path ...string) (map[string]interface{}, bool) {
	for _, p := range path {
		next, ok := obj[p].(map[string]interface{})
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, true
}

// pointerEscape escapes s as one token of a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
