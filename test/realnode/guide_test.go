package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// guidePackage is the import path the guide's reader checks out under $GOPATH/src.
	guidePackage = "github.com/example-inc/memcached-operator"
	// guideNamespace is where a `kubectl create` without --namespace puts things.
	guideNamespace = "default"
	// guideMemcachedImage is the operator's default memcached image (stub.DefaultImage),
	// which deploy/operator.yaml does not override; the test checks that the pods ask
	// for it.
	guideMemcachedImage = "memcached:1.6-alpine"
	// guideCRD is deploy/crd.yaml's CustomResourceDefinition.
	guideCRD = "memcacheds.cache.example.com"
	// sdkBuildTimeout bounds operator-sdk build: go build, then docker build.
	sdkBuildTimeout = 10 * time.Minute
)

// TestGuideVerbatim types the getting-started guide's own commands, in the guide's
// order, as its reader does from $GOPATH/src/github.com/example-inc/memcached-operator:
//
//	operator-sdk generate k8s
//	operator-sdk build quay.io/example/memcached-operator:v0.0.1
//	docker push quay.io/example/memcached-operator:v0.0.1
//	kubectl create -f deploy/rbac.yaml -f deploy/crd.yaml -f deploy/operator.yaml
//	kubectl create -f <the two Memcacheds>
//
// It runs them on the suite's cluster and real node, with operator-sdk v0.0.7's own
// CLI (test/tools/operator-sdk) and a private Docker engine (test/scripts/dockerd.sh).
// Three things differ from the reader's machine, and none changes a command:
//   - the image is deploy/operator.yaml's (v0.0.2 where the guide said v0.0.1), in the
//     local registry: this machine cannot push to quay.io, and the node pulls quay.io
//     names from the local registry (test/scripts/node.sh), so the manifest runs as is;
//   - `kubectl create -f deploy/sa.yaml` comes first, as operator-sdk v0.0.7's layout
//     keeps the ServiceAccount in a file of its own;
//   - the operator's default memcached image (memcached:1.6-alpine on Docker Hub) is
//     the local build of Debian's memcached, pushed under that name for this test.
//
// It passes when both Memcacheds serve set and get from every pod on the real node,
// and the operator pods run the image that `operator-sdk build` made: the digest
// `docker push` printed, whose config is the image ID docker gave the build.
func TestGuideVerbatim(t *testing.T) {
	ctx := context.Background()
	if err := paths.RequireTools("operator-sdk", "deepcopy-gen"); err != nil {
		t.Fatal(err)
	}
	manifestImage := operatorManifestImage(t)
	registry, _, _ := strings.Cut(memcachedImage, "/")
	repo, ok := strings.CutPrefix(manifestImage, "quay.io/")
	if !ok {
		t.Fatalf("deploy/operator.yaml runs %s; the node mirrors only quay.io and docker.io names", manifestImage)
	}
	image := registry + "/" + repo
	// Each step below replaces an image in the shared registry; this puts back
	// what was there (the operator's catalog build), whatever happens.
	restoreTag(t, image)

	dockerEnv, release, err := framework.UseDockerd(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Errorf("stop dockerd: %v", err)
		}
	})

	gopath := filepath.Join(paths.Output(), "gopath")
	dir := guideCheckout(t, gopath)
	g := guideShell{t: t, dir: dir, env: guideEnv(t, gopath, dockerEnv)}

	out := g.run(ctx, time.Minute, "operator-sdk", "--version")
	if !strings.Contains(out, "operator-sdk version 0.0.7") {
		t.Fatalf("operator-sdk --version printed %q, want operator-sdk version 0.0.7", out)
	}

	t.Log("1. operator-sdk generate k8s: the generated deepcopy code is unchanged")
	generated := filepath.Join(dir, "pkg", "apis", "cache", "v1alpha1", "zz_generated.deepcopy.go")
	before := readFile(t, generated)
	g.run(ctx, 5*time.Minute, "operator-sdk", "generate", "k8s")
	if after := readFile(t, generated); !bytes.Equal(before, after) {
		t.Errorf("operator-sdk generate k8s changed %s (%d bytes before, %d after)", generated, len(before), len(after))
	}

	t.Logf("2. operator-sdk build %s", image)
	started := time.Now()
	out = g.run(ctx, sdkBuildTimeout, "operator-sdk", "build", image)
	// The binary the CLI builds is the one tmp/build/Dockerfile copies.
	binary := filepath.Join(dir, "tmp", "_output", "bin", "memcached-operator")
	if st, err := os.Stat(binary); err != nil || st.ModTime().Before(started) {
		t.Fatalf("operator-sdk build did not write %s (stat: %v)", binary, err)
	}
	built := regexp.MustCompile(`Successfully built ([0-9a-f]{12})\b`).FindStringSubmatch(out)
	if built == nil || !strings.Contains(out, "Successfully tagged "+image) {
		t.Fatalf("operator-sdk build printed no built and tagged %s image", image)
	}
	imageID := strings.TrimSpace(g.run(ctx, time.Minute, "docker", "image", "inspect", "--format", "{{.Id}}", image))
	if !strings.HasPrefix(imageID, "sha256:"+built[1]) {
		t.Fatalf("docker says %s is %s, operator-sdk build said it built %s", image, imageID, built[1])
	}

	t.Logf("3. docker push %s", image)
	out = g.run(ctx, 5*time.Minute, "docker", "push", image)
	pushed := regexp.MustCompile(`digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if pushed == nil {
		t.Fatalf("docker push printed no digest")
	}
	digest := pushed[1]
	if config := registryConfigDigest(t, image); config != imageID {
		t.Fatalf("the registry's %s has config %s, want the image operator-sdk build made (%s)", image, config, imageID)
	}
	mirrorDefaultMemcached(t, registry)

	t.Log("4. kubectl create -f deploy/sa.yaml; kubectl create -f deploy/rbac.yaml -f deploy/crd.yaml -f deploy/operator.yaml")
	k := cluster.Kubectl().WithNamespace(guideNamespace)
	if ns := strings.TrimSpace(g.run(ctx, time.Minute, "kubectl", "config", "view", "--minify", "-o", "jsonpath={..namespace}")); ns != "" && ns != guideNamespace {
		t.Fatalf("the kubeconfig's namespace is %q, want none (%s)", ns, guideNamespace)
	}
	// The reader's cluster has no Memcached CRD yet; the suite's has, from TestMain.
	// Deleting it also deletes every Memcached, and no other test runs now (the rest
	// are parallel and wait for the sequential ones).
	withoutCRD(t, k)
	t.Cleanup(func() {
		// deploy/crd.yaml stays: the suite's other tests use it.
		for _, args := range [][]string{
			{"delete", "memcached", "--all", "--wait=true"},
			{"delete", "-f", paths.Deploy("operator.yaml"), "-f", paths.Deploy("rbac.yaml"), "-f", paths.Deploy("sa.yaml"), "--ignore-not-found", "--wait=true"},
		} {
			if _, err := k.Run(context.Background(), args...); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	dumpOnFailure(t, k)
	g.run(ctx, time.Minute, "kubectl", "create", "-f", "deploy/sa.yaml")
	g.run(ctx, time.Minute, "kubectl", "create", "-f", "deploy/rbac.yaml", "-f", "deploy/crd.yaml", "-f", "deploy/operator.yaml")
	if err := framework.Eventually(ctx, readyTimeout, "every replica of the guide's operator Running and Ready, one leading", func(ctx context.Context) error {
		if _, err := operatorPod(ctx, k); err != nil {
			return err
		}
		var d framework.Deployment
		if err := k.GetJSON(ctx, &d, "deployment", operatorName); err != nil {
			return err
		}
		live, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || len(live) != *d.Spec.Replicas {
			return fmt.Errorf("%d operator pods, deployment wants %v", len(live), framework.Deref(d.Spec.Replicas))
		}
		for _, p := range live {
			if p.Status.Phase != "Running" || !p.Ready() {
				return fmt.Errorf("operator pod %s is %s, ready %t", p.Metadata.Name, p.Status.Phase, p.Ready())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	requireOperatorImage(ctx, t, k, manifestImage, digest)

	t.Log("5. kubectl create -f - of the guide's two Memcacheds; each serves set and get from every pod")
	var manifests []string
	for _, r := range guideResources {
		manifests = append(manifests, memcached(r.name, r.size, ""))
	}
	g.runInput(ctx, strings.Join(manifests, "---\n"), "kubectl", "create", "-f", "-")
	for _, r := range guideResources {
		o := waitServingIn(t, k, r.name, r.size)
		for _, podName := range o.Memcached.Status.Nodes {
			addr, err := podAddr(o, podName)
			if err != nil {
				t.Fatal(err)
			}
			if err := framework.MemcachedSetGet(addr, "guide-"+podName, "set by the guide's test"); err != nil {
				t.Errorf("%s: %v", podName, err)
			}
		}
		for _, p := range o.Pods {
			found := 0
			for _, c := range p.Status.ContainerStatuses {
				if c.Name != "memcached" {
					continue
				}
				found++
				if c.Image != "docker.io/library/"+guideMemcachedImage {
					t.Errorf("pod %s runs %s, want the operator's default %s", p.Metadata.Name, c.Image, guideMemcachedImage)
				}
			}
			if found != 1 {
				t.Errorf("pod %s has %d memcached container statuses, want 1", p.Metadata.Name, found)
			}
		}
		t.Logf("%s: set and get on %v", r.name, o.Memcached.Status.Nodes)
	}

	t.Log("6. operator-sdk up local needs ./config/config.yaml, which this layout has not")
	out, err = g.exec(ctx, time.Minute, "", "operator-sdk", "up", "local", "--kubeconfig", cluster.Kubeconfig, "--namespace", guideNamespace)
	if err == nil || !strings.Contains(out, "failed to read config file ./config/config.yaml") {
		t.Errorf("operator-sdk up local: %v, printed %q; want it to fail reading ./config/config.yaml", err, out)
	}
	if !t.Failed() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the checkout copy: %v", err)
		}
	}
}

// guideShell runs the guide's commands as its reader would: in the checkout, with
// the tools on PATH and the reader's environment.
type guideShell struct {
	t   *testing.T
	dir string
	env []string
}

// exec runs a command in the checkout and returns its combined output, which it
// also logs after the command line.
func (g guideShell) exec(ctx context.Context, timeout time.Duration, stdin string, args ...string) (string, error) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bin, err := g.lookPath(args[0])
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args[1:]...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	g.t.Logf("$ %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// lookPath finds file in the PATH of the reader's environment, which puts the
// tools first (exec.Command would search the test's own PATH).
func (g guideShell) lookPath(file string) (string, error) {
	var path string
	for _, kv := range g.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on the guide's PATH %s", file, path)
}

// run is exec without input, failing the test when the command fails.
func (g guideShell) run(ctx context.Context, timeout time.Duration, args ...string) string {
	g.t.Helper()
	out, err := g.exec(ctx, timeout, "", args...)
	if err != nil {
		g.t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runInput is run with stdin.
func (g guideShell) runInput(ctx context.Context, stdin string, args ...string) string {
	g.t.Helper()
	out, err := g.exec(ctx, time.Minute, stdin, args...)
	if err != nil {
		g.t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

// guideEnv is the reader's environment: GOPATH, the tools (kubectl, operator-sdk) on
// PATH, the cluster's kubeconfig and the private dockerd. The module cache stays
// where it is, or a fresh GOPATH would download every module again; VCS stamping is
// off because the copy sits in this repository's work tree without being its root.
// -trimpath makes the SDK's own `go build` of the operator (CGO_ENABLED=0, no flags of
// its own) compile as tmp/build/build.sh and the Makefile's vet do, so it reuses their
// compilation of the operator's libraries; without it a cold run compiled them again
// here, about 2 min of TestGuideVerbatim's 3 to 4 beside the other suites.
func guideEnv(t *testing.T, gopath string, dockerEnv []string) []string {
	t.Helper()
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	env := append(os.Environ(),
		"GOPATH="+gopath,
		"GOMODCACHE="+strings.TrimSpace(string(modcache)),
		"GOFLAGS=-buildvcs=false -trimpath",
		"PATH="+filepath.Dir(paths.Tool("kubectl"))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cluster.Kubeconfig,
		"KUBECACHEDIR="+paths.KubeCacheDir(),
	)
	return append(env, dockerEnv...)
}

// guideCheckout copies the work tree (tracked and untracked files that git does not
// ignore) to $GOPATH/src/<guidePackage>, where operator-sdk derives the package from
// the directory, and links its tool cache to this one's, as the reader's `make tools`
// would have filled it. A copy, not a link: operator-sdk build writes
// tmp/_output/bin/memcached-operator, which the other suites run.
func guideCheckout(t *testing.T, gopath string) string {
	t.Helper()
	dir := filepath.Join(gopath, "src", filepath.FromSlash(guidePackage))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("git", "-C", paths.Root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if err := copyPath(filepath.Join(paths.Root, rel), filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp", "_output"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(paths.Output(), "tools"), filepath.Join(dir, "tmp", "_output", "tools")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyPath copies a file or symlink with its mode; a listed file that no longer
// exists (deleted, not yet committed) is skipped.
func copyPath(src, dst string) error {
	st, err := os.Lstat(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, st.Mode().Perm())
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// operatorManifestImage returns the image of deploy/operator.yaml's operator container.
func operatorManifestImage(t *testing.T) string {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.Unmarshal(readFile(t, paths.Deploy("operator.yaml")), &d); err != nil {
		t.Fatalf("parse deploy/operator.yaml: %v", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == operatorName {
			return c.Image
		}
	}
	t.Fatalf("deploy/operator.yaml has no container %s", operatorName)
	return ""
}

// restoreTag puts image's tag back to the manifest it names now, or deletes what the
// test pushed there if it named none, when the test ends.
func restoreTag(t *testing.T, image string) {
	t.Helper()
	tag, err := name.NewTag(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	old, err := remote.Get(tag)
	if err != nil {
		old = nil // nothing there yet
	}
	t.Cleanup(func() {
		if old != nil {
			if err := remote.Tag(tag, old); err != nil {
				t.Errorf("restore %s to %s: %v", image, old.Digest, err)
			}
			return
		}
		now, err := remote.Head(tag)
		if err != nil {
			return // the test pushed nothing
		}
		if err := remote.Delete(tag.Digest(now.Digest.String())); err != nil {
			t.Errorf("delete %s: %v", image, err)
		}
	})
}

// registryImage returns the image the registry holds under image, failing
// t when the registry does not serve it.
func registryImage(t *testing.T, image string) v1.Image {
	t.Helper()
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("read %s from the registry: %v", image, err)
	}
	return img
}

// registryConfigDigest returns the config digest (the image ID docker shows) of the
// image the registry holds under image.
func registryConfigDigest(t *testing.T, image string) string {
	t.Helper()
	img := registryImage(t, image)
	config, err := img.ConfigName()
	if err != nil {
		t.Fatalf("config of %s: %v", image, err)
	}
	return config.String()
}

// mirrorDefaultMemcached copies the local memcached image to the registry name that
// the node resolves the operator's default memcached image to (Docker Hub's
// library/memcached), and removes it when the test ends.
func mirrorDefaultMemcached(t *testing.T, registry string) {
	t.Helper()
	repo, tag, _ := strings.Cut(guideMemcachedImage, ":")
	dst := registry + "/library/" + repo + ":" + tag
	restoreTag(t, dst)
	src, err := name.ParseReference(memcachedImage, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src)
	if err != nil {
		t.Fatalf("read %s: %v", memcachedImage, err)
	}
	to, err := name.ParseReference(dst, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(to, img); err != nil {
		t.Fatalf("copy %s to %s: %v", memcachedImage, dst, err)
	}
	t.Logf("the node resolves %s (docker.io/library/%s) to %s, a copy of the local %s", guideMemcachedImage, guideMemcachedImage, dst, memcachedImage)
}

// withoutCRD deletes the Memcached CRD if it exists and waits until it is gone.
func withoutCRD(t *testing.T, k framework.Kubectl) {
	t.Helper()
	ctx := context.Background()
	if _, err := k.Run(ctx, "get", "crd", guideCRD); framework.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleting CRD %s (and every Memcached) as TestMain created it: the guide creates it", guideCRD)
	if _, err := k.Run(ctx, "delete", "crd", guideCRD, "--wait=true", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
}

// requireOperatorImage fails unless every live operator pod in k's namespace asked
// for image and runs the manifest digest.
func requireOperatorImage(ctx context.Context, t *testing.T, k framework.Kubectl, image, digest string) {
	t.Helper()
	var pods struct {
		Items []struct {
			Metadata framework.ObjectMeta `json:"metadata"`
			Status   struct {
				ContainerStatuses []struct {
					Name    string `json:"name"`
					Image   string `json:"image"`
					ImageID string `json:"imageID"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := k.GetJSON(ctx, &pods, "pods", "-l", "app.kubernetes.io/name="+operatorName); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Metadata.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name != operatorName {
				continue
			}
			n++
			t.Logf("operator pod %s runs %s (%s)", p.Metadata.Name, c.Image, c.ImageID)
			if c.Image != image || !strings.HasSuffix(c.ImageID, "@"+digest) {
				t.Errorf("operator pod %s runs %s (%s), want %s at the digest docker push printed, %s", p.Metadata.Name, c.Image, c.ImageID, image, digest)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no operator container in %s", k.Namespace)
	}
}
