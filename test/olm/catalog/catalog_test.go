package catalog

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var deployDir = filepath.Join("..", "..", "..", "deploy")

func loadDeploy(t *testing.T) *Deploy {
	t.Helper()
	d, err := LoadDeploy(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRenderTakesPermissionsAndDeploymentFromDeploy(t *testing.T) {
	d := loadDeploy(t)
	original := d.Deployment.DeepCopy()
	csv, err := Render(d, "0.0.2", "0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Deployment, original) {
		t.Errorf("Render modified the Deployment it was given")
	}
	strategy := csv.Spec.InstallStrategy.StrategySpec
	if got, want := strategy.Permissions, []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: d.ServiceAccount.Name, Rules: d.Role.Rules}}; !reflect.DeepEqual(got, want) {
		t.Errorf("permissions: got %+v, want %+v", got, want)
	}
	if len(strategy.ClusterPermissions) != 0 {
		t.Errorf("clusterPermissions: got %+v, want none", strategy.ClusterPermissions)
	}
	if len(strategy.DeploymentSpecs) != 1 {
		t.Fatalf("deployments: got %d, want 1", len(strategy.DeploymentSpecs))
	}
	dep := strategy.DeploymentSpecs[0]
	if dep.Name != d.Deployment.Name || !reflect.DeepEqual(dep.Spec.Selector, d.Deployment.Spec.Selector) {
		t.Errorf("deployment: got %s %v, want %s %v", dep.Name, dep.Spec.Selector, d.Deployment.Name, d.Deployment.Spec.Selector)
	}

	// Apart from the image and WATCH_NAMESPACE, the spec is operator.yaml's.
	want := d.Deployment.Spec.DeepCopy()
	c := &want.Template.Spec.Containers[containerIndex(want.Template.Spec.Containers, d.Deployment.Name)]
	c.Image = "quay.io/example/memcached-operator:v0.0.2"
	for i := range c.Env {
		if c.Env[i].Name == "WATCH_NAMESPACE" {
			c.Env[i].ValueFrom.FieldRef.FieldPath = "metadata.annotations['olm.targetNamespaces']"
		}
	}
	if !reflect.DeepEqual(dep.Spec, *want) {
		t.Errorf("deployment spec:\ngot  %+v\nwant %+v", dep.Spec, *want)
	}
}

func TestRenderIdentityAndUpgrade(t *testing.T) {
	d := loadDeploy(t)
	tests := []struct {
		version, replaces string
		wantName          string
		wantReplaces      string
		wantImage         string
	}{
		{"0.0.1", "", "memcachedoperator.v0.0.1", "", "quay.io/example/memcached-operator:v0.0.1"},
		{"0.0.2", "0.0.1", "memcachedoperator.v0.0.2", "memcachedoperator.v0.0.1", "quay.io/example/memcached-operator:v0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			csv, err := Render(d, tt.version, tt.replaces)
			if err != nil {
				t.Fatal(err)
			}
			if csv.Name != tt.wantName || csv.Spec.Replaces != tt.wantReplaces || csv.Spec.Version.String() != tt.version {
				t.Errorf("got name %q replaces %q version %q, want %q %q %q",
					csv.Name, csv.Spec.Replaces, csv.Spec.Version, tt.wantName, tt.wantReplaces, tt.version)
			}
			container := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
			if container.Image != tt.wantImage || csv.Annotations["containerImage"] != tt.wantImage {
				t.Errorf("got image %q (annotation %q), want %q", container.Image, csv.Annotations["containerImage"], tt.wantImage)
			}
			// Every release names operator.yaml's sidecar image, the sidecar's own
			// release: one tagged with the CSV's version would roll the pods of every
			// Memcached with TLS or monitoring on each upgrade.
			if got, want := envValue(container.Env, SidecarImageEnv), envValue(d.Deployment.Spec.Template.Spec.Containers[0].Env, SidecarImageEnv); got != want || got == "" {
				t.Errorf("got %s %q, want operator.yaml's %q", SidecarImageEnv, got, want)
			}
		})
	}
}

// TestDescriptionSaysUpgradesArePaced checks that the CSV's description, which the console
// shows before an install or upgrade, tells that an upgrade restarts no pod unless it changes
// their template, and that such a roll is paced by --max-concurrent-rolls, which the
// Subscription can set through MAX_CONCURRENT_ROLLS.
func TestDescriptionSaysUpgradesArePaced(t *testing.T) {
	csv, err := Render(loadDeploy(t), "0.0.2", "0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"never restarted, unless the new release changes the pod template", "the roll is paced",
		"`--max-concurrent-rolls`", "`MAX_CONCURRENT_ROLLS`", "`spec.config.env`", "sidecar"} {
		if !strings.Contains(strings.Join(strings.Fields(csv.Spec.Description), " "), want) {
			t.Errorf("the description does not say %q:\n%s", want, csv.Spec.Description)
		}
	}
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestRenderInstallModes checks that every CSV supports the four install modes; the
// permissions, without clusterPermissions (TestRenderTakesPermissionsAndDeploymentFromDeploy),
// serve them all, since OLM copies or lifts them to the target namespaces (see installModes).
func TestRenderInstallModes(t *testing.T) {
	csv, err := Render(loadDeploy(t), "0.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[v1alpha1.InstallModeType]bool{}
	for _, m := range csv.Spec.InstallModes {
		got[m.Type] = m.Supported
	}
	want := map[v1alpha1.InstallModeType]bool{
		v1alpha1.InstallModeTypeOwnNamespace:    true,
		v1alpha1.InstallModeTypeSingleNamespace: true,
		v1alpha1.InstallModeTypeMultiNamespace:  true,
		v1alpha1.InstallModeTypeAllNamespaces:   true,
	}
	if !reflect.DeepEqual(got, want) || len(csv.Spec.InstallModes) != len(want) {
		t.Errorf("got %v, want %v", csv.Spec.InstallModes, want)
	}
}

func TestRenderDescribesRealCRDFields(t *testing.T) {
	csv, err := Render(loadDeploy(t), "0.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	owned := csv.Spec.CustomResourceDefinitions.Owned
	if len(owned) != 1 || owned[0].Name != "memcacheds.cache.example.com" || owned[0].Version != "v1alpha1" || owned[0].Kind != "Memcached" {
		t.Fatalf("owned CRDs: got %+v", owned)
	}
	got := owned[0].SpecDescriptors
	if len(got) == 0 || got[0].Path != "size" || !reflect.DeepEqual(got[0].XDescriptors, []string{xPodCount}) {
		t.Errorf("spec descriptors: got %+v, want size first, as a pod count", got)
	}
	var specPaths []string
	for _, s := range got {
		specPaths = append(specPaths, s.Path)
		if s.Description == "" {
			t.Errorf("spec descriptor %s has no description", s.Path)
		}
	}
	if want := []string{"size", "image", "resources", "memoryMB", "priorityClassName"}; !reflect.DeepEqual(specPaths, want) {
		t.Errorf("spec descriptors: got %v, want %v", specPaths, want)
	}
	var paths []string
	for _, s := range owned[0].StatusDescriptors {
		paths = append(paths, s.Path)
		if s.Description == "" {
			t.Errorf("status descriptor %s has no description", s.Path)
		}
	}
	if !reflect.DeepEqual(paths, []string{"nodes", "readyReplicas", "serviceName", "conditions"}) {
		t.Errorf("status descriptors: got %v", paths)
	}
}

func TestRenderRejectsInconsistentDeploy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *Deploy)
		want   string
	}{
		{"deployment runs as another account", func(d *Deploy) { d.Deployment.Spec.Template.Spec.ServiceAccountName = "default" }, "runs as service account"},
		{"binding to another role", func(d *Deploy) { d.RoleBinding.RoleRef.Name = "admin" }, "refers to Role"},
		{"binding another account", func(d *Deploy) { d.RoleBinding.Subjects[0].Name = "someone" }, "does not bind"},
		{"no WATCH_NAMESPACE", func(d *Deploy) {
			d.Deployment.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "y"}}
		}, "does not set WATCH_NAMESPACE"},
		{"no POD_NAMESPACE", func(d *Deploy) {
			c := &d.Deployment.Spec.Template.Spec.Containers[0]
			var env []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name != "POD_NAMESPACE" {
					env = append(env, e)
				}
			}
			c.Env = env
		}, "does not set POD_NAMESPACE from metadata.namespace"},
		{"container renamed", func(d *Deploy) { d.Deployment.Spec.Template.Spec.Containers[0].Name = "manager" }, "no container named"},
		{"descriptor field missing", func(d *Deploy) {
			delete(d.CRD.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties, "nodes")
		}, "status.nodes is not in the schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := loadDeploy(t)
			tt.mutate(d)
			_, err := Render(d, "0.0.2", "0.0.1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRenderRejectsBadVersions(t *testing.T) {
	tests := []struct{ version, replaces string }{
		{"0.0.2", "0.0.2"},
		{"0.0.1", "0.0.2"},
		{"v0.0.2", ""},
		{"0.0.2", "latest"},
	}
	d := loadDeploy(t)
	for _, tt := range tests {
		if _, err := Render(d, tt.version, tt.replaces); err == nil {
			t.Errorf("Render(%q, %q): got no error", tt.version, tt.replaces)
		}
	}
}

func TestMarshalRoundTripsStrictly(t *testing.T) {
	csv, err := Render(loadDeploy(t), "0.0.2", "0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(csv)
	if err != nil {
		t.Fatal(err)
	}
	for _, noise := range []string{"status:", "creationTimestamp", "cleanup:", "apiservicedefinitions:", "namespace:"} {
		if strings.Contains(string(out), noise) {
			t.Errorf("rendered CSV contains %q", noise)
		}
	}
	var back v1alpha1.ClusterServiceVersion
	if err := yaml.UnmarshalStrict(out, &back); err != nil {
		t.Fatalf("rendered CSV does not decode strictly: %v", err)
	}
	if !reflect.DeepEqual(back.Spec.InstallStrategy, csv.Spec.InstallStrategy) {
		t.Errorf("install strategy changed in the round trip")
	}
}

func TestPackagePointsAtNewestRelease(t *testing.T) {
	tests := []struct {
		versions []string
		want     string
	}{
		{[]string{"0.0.1"}, "memcachedoperator.v0.0.1"},
		{[]string{"0.0.2", "0.0.1"}, "memcachedoperator.v0.0.2"},
		{[]string{"0.0.10", "0.0.9"}, "memcachedoperator.v0.0.10"},
	}
	for _, tt := range tests {
		pkg, err := Package(tt.versions)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkg.Channels) != 1 || pkg.Channels[0].Name != "alpha" || pkg.Channels[0].CurrentCSVName != tt.want || pkg.DefaultChannelName != "alpha" {
			t.Errorf("Package(%v): got %+v, want alpha -> %s", tt.versions, pkg, tt.want)
		}
	}
}
