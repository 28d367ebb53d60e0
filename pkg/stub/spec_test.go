package stub

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// withMemoryLimit returns resources with only a memory limit.
func withMemoryLimit(limit string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
}

func int32p(v int32) *int32 { return &v }

func TestCacheMB(t *testing.T) {
	tests := []struct {
		name      string
		resources *corev1.ResourceRequirements
		memoryMB  *int32
		want      int32
	}{
		{name: "default resources", want: 64},
		{name: "derived from 256Mi", resources: withMemoryLimit("256Mi"), want: 176},
		{name: "derived from 1Gi", resources: withMemoryLimit("1Gi"), want: 848},
		{name: "derived from 1G, not a whole number of MiB", resources: withMemoryLimit("1G"), want: 786},
		{name: "derived from the smallest limit", resources: withMemoryLimit("64Mi"), want: 8},
		{name: "no memory limit", resources: &corev1.ResourceRequirements{}, want: 64},
		{name: "explicit", resources: withMemoryLimit("1Gi"), memoryMB: int32p(100), want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemcached("example", 1)
			m.Spec.Resources, m.Spec.MemoryMB = tt.resources, tt.memoryMB
			if got := cacheMB(m); got != tt.want {
				t.Errorf("cacheMB: got %d, want %d", got, tt.want)
			}
			if err := validateSpec(m); err != nil {
				t.Errorf("validateSpec: %v, want the spec valid", err)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		name      string
		extraArgs []string
		resources *corev1.ResourceRequirements
		memoryMB  *int32
		wantErr   string
	}{
		{name: "allowed options", extraArgs: []string{"--conn-limit=2048", "--threads=2", "--extended=hashpower=20,no_lru_crawler", "--disable-cas"}},
		{name: "largest cache that fits", resources: withMemoryLimit("256Mi"), memoryMB: int32p(176)},
		{name: "short option", extraArgs: []string{"-c", "10"}, wantErr: `"-c" is not one of`},
		{name: "port", extraArgs: []string{"--port=1"}, wantErr: `"--port=1"`},
		{name: "memory", extraArgs: []string{"--memory-limit=10"}, wantErr: `"--memory-limit=10"`},
		{name: "daemon", extraArgs: []string{"--daemon"}, wantErr: `"--daemon"`},
		{name: "two options in one", extraArgs: []string{"--threads=2 --port=1"}, wantErr: `"--threads=2 --port=1"`},
		{name: "flag with a value", extraArgs: []string{"--disable-cas=yes"}, wantErr: `"--disable-cas=yes"`},
		{name: "option without a value", extraArgs: []string{"--threads"}, wantErr: `"--threads"`},
		{name: "cache one MiB too large", resources: withMemoryLimit("256Mi"), memoryMB: int32p(177), wantErr: "spec.memoryMB 177 does not fit the memory limit 256Mi: at most 176"},
		{name: "limit too small", resources: withMemoryLimit("32Mi"), wantErr: "below 64Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemcached("example", 1)
			m.Spec.ExtraArgs, m.Spec.Resources, m.Spec.MemoryMB = tt.extraArgs, tt.resources, tt.memoryMB
			err := validateSpec(m)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want the spec valid", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCRDHasTheSameRules checks that deploy/crd.yaml refuses extra arguments
// with the very pattern the operator checks, so that the two never drift.
func TestCRDHasTheSameRules(t *testing.T) {
	crd, err := os.ReadFile("../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "self.matches('" + extraArgPattern + "')"; !strings.Contains(string(crd), want) {
		t.Errorf("deploy/crd.yaml has no rule %s", want)
	}
	if want := "quantity('" + minMemoryLimit + "')"; !strings.Contains(string(crd), want) {
		t.Errorf("deploy/crd.yaml has no rule with %s", want)
	}
	if want := "(self.memoryMB + 48) * 8 * 1048576 <= quantity(string(self.resources.limits['memory'])).asInteger() * 7"; !strings.Contains(string(crd), want) ||
		memcachedOverheadMB != 48 || mebibyte != 1048576 {
		t.Errorf("deploy/crd.yaml has no rule %s, the one derivedCacheMB follows", want)
	}
}

func TestSpecFieldsReachThePodTemplate(t *testing.T) {
	m := newMemcached("example", 2)
	m.Spec.Image = "registry.local/memcached:1.6.99"
	m.Spec.Resources = withMemoryLimit("256Mi")
	m.Spec.ExtraArgs = []string{"--threads=2", "--conn-limit=77"}
	m.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	m.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
	m.Spec.PriorityClassName = "high"

	spec := newDeploymentForMemcached(m, testImage).Spec.Template.Spec

	c := spec.Containers[0]
	if c.Image != m.Spec.Image {
		t.Errorf("image: got %s, want %s", c.Image, m.Spec.Image)
	}
	if want := []string{"memcached", "--threads=2", "--conn-limit=77", "-m", "176", "-p", "11211", "-v"}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command: got %v, want %v: extra arguments first, so the operator's options win", c.Command, want)
	}
	if !reflect.DeepEqual(c.Resources, *m.Spec.Resources) {
		t.Errorf("resources: got %+v, want %+v", c.Resources, *m.Spec.Resources)
	}
	if !reflect.DeepEqual(spec.NodeSelector, m.Spec.NodeSelector) || !reflect.DeepEqual(spec.Tolerations, m.Spec.Tolerations) ||
		spec.PriorityClassName != "high" {
		t.Errorf("placement: got %v %v %q, want the spec's", spec.NodeSelector, spec.Tolerations, spec.PriorityClassName)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != terminationGracePeriod {
		t.Errorf("terminationGracePeriodSeconds: got %v, want %d", spec.TerminationGracePeriodSeconds, terminationGracePeriod)
	}
}

func TestDeploymentStrategyRollsOnePodAtATime(t *testing.T) {
	s := newDeploymentForMemcached(newMemcached("example", 3), testImage).Spec.Strategy
	if s.RollingUpdate == nil || *s.RollingUpdate.MaxSurge != intstr.FromInt(1) || *s.RollingUpdate.MaxUnavailable != intstr.FromInt(0) {
		t.Errorf("strategy: got %+v, want a rolling update with maxSurge 1 and maxUnavailable 0", s)
	}
}

// manifestHash returns the template hash deploymentManifest gives m.
func manifestHash(t *testing.T, m *v1alpha1.Memcached, image string) string {
	t.Helper()
	u, err := deploymentManifest(newDeploymentForMemcached(m, image))
	if err != nil {
		t.Fatal(err)
	}
	h := manifestTemplateHash(u)
	if h == "" {
		t.Fatalf("the manifest's pod template has no %s", templateHashAnnotation)
	}
	return h
}

func TestTemplateHashFollowsThePodTemplateOnly(t *testing.T) {
	base := newMemcached("example", 2)
	tests := []struct {
		name     string
		change   func(m *v1alpha1.Memcached)
		image    string
		wantSame bool
	}{
		{name: "nothing", change: func(*v1alpha1.Memcached) {}, wantSame: true},
		{name: "size", change: func(m *v1alpha1.Memcached) { m.Spec.Size = 5 }, wantSame: true},
		{name: "status", change: func(m *v1alpha1.Memcached) { m.Status.Nodes = []string{"a"} }, wantSame: true},
		{name: "image", change: func(m *v1alpha1.Memcached) { m.Spec.Image = "other:1" }},
		{name: "operator's default image", change: func(*v1alpha1.Memcached) {}, image: "other:2"},
		{name: "memory", change: func(m *v1alpha1.Memcached) { m.Spec.MemoryMB = int32p(32) }},
		{name: "resources", change: func(m *v1alpha1.Memcached) { m.Spec.Resources = withMemoryLimit("1Gi") }},
		{name: "extra args", change: func(m *v1alpha1.Memcached) { m.Spec.ExtraArgs = []string{"--threads=8"} }},
		{name: "node selector", change: func(m *v1alpha1.Memcached) { m.Spec.NodeSelector = map[string]string{"a": "b"} }},
		{name: "tolerations", change: func(m *v1alpha1.Memcached) {
			m.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}},
		{name: "priority class", change: func(m *v1alpha1.Memcached) { m.Spec.PriorityClassName = "high" }},
	}
	want := manifestHash(t, base, testImage)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base.DeepCopy()
			tt.change(m)
			image := testImage
			if tt.image != "" {
				image = tt.image
			}
			if got := manifestHash(t, m, image); (got == want) != tt.wantSame {
				t.Errorf("hash %s against %s: same = %v, want %v", got, want, got == want, tt.wantSame)
			}
		})
	}
}

func TestDeploymentManifestAddsModernPodFields(t *testing.T) {
	m := newMemcached("example", 2)
	u, err := deploymentManifest(newDeploymentForMemcached(m, testImage))
	if err != nil {
		t.Fatal(err)
	}
	spread, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "topologySpreadConstraints")
	want := []interface{}{map[string]interface{}{
		"maxSkew":           int64(1),
		"topologyKey":       "kubernetes.io/hostname",
		"whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector":     map[string]interface{}{"matchLabels": map[string]interface{}{"app": "memcached", "memcached_cr": "example"}},
		"matchLabelKeys":    []interface{}{"pod-template-hash"},
	}}
	if !reflect.DeepEqual(spread, want) {
		t.Errorf("topologySpreadConstraints: got %v, want %v", spread, want)
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	sleep, _, _ := unstructured.NestedInt64(containers[0].(map[string]interface{}), "lifecycle", "preStop", "sleep", "seconds")
	if sleep != preStopSleepSeconds {
		t.Errorf("preStop sleep: got %d, want %d", sleep, preStopSleepSeconds)
	}
}

func TestTemplatePatchSetsTemplateAndStrategyWhole(t *testing.T) {
	m := newMemcached("example", 2)
	u, err := deploymentManifest(newDeploymentForMemcached(m, testImage))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := templatePatch("uid-1", u)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]interface{}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0]["op"] != "test" || ops[0]["path"] != "/metadata/uid" || ops[0]["value"] != "uid-1" ||
		ops[1]["op"] != "add" || ops[1]["path"] != "/spec/strategy" || ops[2]["op"] != "add" || ops[2]["path"] != "/spec/template" {
		t.Fatalf("patch: got %s, want a test of the UID, then adds of /spec/strategy and /spec/template", patch)
	}
	template := ops[2]["value"].(map[string]interface{})
	hash, _, _ := unstructured.NestedString(template, "metadata", "annotations", templateHashAnnotation)
	if hash != manifestHash(t, m, testImage) {
		t.Errorf("patched template hash: got %q, want the manifest's", hash)
	}
}

func TestJSONPatchSet(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]interface{}
		want   string
	}{
		{
			name:   "test the UID, then set and remove in path order",
			values: map[string]interface{}{"/b": map[string]interface{}{"x": "y"}, "/a": nil},
			want:   `[{"op":"test","path":"/metadata/uid","value":"uid-1"},{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":{"x":"y"}}]`,
		},
		{
			name:   "nothing to set still tests the UID",
			values: nil,
			want:   `[{"op":"test","path":"/metadata/uid","value":"uid-1"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonPatchSet("uid-1", tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewServiceForMemcached(t *testing.T) {
	m := newMemcached("example", 3)
	s := newServiceForMemcached(m)
	if s.Name != "example" || s.Namespace != "test" || !reflect.DeepEqual(s.Labels, labelsForMemcached("example")) {
		t.Errorf("metadata: got %s/%s %v", s.Namespace, s.Name, s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != m.UID || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references: got %+v, want one controller reference to the memcached", s.OwnerReferences)
	}
	if s.Spec.ClusterIP != "None" || !reflect.DeepEqual(s.Spec.Selector, labelsForMemcached("example")) {
		t.Errorf("spec: got clusterIP %q selector %v, want a headless Service selecting the pods", s.Spec.ClusterIP, s.Spec.Selector)
	}
	want := []corev1.ServicePort{{Name: "memcached", Port: 11211, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP}}
	if !reflect.DeepEqual(s.Spec.Ports, want) {
		t.Errorf("ports: got %+v, want %+v", s.Spec.Ports, want)
	}
}

func TestNewPodDisruptionBudgetForMemcached(t *testing.T) {
	m := newMemcached("example", 3)
	p := newPodDisruptionBudgetForMemcached(m)
	if p.APIVersion != "policy/v1" || p.Kind != "PodDisruptionBudget" || p.Name != "example" {
		t.Errorf("identity: got %s %s %s", p.APIVersion, p.Kind, p.Name)
	}
	if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt(1) || p.Spec.MinAvailable != nil {
		t.Errorf("budget: got maxUnavailable %v minAvailable %v, want maxUnavailable 1 alone", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	if p.Spec.Selector == nil || !reflect.DeepEqual(p.Spec.Selector.MatchLabels, labelsForMemcached("example")) {
		t.Errorf("selector: got %v", p.Spec.Selector)
	}
	for size, want := range map[int32]bool{0: false, 1: false, 2: true, 100: true} {
		if got := wantsPodDisruptionBudget(newMemcached("example", size)); got != want {
			t.Errorf("size %d: wants a budget = %v, want %v", size, got, want)
		}
	}
}
