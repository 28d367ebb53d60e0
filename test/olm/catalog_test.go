// Package olm tests the operator's OLM catalog: that it is what deploy/ renders and that
// the Operator Framework's own validators accept it. That a real OLM installs and upgrades
// it on a real node is checked by test/realnode's TestPromisesAcrossFeatures.
package olm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"

	"github.com/example-inc/memcached-operator/test/olm/catalog"
)

var (
	repoRoot   = filepath.Join("..", "..")
	deployDir  = filepath.Join(repoRoot, "deploy")
	catalogDir = filepath.Join(deployDir, "olm-catalog", catalog.PackageName)
)

// knownWarnings are validator warnings that the catalog keeps on purpose, each with its reason
// (test/README.md, "Validation of the catalog", says the same). A warning not listed here fails the test.
var knownWarnings = map[string]string{
	`channel(s) ["alpha"] are not following the recommended naming convention`: "the getting-started " +
		"guide and its users subscribe to the alpha channel; renaming it would strand them",
}

// TestCatalogIsUpToDate renders every committed release from deploy/ into a temporary
// directory and fails when the committed catalog differs: the CSVs are generated, never edited.
func TestCatalogIsUpToDate(t *testing.T) {
	d, err := catalog.LoadDeploy(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := catalog.Regenerate(d, catalogDir, tmp); err != nil {
		t.Fatal(err)
	}
	diffs, err := catalog.Diff(catalogDir, tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("%s", d)
	}
	if len(diffs) > 0 {
		t.Logf("regenerate with: make olm-catalog VERSION=0.0.1 REPLACES= && make olm-catalog VERSION=0.0.2 REPLACES=0.0.1")
	}
}

// TestUpgradeGraph checks the release chain that OLM follows: the channel's head is the
// newest release, each release replaces the one before it, and every release keeps the
// operator Deployment's name and selector, so that OLM updates it in place.
func TestUpgradeGraph(t *testing.T) {
	versions, err := catalog.Versions(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0.0.1", "0.0.2"}; !reflect.DeepEqual(versions, want) {
		t.Fatalf("releases: got %v, want %v", versions, want)
	}
	pkg, bundles := loadCatalog(t)
	if got, want := pkg.Channels, []manifests.PackageChannel{{Name: "alpha", CurrentCSVName: "memcachedoperator.v0.0.2"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("channels: got %+v, want %+v", got, want)
	}
	if pkg.DefaultChannelName != "alpha" {
		t.Errorf("default channel: got %q, want alpha", pkg.DefaultChannelName)
	}

	byName := map[string]*manifests.Bundle{}
	for _, b := range bundles {
		byName[b.CSV.Name] = b
	}
	for i, v := range versions {
		b := byName[catalog.CSVName(v)]
		if b == nil {
			t.Fatalf("no bundle for CSV %s", catalog.CSVName(v))
		}
		wantReplaces := ""
		if i > 0 {
			wantReplaces = catalog.CSVName(versions[i-1])
		}
		if b.CSV.Spec.Replaces != wantReplaces {
			t.Errorf("%s replaces: got %q, want %q", b.CSV.Name, b.CSV.Spec.Replaces, wantReplaces)
		}
		if got := b.CSV.Spec.Version.String(); got != v {
			t.Errorf("%s version: got %q, want %q", b.CSV.Name, got, v)
		}
		deps := b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
		if len(deps) != 1 {
			t.Fatalf("%s: got %d deployments, want 1", b.CSV.Name, len(deps))
		}
		if got, want := deps[0].Spec.Template.Spec.Containers[0].Image, catalog.Image(v); got != want {
			t.Errorf("%s image: got %q, want %q", b.CSV.Name, got, want)
		}
		first := byName[catalog.CSVName(versions[0])].CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0]
		if deps[0].Name != first.Name || !reflect.DeepEqual(deps[0].Spec.Selector, first.Spec.Selector) {
			t.Errorf("%s deployment %s %v: want the name and selector of %s, %s %v",
				b.CSV.Name, deps[0].Name, deps[0].Spec.Selector, versions[0], first.Name, first.Spec.Selector)
		}
	}
}

// TestValidators runs the Operator Framework's validators on the package and on every bundle:
// package manifest, CSV, CRD and bundle (the defaults that `operator-sdk bundle validate`
// runs), OperatorHub (v2, capabilities and categories), good practices, and removed APIs for
// Kubernetes 1.37. Any error fails; a warning fails unless knownWarnings explains it.
func TestValidators(t *testing.T) {
	pkg, bundles := loadCatalog(t)
	report(t, "package", validation.PackageManifestValidator.Validate(pkg))

	validators := interfaces.Validators{
		validation.ClusterServiceVersionValidator,
		validation.CustomResourceDefinitionValidator,
		validation.BundleValidator,
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.AlphaDeprecatedAPIsValidator,
	}
	optional := map[string]string{"k8s-version": "1.37"}
	for _, b := range bundles {
		t.Run(b.CSV.Name, func(t *testing.T) {
			objs := append(b.ObjectsToValidate(), optional)
			report(t, b.CSV.Name, validators.Validate(objs...))
		})
	}
}

// TestValidatorsCatchBrokenBundles guards TestValidators against passing vacuously: the same
// validators must report errors for bundles broken the ways the guide's users broke theirs.
func TestValidatorsCatchBrokenBundles(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *manifests.Bundle)
		want   string
	}{
		{"no install modes", func(b *manifests.Bundle) { b.CSV.Spec.InstallModes = nil }, "install modes not found"},
		{"owned CRD missing from bundle", func(b *manifests.Bundle) { b.V1CRDs = nil }, "owned CRD"},
		{"example of an unknown kind", func(b *manifests.Bundle) {
			b.CSV.Annotations["alm-examples"] = `[{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcache","metadata":{"name":"x"}}]`
		}, "example must have a provided API"},
		{"icon without media type", func(b *manifests.Bundle) { b.CSV.Spec.Icon[0].MediaType = "" }, "mediatype"},
	}
	validators := interfaces.Validators{
		validation.ClusterServiceVersionValidator,
		validation.BundleValidator,
		validation.OperatorHubV2Validator,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, bundles := loadCatalog(t)
			b := bundles[len(bundles)-1]
			tt.mutate(b)
			var got []string
			for _, r := range validators.Validate(b.ObjectsToValidate()...) {
				for _, e := range r.Errors {
					got = append(got, e.Error())
				}
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("got errors %q, want one containing %q", got, tt.want)
			}
		})
	}
}

// loadCatalog loads the package manifest and each release's bundle directory the way OLM's
// tools do, the bundle loader also measuring the bundle's size, and gives each bundle the
// package and channels that the package manifest assigns to it (the package-manifest format
// records them only there).
func loadCatalog(t *testing.T) (*manifests.PackageManifest, []*manifests.Bundle) {
	t.Helper()
	pkg, _, err := manifests.GetManifestsDir(catalogDir)
	if err != nil {
		t.Fatalf("loading %s: %v", catalogDir, err)
	}
	if pkg == nil {
		t.Fatalf("loading %s: no package manifest", catalogDir)
	}
	versions, err := catalog.Versions(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	var bundles []*manifests.Bundle
	for _, v := range versions {
		b, err := manifests.GetBundleFromDir(filepath.Join(catalogDir, v))
		if err != nil {
			t.Fatalf("loading bundle %s: %v", v, err)
		}
		b.Package = pkg.PackageName
		b.DefaultChannel = pkg.DefaultChannelName
		b.Channels = nil
		for _, c := range pkg.Channels {
			b.Channels = append(b.Channels, c.Name)
		}
		bundles = append(bundles, b)
	}
	return pkg, bundles
}

// report fails t for every error and every unexplained warning in results.
func report(t *testing.T, what string, results []errors.ManifestResult) {
	t.Helper()
	for _, r := range results {
		for _, e := range r.Errors {
			t.Errorf("%s: %s error: %s", what, r.Name, e)
		}
		for _, w := range r.Warnings {
			if reason, ok := explained(w.Error()); ok {
				t.Logf("%s: %s known warning: %s (kept because %s)", what, r.Name, w, reason)
				continue
			}
			t.Errorf("%s: %s warning: %s", what, r.Name, w)
		}
	}
}

func explained(warning string) (string, bool) {
	for prefix, reason := range knownWarnings {
		if strings.Contains(warning, prefix) {
			return reason, true
		}
	}
	return "", false
}

// TestMain runs from the test module's olm directory; fail early and clearly elsewhere.
func TestMain(m *testing.M) {
	if _, err := os.Stat(filepath.Join(deployDir, "crd.yaml")); err != nil {
		panic("run the OLM tests from test/olm: " + err.Error())
	}
	os.Exit(m.Run())
}
