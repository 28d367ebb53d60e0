package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/version"
)

// templatesFileEnv, when set, names the file in which
// TestPodTemplateIgnoresTheOperatorVersion writes the pod templates that
// this test binary's defaults make, instead of comparing two builds: it is
// how the test reads what a build stamped with another release makes.
const templatesFileEnv = "MEMCACHED_OPERATOR_TEMPLATES_FILE"

// templatesOfBuild is what one build of the operator makes: its release and,
// by case, the pod template and template hash of the Deployment.
type templatesOfBuild struct {
	Version   string
	Templates map[string]builtTemplate
}

type builtTemplate struct {
	Hash     string
	Template map[string]interface{}
}

// TestPodTemplateIgnoresTheOperatorVersion builds this package's test
// binary twice, stamped with the releases 0.0.1 and 0.0.2 as
// tmp/build/build.sh stamps the operator (-X pkg/version.Version), and has
// each build make the Deployment of a plain, a TLS and a TLS + auth +
// monitoring Memcached from the operator's default flags. The pod templates
// (labels, annotations, images, env, everything) and their hashes must be
// identical: an operator upgrade that changes no builder then rolls no
// pod, whatever the Memcached runs. A default read at init, such as an
// image tagged with the operator's release, is caught too, which a
// change of version.Version at run time would miss.
func TestPodTemplateIgnoresTheOperatorVersion(t *testing.T) {
	if file := os.Getenv(templatesFileEnv); file != "" {
		writeTemplates(t, file)
		return
	}
	versions := []string{"0.0.1", "0.0.2"}
	builds := make([]templatesOfBuild, len(versions))
	dir := t.TempDir()
	for i, v := range versions {
		bin := filepath.Join(dir, "operator-"+v+".test")
		// The flags of tmp/build/build.sh, so that the build reuses its
		// compiled packages and only links again.
		build := exec.Command("go", "test", "-c", "-trimpath", "-o", bin,
			"-ldflags", "-X github.com/example-inc/memcached-operator/pkg/version.Version="+v, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go test -c stamped %s: %v\n%s", v, err, out)
		}
		file := filepath.Join(dir, "templates-"+v+".json")
		run := exec.Command(bin, "-test.run=^TestPodTemplateIgnoresTheOperatorVersion$")
		run.Env = append(os.Environ(), templatesFileEnv+"="+file)
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("the build stamped %s: %v\n%s", v, err, out)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &builds[i]); err != nil {
			t.Fatal(err)
		}
		if builds[i].Version != v {
			t.Fatalf("the build stamped %s reports release %q: the stamp did not take", v, builds[i].Version)
		}
	}
	first, second := builds[0], builds[1]
	if len(first.Templates) != len(templateCases()) {
		t.Fatalf("got %d templates, want %d", len(first.Templates), len(templateCases()))
	}
	for name, a := range first.Templates {
		b := second.Templates[name]
		if a.Hash == "" || a.Hash != b.Hash {
			t.Errorf("%s: template hash %q with %s, %q with %s; want one, the same", name, a.Hash, first.Version, b.Hash, second.Version)
		}
		if !reflect.DeepEqual(a.Template, b.Template) {
			t.Errorf("%s: the pod template differs between releases; lines only with %s:\n%s\nlines only with %s:\n%s",
				name, first.Version, onlyIn(a.Template, b.Template), second.Version, onlyIn(b.Template, a.Template))
		}
	}
}

// onlyIn returns the lines of a's indented JSON that b's lacks.
func onlyIn(a, b map[string]interface{}) string {
	ja, _ := json.MarshalIndent(a, "", "  ")
	jb, _ := json.MarshalIndent(b, "", "  ")
	inB := map[string]bool{}
	for _, l := range strings.Split(string(jb), "\n") {
		inB[l] = true
	}
	var out []string
	for _, l := range strings.Split(string(ja), "\n") {
		if !inB[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// templateCases are the Memcacheds whose templates must not depend on the
// operator's release: one without the sidecar, and two with it.
func templateCases() map[string]*v1alpha1.Memcached {
	plain := memcachedtest.NewMemcached("plain", 3)
	withTLS := memcachedtest.NewMemcached("tls", 2)
	withTLS.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "tls-cert"}
	full := memcachedtest.NewMemcached("full", 2)
	full.Spec.TLS = &v1alpha1.MemcachedTLS{SecretName: "full-cert", ClientCertificates: v1alpha1.ClientCertificatesRequired}
	full.Spec.Auth = &v1alpha1.MemcachedAuth{SecretName: "full-users"}
	full.Spec.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
	return map[string]*v1alpha1.Memcached{"plain": plain, "tls": withTLS, "tls+auth+monitoring": full}
}

// writeTemplates writes the templates that the operator's default flags
// make for templateCases into file, with this binary's release.
func writeTemplates(t *testing.T, file string) {
	opts, err := parseOptions(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out := templatesOfBuild{Version: version.Version, Templates: map[string]builtTemplate{}}
	for name, m := range templateCases() {
		u, err := memcached.DeploymentManifest(memcached.NewDeployment(m, opts.memcachedImage, opts.sidecarImage))
		if err != nil {
			t.Fatal(err)
		}
		template, _ := u.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})
		out.Templates[name] = builtTemplate{Hash: memcached.ManifestTemplateHash(u), Template: template}
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
