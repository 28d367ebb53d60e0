package memcached_test

import (
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNewDeploymentForMemcached(t *testing.T) {
	tests := []struct {
		name  string
		size  int32
		image string
	}{
		{name: "guide example", size: 3, image: "memcached:1.6-alpine"},
		{name: "scaled to zero", size: 0, image: "registry.local/memcached:1.6.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", tt.size)

			d := memcached.NewDeployment(m, tt.image, memcachedtest.SidecarImage)

			if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
				t.Errorf("TypeMeta: got %s %s, want apps/v1 Deployment", d.APIVersion, d.Kind)
			}
			if d.Name != m.Name || d.Namespace != m.Namespace {
				t.Errorf("name: got %s/%s, want %s/%s", d.Namespace, d.Name, m.Namespace, m.Name)
			}
			wantLabels := map[string]string{"app": "memcached", "memcached_cr": "example"}
			if !reflect.DeepEqual(d.Labels, wantLabels) {
				t.Errorf("labels: got %v, want %v", d.Labels, wantLabels)
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("selector %v does not equal template labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tt.size {
				t.Errorf("replicas: got %v, want %d", d.Spec.Replicas, tt.size)
			}
			if s := d.Spec.ProgressDeadlineSeconds; s == nil || *s != memcached.ProgressDeadlineSeconds {
				t.Errorf("progressDeadlineSeconds: got %v, want %d", s, memcached.ProgressDeadlineSeconds)
			}
			refs := d.OwnerReferences
			if len(refs) != 1 || refs[0].UID != m.UID || refs[0].Kind != v1alpha1.Kind ||
				refs[0].APIVersion != v1alpha1.APIVersion() || refs[0].Controller == nil || !*refs[0].Controller {
				t.Errorf("owner references: got %+v, want one controller reference to the memcached", refs)
			}
			containers := d.Spec.Template.Spec.Containers
			if len(containers) != 1 {
				t.Fatalf("containers: got %d, want 1", len(containers))
			}
			c := containers[0]
			if c.Image != tt.image {
				t.Errorf("image: got %s, want %s", c.Image, tt.image)
			}
			if want := []string{"memcached", "-m", "64", "-p", "11211", "-v"}; !reflect.DeepEqual(c.Command, want) {
				t.Errorf("command: got %v, want %v", c.Command, want)
			}
			if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("terminationMessagePolicy: got %q, want %q", c.TerminationMessagePolicy, corev1.TerminationMessageFallbackToLogsOnError)
			}
			if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 11211 || c.Ports[0].Name != "memcached" {
				t.Errorf("ports: got %+v, want 11211 named memcached", c.Ports)
			}
		})
	}
}

// joinedShortOption matches "-m=64", which getopt reads as option -m with
// the value "=64", not 64.
var joinedShortOption = regexp.MustCompile(`^-[A-Za-z]=`)

func TestMemcachedCommand(t *testing.T) {
	container := memcached.NewDeployment(memcachedtest.NewMemcached("example", 1), memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec.Containers[0]
	command := container.Command
	for _, arg := range command {
		if joinedShortOption.MatchString(arg) {
			t.Errorf("argument %q joins a short option to its value with '='; memcached would read %q", arg, arg[2:])
		}
	}
	tests := []struct {
		option string
		want   int
	}{
		{option: "-m", want: memcached.DefaultCacheMB},
		{option: "-p", want: memcached.MemcachedPort},
	}
	for _, tt := range tests {
		t.Run(tt.option, func(t *testing.T) {
			got, ok := optionValue(command, tt.option)
			if !ok {
				t.Fatalf("%v has no %s followed by a value", command, tt.option)
			}
			if n, err := strconv.Atoi(got); err != nil || n != tt.want {
				t.Errorf("%s: got %q, want %d", tt.option, got, tt.want)
			}
		})
	}
	limit := container.Resources.Limits[corev1.ResourceMemory]
	cache := resource.NewQuantity(memcached.DefaultCacheMB<<20, resource.BinarySI)
	if cache.Cmp(limit) >= 0 {
		t.Errorf("cache of %s does not fit the memory limit of %s", cache, &limit)
	}
}

// optionValue returns the argument that follows option in command.
func optionValue(command []string, option string) (string, bool) {
	for i, arg := range command[:len(command)-1] {
		if arg == option {
			return command[i+1], true
		}
	}
	return "", false
}

func TestNewDeploymentForMemcachedIsRestricted(t *testing.T) {
	spec := memcached.NewDeployment(memcachedtest.NewMemcached("example", 1), memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext: got %+v, want runAsNonRoot with a numeric non-zero user", psc)
	}
	sc := spec.Containers[0].SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext: got %+v, want allowPrivilegeEscalation=false", sc)
	}
	if sc == nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities: got %+v, want drop ALL", sc)
	}
}

func TestDeploymentManifest(t *testing.T) {
	d := memcached.NewDeployment(memcachedtest.NewMemcached("example", 2), memcachedtest.Image, memcachedtest.SidecarImage)

	u, err := memcached.DeploymentManifest(d)
	if err != nil {
		t.Fatalf("deploymentManifest: %v", err)
	}

	profile, _, err := unstructured.NestedString(u.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "type")
	if err != nil || profile != "RuntimeDefault" {
		t.Errorf("seccompProfile.type: got %q (%v), want RuntimeDefault", profile, err)
	}
	if u.GetAPIVersion() != "apps/v1" || u.GetKind() != "Deployment" || u.GetName() != "example" || u.GetNamespace() != "test" {
		t.Errorf("identity: got %s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
	}
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if replicas != 2 {
		t.Errorf("replicas: got %d, want 2", replicas)
	}
	if d.Spec.Template.Spec.SecurityContext.RunAsNonRoot == nil {
		t.Errorf("deploymentManifest changed its input")
	}
}

// TestLivenessWaitsLongerThanReadiness: an overloaded memcached must leave its
// Service long before the kubelet would restart it and lose its keys, so its
// liveness probe tolerates failed connects for far longer than its readiness
// probe, and for longer than a connect may take.
func TestLivenessWaitsLongerThanReadiness(t *testing.T) {
	c := memcached.NewDeployment(memcachedtest.NewMemcached("example", 1), memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec.Containers[0]
	r, l := c.ReadinessProbe, c.LivenessProbe
	if r == nil || l == nil || r.TCPSocket == nil || l.TCPSocket == nil {
		t.Fatalf("probes: readiness %+v, liveness %+v; want connects to memcached's port", r, l)
	}
	// How long memcached must fail each probe before the kubelet acts.
	tolerates := func(p *corev1.Probe) int32 { return p.FailureThreshold * p.PeriodSeconds }
	if tolerates(l) < 4*tolerates(r) {
		t.Errorf("liveness acts after %ds of failed connects, readiness after %ds: want liveness to wait at least 4 times as long", tolerates(l), tolerates(r))
	}
	if l.TimeoutSeconds <= r.TimeoutSeconds || l.TimeoutSeconds >= l.PeriodSeconds {
		t.Errorf("liveness timeout %ds: want more than readiness's %ds, and less than its period %ds", l.TimeoutSeconds, r.TimeoutSeconds, l.PeriodSeconds)
	}
}

// TestEveryContainerHasEphemeralStorage: the kubelet evicts a pod whose
// container writes more than its limit, and schedules by the request; every
// container the operator builds, in every kind of pod, names both.
func TestEveryContainerHasEphemeralStorage(t *testing.T) {
	for _, tt := range securityCases {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)
			spec := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				req, hasReq := c.Resources.Requests[corev1.ResourceEphemeralStorage]
				limit, hasLimit := c.Resources.Limits[corev1.ResourceEphemeralStorage]
				if !hasReq || !hasLimit || req.Cmp(limit) > 0 {
					t.Errorf("container %s: ephemeral-storage request %v (%v), limit %v (%v); want both, the request at most the limit", c.Name, req.String(), hasReq, limit.String(), hasLimit)
				}
				// The kubelet keeps up to 5 log files of 10 MiB of each
				// container by default: a limit below that evicts a
				// container for what the kubelet itself keeps.
				if hasLimit && limit.Cmp(resource.MustParse("64Mi")) < 0 {
					t.Errorf("container %s: ephemeral-storage limit %v is below the kubelet's default log retention", c.Name, limit.String())
				}
			}
		})
	}
}
