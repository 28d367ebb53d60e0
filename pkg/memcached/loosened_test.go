package memcached_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorTemplate returns the pod template the operator applies for m, as
// JSON content.
func operatorTemplate(t *testing.T, m *v1alpha1.Memcached) map[string]interface{} {
	t.Helper()
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}
	template, _, err := unstructured.NestedMap(u.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	return template
}

// everyShape returns Memcacheds of every shape of pod the operator builds:
// plain, TLS with and without client certificates, auth, monitoring,
// discovery, all of them together, with placement and resources, and
// every spec of the conformance corpus, refused ones included.
func everyShape(t *testing.T) map[string]*v1alpha1.Memcached {
	t.Helper()
	out := map[string]*v1alpha1.Memcached{}
	for _, c := range securityCases {
		m := memcachedtest.NewMemcached("shape", 2)
		c.spec(&m.Spec)
		out["security: "+c.name] = m
	}
	all := memcachedtest.NewMemcached("all", 3)
	all.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: v1alpha1.ClientCertificatesRequired}
	all.Spec.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"}
	all.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	all.Spec.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true}
	all.Spec.NodeSelector = map[string]string{"pool": "cache"}
	all.Spec.Tolerations = []corev1.Toleration{{Key: "cache", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	all.Spec.PriorityClassName = "cache-high"
	all.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	all.Spec.ExtraArgs = []string{"--threads=8"}
	out["everything"] = all
	discovery := memcachedtest.NewMemcached("discovery", 2)
	discovery.Spec.Discovery = &v1alpha1.MemcachedDiscovery{Enabled: true}
	out["discovery"] = discovery
	out["monitoring"] = memcachedtest.WithMonitoring(memcachedtest.NewMemcached("monitoring", 1), true)

	b, err := os.ReadFile("testdata/conformance-corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus []ConformanceCase
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	for _, c := range corpus {
		m := memcachedtest.NewMemcached("corpus", 1)
		m.Spec = c.Spec
		out["corpus: "+c.Name] = m
	}
	return out
}

// TestOperatorTemplatesAreNeverLooser: no pod template that the operator
// builds, for any shape of spec, nor any that kube-apiserver returned for
// the operator's applies and for hand edits that loosen nothing
// (testdata/live-*.json, templates of an earlier release), nor the
// earlier release's template of pkg/stub's window tests, has a finding:
// putting the operator's template back can never loop, and an upgrade's
// roll is never taken for a restore.
func TestOperatorTemplatesAreNeverLooser(t *testing.T) {
	for name, m := range everyShape(t) {
		if got := memcached.LooserSecurity(operatorTemplate(t, m)); got != nil {
			t.Errorf("%s: got %q, want none", name, got)
		}
	}
	earlier := memcached.NewDeployment(memcachedtest.NewMemcached("release", 2), memcachedtest.Image, memcachedtest.SidecarImage)
	earlier.Spec.Template.Spec.Containers[0].ReadinessProbe.PeriodSeconds += 5
	u, err := memcached.DeploymentManifest(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if got := memcached.LooserSecurity(u.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})); got != nil {
		t.Errorf("an earlier release's template: got %q, want none", got)
	}
	files, err := filepath.Glob("testdata/live-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no live Deployments in testdata: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		live := &unstructured.Unstructured{}
		if err := live.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		template, _, _ := unstructured.NestedMap(live.Object, "spec", "template")
		if got := memcached.LooserSecurity(template); got != nil {
			t.Errorf("%s: got %q, want none", f, got)
		}
	}
}

// edit is a change of a pod template's JSON content.
type edit func(template map[string]interface{})

// set sets value at path below the template's spec, where a step
// "containers[name]" is the list item of that name.
func set(path string, value interface{}) edit {
	return func(template map[string]interface{}) {
		obj := template["spec"].(map[string]interface{})
		steps := strings.Split(path, ".")
		for _, step := range steps[:len(steps)-1] {
			if i := strings.Index(step, "["); i >= 0 {
				field, name := step[:i], strings.TrimSuffix(step[i+1:], "]")
				found := false
				for _, item := range obj[field].([]interface{}) {
					if m := item.(map[string]interface{}); m["name"] == name {
						obj, found = m, true
						break
					}
				}
				if !found {
					panic(fmt.Sprintf("no %s named %s", field, name))
				}
				continue
			}
			next, ok := obj[step].(map[string]interface{})
			if !ok {
				next = map[string]interface{}{}
				obj[step] = next
			}
			obj = next
		}
		if value == nil {
			delete(obj, steps[len(steps)-1])
			return
		}
		obj[steps[len(steps)-1]] = value
	}
}

// appendTo appends item to the list field of the template's spec.
func appendTo(field string, item map[string]interface{}) edit {
	return func(template map[string]interface{}) {
		spec := template["spec"].(map[string]interface{})
		l, _ := spec[field].([]interface{})
		spec[field] = append(l, item)
	}
}

// restricted is a container that is as restricted as the operator's.
func restricted(name string) map[string]interface{} {
	return map[string]interface{}{
		"name": name, "image": "busybox",
		"securityContext": map[string]interface{}{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"capabilities":             map[string]interface{}{"drop": []interface{}{"ALL"}},
		},
	}
}

func with(c map[string]interface{}, path string, value interface{}) map[string]interface{} {
	set(path, value)(map[string]interface{}{"spec": c})
	return c
}

func TestLooserSecurity(t *testing.T) {
	plain := memcachedtest.NewMemcached("example", 2)
	tls := memcachedtest.NewMemcached("example", 2)
	tls.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert"}
	const mc = "containers[memcached]"
	tests := []struct {
		name  string
		m     *v1alpha1.Memcached
		edits []edit
		want  []string
	}{
		{name: "the operator's", m: plain},
		{name: "runAsNonRoot false on the memcached container", m: plain,
			edits: []edit{set(mc+".securityContext.runAsNonRoot", false)},
			want:  []string{mc + ".securityContext.runAsNonRoot"}},
		{name: "runAsNonRoot true on the container changes nothing", m: plain,
			edits: []edit{set(mc+".securityContext.runAsNonRoot", true)}},
		{name: "root user and group on the container", m: plain,
			edits: []edit{set(mc+".securityContext.runAsUser", int64(0)), set(mc+".securityContext.runAsGroup", int64(0))},
			want:  []string{mc + ".securityContext.runAsGroup", mc + ".securityContext.runAsUser"}},
		{name: "another user is not root", m: plain,
			edits: []edit{set(mc+".securityContext.runAsUser", int64(1000))}},
		{name: "privileged", m: plain,
			edits: []edit{set(mc+".securityContext.privileged", true)},
			want:  []string{mc + ".securityContext.privileged"}},
		{name: "privilege escalation", m: plain,
			edits: []edit{set(mc+".securityContext.allowPrivilegeEscalation", true)},
			want:  []string{mc + ".securityContext.allowPrivilegeEscalation"}},
		{name: "added capability", m: plain,
			edits: []edit{set(mc+".securityContext.capabilities.add", []interface{}{"NET_ADMIN"})},
			want:  []string{mc + ".securityContext.capabilities.add"}},
		{name: "drops less than ALL", m: plain,
			edits: []edit{set(mc+".securityContext.capabilities.drop", []interface{}{"NET_RAW"})},
			want:  []string{mc + ".securityContext.capabilities.drop"}},
		{name: "writable root file system", m: plain,
			edits: []edit{set(mc+".securityContext.readOnlyRootFilesystem", false)},
			want:  []string{mc + ".securityContext.readOnlyRootFilesystem"}},
		{name: "unmasked /proc", m: plain,
			edits: []edit{set(mc+".securityContext.procMount", "Unmasked")},
			want:  []string{mc + ".securityContext.procMount"}},
		{name: "default /proc", m: plain,
			edits: []edit{set(mc+".securityContext.procMount", "Default")}},
		{name: "unconfined seccomp on the container", m: plain,
			edits: []edit{set(mc+".securityContext.seccompProfile", map[string]interface{}{"type": "Unconfined"})},
			want:  []string{mc + ".securityContext.seccompProfile.type"}},
		{name: "a node's seccomp profile on the container", m: plain,
			edits: []edit{set(mc+".securityContext.seccompProfile", map[string]interface{}{"type": "Localhost", "localhostProfile": "memcached.json"})}},
		{name: "SELinux options on the container", m: plain,
			edits: []edit{set(mc+".securityContext.seLinuxOptions", map[string]interface{}{"type": "spc_t"})},
			want:  []string{mc + ".securityContext.seLinuxOptions"}},
		{name: "unconfined AppArmor on the container", m: plain,
			edits: []edit{set(mc+".securityContext.appArmorProfile", map[string]interface{}{"type": "Unconfined"})},
			want:  []string{mc + ".securityContext.appArmorProfile.type"}},
		{name: "Windows host process container", m: plain,
			edits: []edit{set(mc+".securityContext.windowsOptions", map[string]interface{}{"hostProcess": true})},
			want:  []string{mc + ".securityContext.windowsOptions.hostProcess"}},
		{name: "host port", m: plain,
			edits: []edit{set(mc+".ports", []interface{}{map[string]interface{}{"name": "memcached", "containerPort": int64(11211), "hostPort": int64(11211)}})},
			want:  []string{mc + ".ports[memcached].hostPort"}},
		{name: "security context removed", m: plain,
			edits: []edit{set(mc+".securityContext", nil)},
			want: []string{
				mc + ".securityContext.allowPrivilegeEscalation", mc + ".securityContext.capabilities.drop", mc + ".securityContext.readOnlyRootFilesystem",
			}},
		{name: "the sidecar privileged", m: tls,
			edits: []edit{set("containers[sidecar].securityContext.privileged", true)},
			want:  []string{"containers[sidecar].securityContext.privileged"}},
		{name: "an added container as restricted as the operator's", m: plain,
			edits: []edit{appendTo("containers", restricted("debug"))}},
		{name: "an added privileged container", m: plain,
			edits: []edit{appendTo("containers", with(restricted("debug"), "securityContext.privileged", true))},
			want:  []string{"containers[debug].securityContext.privileged"}},
		{name: "an added container with no security context", m: plain,
			edits: []edit{appendTo("containers", map[string]interface{}{"name": "debug", "image": "busybox"})},
			want: []string{
				"containers[debug].securityContext.allowPrivilegeEscalation", "containers[debug].securityContext.capabilities.drop", "containers[debug].securityContext.readOnlyRootFilesystem",
			}},
		{name: "an added init container that escalates", m: plain,
			edits: []edit{appendTo("initContainers", with(restricted("setup"), "securityContext.allowPrivilegeEscalation", true))},
			want:  []string{"initContainers[setup].securityContext.allowPrivilegeEscalation"}},
		{name: "an added container without a name", m: plain,
			edits: []edit{appendTo("containers", with(restricted(""), "securityContext.capabilities.add", []interface{}{"SYS_ADMIN"}))},
			want:  []string{"containers[1].securityContext.capabilities.add"}},
		{name: "host namespaces", m: plain,
			edits: []edit{set("hostNetwork", true), set("hostPID", true), set("hostIPC", true)},
			want:  []string{"hostIPC", "hostNetwork", "hostPID"}},
		{name: "host namespaces off", m: plain,
			edits: []edit{set("hostNetwork", false), set("hostUsers", true)}},
		{name: "the host's user namespace", m: plain,
			edits: []edit{set("hostUsers", false)},
			want:  []string{"hostUsers"}},
		{name: "a host path volume", m: plain,
			edits: []edit{appendTo("volumes", map[string]interface{}{"name": "root", "hostPath": map[string]interface{}{"path": "/"}})},
			want:  []string{"volumes[root].hostPath"}},
		{name: "an empty dir volume", m: plain,
			edits: []edit{appendTo("volumes", map[string]interface{}{"name": "scratch", "emptyDir": map[string]interface{}{}})}},
		{name: "pod runAsNonRoot false", m: plain,
			edits: []edit{set("securityContext.runAsNonRoot", false)},
			want:  []string{"securityContext.runAsNonRoot"}},
		{name: "pod root user and group", m: plain,
			edits: []edit{set("securityContext.runAsUser", int64(0)), set("securityContext.runAsGroup", int64(0))},
			want:  []string{"securityContext.runAsGroup", "securityContext.runAsUser"}},
		{name: "root's group as fsGroup or a supplemental group", m: plain,
			edits: []edit{set("securityContext.fsGroup", int64(0)), set("securityContext.supplementalGroups", []interface{}{int64(5), int64(0)})},
			want:  []string{"securityContext.fsGroup", "securityContext.supplementalGroups"}},
		{name: "pod seccomp unconfined", m: plain,
			edits: []edit{set("securityContext.seccompProfile", map[string]interface{}{"type": "Unconfined"})},
			want:  []string{"securityContext.seccompProfile.type"}},
		{name: "pod seccomp removed", m: plain,
			edits: []edit{set("securityContext.seccompProfile", nil)},
			want:  []string{"securityContext.seccompProfile"}},
		{name: "pod seccomp removed, every container with its own", m: plain,
			edits: []edit{set("securityContext.seccompProfile", nil), set(mc+".securityContext.seccompProfile", map[string]interface{}{"type": "RuntimeDefault"})}},
		{name: "pod SELinux options", m: plain,
			edits: []edit{set("securityContext.seLinuxOptions", map[string]interface{}{"type": "spc_t"})},
			want:  []string{"securityContext.seLinuxOptions"}},
		{name: "sysctls", m: plain,
			edits: []edit{set("securityContext.sysctls", []interface{}{map[string]interface{}{"name": "kernel.msgmax", "value": "65536"}})},
			want:  []string{"securityContext.sysctls"}},
		{name: "pod AppArmor unconfined", m: plain,
			edits: []edit{set("securityContext.appArmorProfile", map[string]interface{}{"type": "Unconfined"})},
			want:  []string{"securityContext.appArmorProfile.type"}},
		{name: "pod AppArmor runtime default", m: plain,
			edits: []edit{set("securityContext.appArmorProfile", map[string]interface{}{"type": "RuntimeDefault"})}},
		{name: "Windows host process pod", m: plain,
			edits: []edit{set("securityContext.windowsOptions", map[string]interface{}{"hostProcess": true})},
			want:  []string{"securityContext.windowsOptions.hostProcess"}},
		{name: "AppArmor annotation unconfined", m: plain,
			edits: []edit{func(template map[string]interface{}) {
				template["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})["container.apparmor.security.beta.kubernetes.io/memcached"] = "unconfined"
			}},
			want: []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/memcached]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			template := operatorTemplate(t, tt.m)
			for _, e := range tt.edits {
				e(template)
			}
			if got := memcached.LooserSecurity(template); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLooserSecurityIsBounded: however many containers someone adds, the
// list holds at most 16 findings, the last saying how many more there are,
// and no finding holds the annotation's separator.
func TestLooserSecurityIsBounded(t *testing.T) {
	template := operatorTemplate(t, memcachedtest.NewMemcached("example", 1))
	for i := 0; i < 40; i++ {
		appendTo("containers", map[string]interface{}{"name": fmt.Sprintf("c,%d", i), "securityContext": map[string]interface{}{"privileged": true}})(template)
	}
	got := memcached.LooserSecurity(template)
	if len(got) != 16 || got[15] != "and 145 more" {
		t.Fatalf("got %d findings ending %q, want 16 ending \"and 145 more\"", len(got), got[len(got)-1])
	}
	for _, f := range got {
		if strings.Contains(f, ",") {
			t.Errorf("finding %q holds a comma", f)
		}
	}
	if back := memcached.Loosened(&appsv1.Deployment{}); back != nil {
		t.Errorf("Loosened of no annotation: got %q, want nil", back)
	}
}

// TestPutBackPodSpec: the patch tests the UID, sets the pod spec whole and
// the operator's template annotations, removes a record annotation the
// manifest lacks and the AppArmor annotations the findings name, and
// leaves others' annotations alone.
func TestPutBackPodSpec(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}
	if err := memcached.RecordSpec(u, m); err != nil {
		t.Fatal(err)
	}
	live := memcachedtest.PacedDeployment(m, 2)
	patch, err := memcached.PutBackPodSpec(live, u.Object, []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/memcached]", "hostPID"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]interface{}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ops {
		got = append(got, fmt.Sprint(op["op"], " ", op["path"]))
	}
	want := []string{
		"test /metadata/uid",
		"remove /spec/template/metadata/annotations/cache.example.com~1paced-roll",
		"add /spec/template/metadata/annotations/cache.example.com~1spec-hash",
		"add /spec/template/metadata/annotations/cache.example.com~1template-hash",
		"remove /spec/template/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1memcached",
		"add /spec/template/spec",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if ops[0]["value"] != string(live.UID) {
		t.Errorf("test: got %v, want %s", ops[0]["value"], live.UID)
	}

	bare := live.DeepCopy()
	bare.Spec.Template.Annotations = nil
	patch, err = memcached.PutBackPodSpec(bare, u.Object, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), `"path":"/spec/template/metadata/annotations","value":{"cache.example.com/spec-hash":`) {
		t.Errorf("a template without the operator's annotations: got %s, want them set whole", patch)
	}
}

func TestLoosenedSummary(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{name: "one", in: []string{"hostPID"}, want: "hostPID"},
		{name: "four", in: []string{"a", "b", "c", "d"}, want: "a, b, c, d"},
		{name: "six", in: []string{"a", "b", "c", "d", "e", "f"}, want: "a, b, c, d and 2 more"},
		{name: "bounded", in: []string{"a", "b", "c", "d", "e", "and 10 more"}, want: "a, b, c, d and 11 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memcached.LoosenedSummary(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
