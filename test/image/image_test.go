// Package image tests the operator image end to end: it builds the image from
// tmp/build/Dockerfile with buildah and with docker (a private dockerd, offline),
// pushes each to a throwaway docker-registry on 127.0.0.1, runs docker's with
// `docker run --network none`, reads each manifest and config back over the
// registry API and runs the binary it finds in the layer.
//
// The test needs buildah, docker.io and docker-registry (Debian: apt-get install
// -y buildah docker.io docker-registry). It fails rather than skips when they are
// missing, so CI cannot pass without exercising the image.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/example-inc/memcached-operator/test/framework"
)

const (
	// binaryPath is where the Dockerfile puts the operator; it is also the
	// image's entrypoint.
	binaryPath = "/usr/local/bin/memcached-operator"
	// maxCompressedSize is the budget for config plus compressed layers.
	maxCompressedSize = 40 << 20
	// buildTimeout bounds build.sh plus the image build and push.
	buildTimeout = 10 * time.Minute
	// registryStartTimeout bounds how long docker-registry may take to answer.
	registryStartTimeout = 30 * time.Second
)

func TestImageBuildPushAndRun(t *testing.T) {
	registryBin := requireTool(t, "docker-registry")
	requireTool(t, "make")

	root := repoRoot(t)
	// The Makefile's VERSION (or the caller's): the binary `make build`
	// produces is then the one tested, and is not relinked with another stamp.
	version := makeVariable(t, root, "VERSION")
	commit := gitCommit(t, root)
	addr := startRegistry(t, registryBin)

	// Each tool builds and pushes its own tag, so that each one's checks read
	// the image that tool made.
	for _, tool := range []string{"buildah", "docker"} {
		t.Run(tool, func(t *testing.T) {
			img := fmt.Sprintf("%s/example/memcached-operator:v%s-%s", addr, version, tool)
			env := toolEnv(t, tool)
			// Build (make image runs build.sh first) and push through the
			// Makefile, exactly as the README tells users to.
			start := time.Now()
			runMake(t, root, env, "image", "push", "IMG="+img, "VERSION="+version)
			t.Logf("make image push with %s took %s", tool, time.Since(start).Round(time.Millisecond))
			if tool == "docker" {
				t.Run("docker run", func(t *testing.T) {
					out := dockerRunVersion(t, env, img)
					for _, want := range []string{version, commit} {
						if !strings.Contains(out, want) {
							t.Errorf("docker run %s --version printed %q, want it to name %q", img, out, want)
						}
					}
				})
			}
			checkPushedImage(t, img, version, commit)
		})
	}
}

// toolEnv returns the environment with which `make image push` uses tool:
// buildah with a throwaway store, or docker with the private dockerd of
// test/scripts/dockerd.sh, which it stops when the test ends (unless another
// suite still uses it).
func toolEnv(t *testing.T, tool string) []string {
	t.Helper()
	switch tool {
	case "buildah":
		t.Logf("using %s", requireTool(t, "buildah"))
		store := t.TempDir()
		return []string{
			"CONTAINER_TOOL=buildah",
			"BUILDAH_ROOT=" + filepath.Join(store, "root"),
			"BUILDAH_RUNROOT=" + filepath.Join(store, "runroot"),
		}
	case "docker":
		paths, err := framework.NewPaths()
		if err != nil {
			t.Fatal(err)
		}
		env, release, err := framework.UseDockerd(context.Background(), paths)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := release(); err != nil {
				t.Errorf("stop dockerd: %v", err)
			}
		})
		return append(env, "CONTAINER_TOOL=docker")
	}
	t.Fatalf("unknown container tool %s", tool)
	return nil
}

// dockerRunVersion runs the image's entrypoint with --version in a container
// without a network, as `docker run --rm --network none IMAGE --version`.
func dockerRunVersion(t *testing.T, env []string, img string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", img, "--version")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker run --rm --network none %s --version: %v\n%s", img, err, out)
	}
	t.Logf("$ docker run --rm --network none %s --version\n%s", img, out)
	return strings.TrimSpace(string(out))
}

// checkPushedImage reads img back from the registry and checks its config,
// size and files, and runs its binary.
func checkPushedImage(t *testing.T, img, version, commit string) {
	t.Helper()
	ref, err := name.ParseReference(img, name.Insecure)
	if err != nil {
		t.Fatalf("parse %s: %v", img, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	image, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("read %s back from the registry: %v", img, err)
	}

	cfg, err := image.ConfigFile()
	if err != nil {
		t.Fatalf("read config of %s: %v", img, err)
	}

	t.Run("config", func(t *testing.T) {
		checkConfig(t, cfg, version)
	})

	t.Run("size", func(t *testing.T) {
		size := compressedSize(t, image)
		t.Logf("compressed size (config + layers): %d bytes (%.1f MiB)", size, float64(size)/(1<<20))
		if size >= maxCompressedSize {
			t.Errorf("image is %d bytes compressed, want < %d", size, maxCompressedSize)
		}
	})

	rootfs := t.TempDir()
	files := extract(t, image, rootfs)

	t.Run("files", func(t *testing.T) {
		t.Logf("image files: %v", files)
		if want := []string{strings.TrimPrefix(binaryPath, "/")}; !slices.Equal(files, want) {
			t.Errorf("image holds files %v, want only %v (no shell, no package manager)", files, want)
		}
	})

	t.Run("version", func(t *testing.T) {
		out, err := runInImage(rootfs, cfg.Config.User, nil, "--version")
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", binaryPath, err, out)
		}
		t.Logf("%s --version: %s", binaryPath, out)
		// The commit proves build.sh's -X stamping works even when VERSION
		// equals the default compiled into pkg/version.
		for _, want := range []string{version, commit} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --version printed %q, want it to name %q", binaryPath, out, want)
			}
		}
	})

	t.Run("in-cluster TLS without a CA bundle", func(t *testing.T) {
		checkInClusterTLS(t, rootfs, cfg.Config.User)
	})
}

// checkConfig asserts the runtime contract of the image config.
func checkConfig(t *testing.T, cfg *v1.ConfigFile, version string) {
	t.Helper()
	if cfg.OS != "linux" {
		t.Errorf("os = %q, want linux", cfg.OS)
	}
	if got, want := cfg.Config.Entrypoint, []string{binaryPath}; !slices.Equal(got, want) {
		t.Errorf("entrypoint = %q, want %q", got, want)
	}
	if len(cfg.Config.Cmd) != 0 {
		t.Errorf("cmd = %q, want none", cfg.Config.Cmd)
	}
	uid, _, err := parseUser(cfg.Config.User)
	if err != nil {
		t.Errorf("user: %v", err)
	} else if uid == 0 {
		t.Errorf("user = %q, want a non-root uid", cfg.Config.User)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   "memcached-operator",
		"org.opencontainers.image.version": version,
	}
	for k, want := range labels {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.description"} {
		if cfg.Config.Labels[k] == "" {
			t.Errorf("label %s is missing", k)
		}
	}
}

// parseUser parses a numeric "uid" or "uid:gid" image user. Names are
// rejected: Kubernetes' runAsNonRoot can only verify numeric users.
func parseUser(user string) (uid, gid int, err error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err = strconv.Atoi(u)
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not a numeric uid[:gid]", user)
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil {
			return 0, 0, fmt.Errorf("%q is not a numeric uid[:gid]", user)
		}
	}
	return uid, gid, nil
}

// compressedSize is what a pull transfers: the config blob plus every
// compressed layer.
func compressedSize(t *testing.T, image v1.Image) int64 {
	t.Helper()
	m, err := image.Manifest()
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size
}

// extract writes the image's flattened filesystem under dir and returns the
// regular files it holds, sorted.
func extract(t *testing.T, image v1.Image, dir string) []string {
	t.Helper()
	rc := mutate.Extract(image)
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read image filesystem: %v", err)
		}
		rel := filepath.Clean(strings.TrimPrefix(hdr.Name, "/"))
		if rel == "." {
			continue
		}
		if !filepath.IsLocal(rel) {
			t.Fatalf("image holds a path outside its root: %q", hdr.Name)
		}
		dst := filepath.Join(dir, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			files = append(files, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)&os.ModePerm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				t.Fatalf("extract %s: %v", rel, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			files = append(files, rel)
			t.Errorf("unexpected %q entry of type %c in image", hdr.Name, hdr.Typeflag)
		}
	}
	sort.Strings(files)
	return files
}

// checkInClusterTLS starts the operator from the image filesystem the way a
// pod would (ServiceAccount token and ca.crt mounted, KUBERNETES_SERVICE_*
// set) against a TLS server whose certificate only that ca.crt trusts. The
// image has no CA bundle, so a request arriving with the token shows that the
// ServiceAccount CA is all the operator needs. The server answers 404, so the
// operator then exits, reporting that the Memcached API is not served.
func checkInClusterTLS(t *testing.T, rootfs, user string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chroot into the image filesystem (the ServiceAccount paths are absolute)")
	}
	const token = "image-test-token"
	var (
		mu     sync.Mutex
		tokens []string
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()

	saDir := filepath.Join(rootfs, "var", "run", "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(saDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, data := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte("default")} {
		if err := os.WriteFile(filepath.Join(saDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runInImage(rootfs, user, []string{
		"KUBERNETES_SERVICE_HOST=" + host,
		"KUBERNETES_SERVICE_PORT=" + port,
		"WATCH_NAMESPACE=default",
	})
	t.Logf("operator output (exit: %v):\n%s", err, out)

	mu.Lock()
	defer mu.Unlock()
	if len(tokens) == 0 {
		t.Fatalf("the operator made no request over TLS to the API server")
	}
	if tokens[0] != "Bearer "+token {
		t.Errorf("first request had Authorization %q, want the ServiceAccount token", tokens[0])
	}
	for _, bad := range []string{"x509", "certificate", "cannot create log"} {
		if strings.Contains(out, bad) {
			t.Errorf("operator output mentions %q", bad)
		}
	}
}

// runInImage runs the extracted binary with args and exactly env. As root it
// runs it the way a container would: chrooted into the image filesystem, as
// the image's user, which also proves the binary is static and needs no
// other file from the image. Otherwise it runs the binary in place.
func runInImage(rootfs, user string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		uid, gid, err := parseUser(user)
		if err != nil {
			return "", err
		}
		// The child chroots before it execs, so the path is the one inside
		// the image.
		cmd = exec.CommandContext(ctx, binaryPath, args...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     rootfs,
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		}
	} else {
		cmd = exec.CommandContext(ctx, filepath.Join(rootfs, binaryPath), args...)
	}
	cmd.Env = append([]string{}, env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// requireTool returns the path of a required executable or fails the test
// with the command that installs it.
func requireTool(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is required but not on PATH: install it (Debian/Ubuntu: apt-get install -y buildah docker.io docker-registry make)", tool)
	}
	return p
}

// repoRoot returns the operator repository root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// makeVariable prints the value make computes for a Makefile variable.
func makeVariable(t *testing.T, dir, variable string) string {
	t.Helper()
	cmd := exec.Command("make", "-s", "--no-print-directory", "--eval", "print-var: ; @echo $("+variable+")", "print-var")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make print %s: %v", variable, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		t.Fatalf("the Makefile sets no %s", variable)
	}
	return v
}

// gitCommit returns the short commit build.sh stamps.
func gitCommit(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse --short HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// runMake runs make in dir with extra environment, failing with its output.
// Variables of an enclosing make (make e2e) are dropped so that the command
// line alone decides what runs.
func runMake(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CONTAINER_TOOL", "BUILDAH_ROOT", "BUILDAH_RUNROOT", "PUSH_TLS_VERIFY",
			"DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_BUILDKIT":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("make %s:\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		t.Fatalf("make %s: %v", strings.Join(args, " "), err)
	}
}

// startRegistry runs docker-registry on a free 127.0.0.1 port with its
// storage in a temporary directory, waits until /v2/ answers and stops it
// when the test ends. It returns host:port.
func startRegistry(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "storage"), addr)
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child holds its own descriptor
	logs := func() string {
		b, _ := os.ReadFile(logPath) // best effort: only used in failure messages
		return string(b)
	}
	cmd := exec.Command(bin, "serve", configPath)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("docker-registry log:\n%s", logs())
		}
	})

	url := "http://" + addr + "/v2/"
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(registryStartTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer %s within %s: %v", url, registryStartTimeout, err)
		}
		select {
		case <-exited:
			t.Fatalf("docker-registry exited before it was ready: %v", waitErr)
		case <-tick.C:
		}
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
