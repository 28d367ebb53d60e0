package realnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/example-inc/memcached-operator/test/framework"
	"github.com/example-inc/memcached-operator/test/olm/catalog"
)

// The OLM flow (installThroughOLM, olmInstall.upgrade; TestPromisesAcrossFeatures runs it)
// uses OLM's `olm` operator (operator-lifecycle-manager v0.38.0, built by
// test/scripts/build-tools.sh) and its CRDs, which the suite's first OLM test installs on the
// suite's cluster (startOLM), whose only node is the machine's real node, then follows the
// getting-started guide in a namespace of its own:
// OperatorGroup, CSV 0.0.1 (Pending until its requirements exist), CRD + ServiceAccount + RBAC
// (Succeeded), the guide's two plain Memcached resources and two that production teams run,
// one with TLS and one with TLS that requires client certificates, auth and monitoring (whose
// pods run the sidecar), and at last CSV 0.0.2 (Succeeded, 0.0.1 gone, operator pod rolled to
// the 0.0.2 image); the memcached pods must be the same, never restarted, with the same
// Deployment generation and template, still holding the keys written at their start, read
// through TLS and a login where the cache has them.
//
// What runs where: everything is real. OLM runs the operator pod from the CSV, with the CSV's
// ServiceAccount and permissions; the operator's two releases are two images built by
// test/scripts/images.sh (each binary stamped with its version); memcached pods run Debian's
// memcached. The CSVs applied are the committed ones with two fields changed, because this
// machine cannot pull from quay.io or Docker Hub: the operator image points at the local
// registry, and the container gets MEMCACHED_IMAGE, the local memcached image (localCSV
// checks that nothing else differs).

const (
	olmNamespace = "olm"
	// operatorNamespace is where the OperatorGroup, the CSVs and the operator live.
	operatorNamespace = "memcached"
	// olmInterval is OLM's resync period. OLM does not watch ServiceAccounts or Roles, so a
	// Pending CSV notices its newly created requirements only on resync; the default is 5m.
	olmInterval = "5s"

	csvTimeout = 3 * time.Minute
	podTimeout = 2 * time.Minute
)

// upgradeCache is a Memcached that the operator's upgrade must leave alone.
type upgradeCache struct {
	name string
	size int
	// spec is the Memcached's spec besides its size, as YAML.
	spec string
	// tls says clients speak TLS; clientCert that they present a certificate,
	// auth that they log in, and monitoring that the pods' sidecars serve metrics;
	// networkPolicy that the operator keeps a NetworkPolicy for it.
	tls, clientCert, auth, monitoring, networkPolicy bool
	// tlsSecret is the Secret of the cache's certificate when tls is set.
	tlsSecret string
}

// Secrets of the upgrade's TLS caches and the login of the one with auth.
const (
	upgradeTLSSecret     = "memcached-tls-cert"
	upgradeSecuredSecret = "memcached-secured-cert"
	upgradeUsersSecret   = "memcached-secured-users"
	upgradeUser          = "app"
	upgradePassword      = "upgrade-password"
)

// guideResources are the guide's two Memcached resources and their sizes.
var guideResources = []struct {
	name string
	size int
}{
	{"memcached-for-wordpress", 3},
	{"memcached-for-drupal", 2},
}

// upgradeCaches are the guide's two plain Memcached resources and two whose pods run the
// sidecar, as production teams run them.
var upgradeCaches = append(plainCaches(guideResources),
	upgradeCache{name: "memcached-tls", size: 2, spec: "tls: {secretName: " + upgradeTLSSecret + "}", tls: true, tlsSecret: upgradeTLSSecret},
	upgradeCache{
		name: "memcached-secured", size: 2,
		spec: "tls: {secretName: " + upgradeSecuredSecret + ", clientCertificates: Required}\n" +
			"auth: {secretName: " + upgradeUsersSecret + "}\nmonitoring: {enabled: true}\nnetworkPolicy: {enabled: true}",
		tls: true, clientCert: true, auth: true, monitoring: true, networkPolicy: true, tlsSecret: upgradeSecuredSecret,
	},
)

// plainCaches are the guide's resources as upgradeCaches.
func plainCaches(resources []struct {
	name string
	size int
}) []upgradeCache {
	var out []upgradeCache
	for _, r := range resources {
		out = append(out, upgradeCache{name: r.name, size: r.size})
	}
	return out
}

// olmInstall is the operator's release 0.0.1 installed through OLM in operatorNamespace, as
// the getting-started guide installs it.
type olmInstall struct {
	k       framework.Kubectl
	workDir string
	images  images
	// deployment is OLM's operator Deployment of CSV 0.0.1.
	deployment operatorDeployment
}

// suiteOLM is OLM on the suite's cluster, which the OLM tests share: OLM's CRDs and one olm
// operator, started by the first test that needs them (startOLM) and stopped with the suite
// (stopOLM). group is held by the test whose OperatorGroup provides the Memcached API, from
// its creation until it and its CSVs are deleted (holdOperatorGroup): OLM fails the CSV of a
// second OperatorGroup whose target namespaces intersect the first's and that provides the
// same API (InterOperatorGroupOwnerConflict), and an AllNamespaces group intersects every
// other, so TestPromisesAcrossFeatures' OwnNamespace install and
// TestOLMAllNamespacesUpgrade's AllNamespaces one take their turns.
var suiteOLM struct {
	once   sync.Once
	olm    *framework.Operator
	images images
	group  sync.Mutex
}

// startOLM returns the suite's OLM, which the first call starts: it checks that the committed
// catalog is fresh, installs OLM's CRDs and starts the olm operator.
func startOLM(ctx context.Context, t *testing.T) *framework.Operator {
	t.Helper()
	suiteOLM.once.Do(func() {
		workDir := filepath.Join(scratch, "olm")
		if err := os.RemoveAll(workDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(workDir, 0o755); err != nil {
			t.Fatal(err)
		}
		requireFreshCatalog(t, workDir)
		crdsDir := olmCRDs(ctx, t, paths, workDir)
		im := localImages(ctx, t, paths)
		admin := cluster.Kubectl()
		t.Log("installing OLM's CRDs and starting the olm operator")
		mustRun(ctx, t, admin, "apply", "--server-side", "-f", crdsDir)
		mustRun(ctx, t, admin, "wait", "--for=condition=Established", "--timeout=60s", "-f", crdsDir)
		mustRun(ctx, t, admin, "create", "namespace", olmNamespace)
		olm, err := framework.StartOperator(framework.OperatorConfig{
			Binary:  paths.Tool("olm"),
			LogFile: filepath.Join(workDir, "olm.log"),
			Args:    []string{"--namespace", olmNamespace, "--writeStatusName", "", "--interval", olmInterval},
			Env: []string{
				"KUBECONFIG=" + cluster.Kubeconfig,
				"OPERATOR_NAMESPACE=" + olmNamespace,
				"OPERATOR_NAME=olm-operator",
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		suiteOLM.olm, suiteOLM.images = olm, im
	})
	if suiteOLM.olm == nil {
		t.Fatal("OLM did not start: see the log of the first test that started it")
	}
	return suiteOLM.olm
}

// olmLog is the report on failure of the suite's OLM log.
func olmLog() string {
	return "===== olm log, repeats collapsed (" + suiteOLM.olm.LogFile() + ")\n" + tail(collapse(suiteOLM.olm.Log()), 100)
}

// stopOLM stops the suite's olm operator, if a test started it.
func stopOLM() {
	if suiteOLM.olm != nil {
		_ = suiteOLM.olm.Stop(10 * time.Second) // OLM exits non-zero on SIGTERM; only its log matters
	}
}

// holdOperatorGroup waits until no other test's OperatorGroup provides the Memcached API (see
// suiteOLM), then holds the turn until t ends, when it deletes ns's Subscriptions, CSVs and
// OperatorGroups, waits until OLM has removed every CSV it copied from ns into other
// namespaces, and gives the turn on. Register it before the test's reports on failure, so
// that they run first.
func holdOperatorGroup(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	start := time.Now()
	suiteOLM.group.Lock()
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %v for the other OLM install's OperatorGroup to go", d.Round(time.Second))
	}
	t.Cleanup(func() {
		defer suiteOLM.group.Unlock()
		ctx, cancel := context.WithTimeout(ctx, csvTimeout)
		defer cancel()
		k := cluster.Kubectl().WithNamespace(ns)
		if _, err := k.Run(ctx, "delete", "subscriptions,clusterserviceversions,operatorgroups", "--all", "--wait=true"); err != nil {
			t.Errorf("removing the OLM install in %s: %v", ns, err)
			return
		}
		err := framework.Eventually(ctx, csvTimeout, "OLM to delete the CSVs it copied from "+ns, func(ctx context.Context) error {
			out, err := cluster.Kubectl().Run(ctx, "get", "clusterserviceversions", "--all-namespaces",
				"-l", "olm.copiedFrom="+ns, "-o", "name")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("copies left: %s", out)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// installThroughOLM starts the suite's OLM and follows the guide's install: OperatorGroup,
// CSV 0.0.1 (Pending until its requirements exist), CRD + ServiceAccount + RBAC
// (Succeeded), and the operator pod running release 0.0.1. On failure the test logs the
// namespace, OLM's log, the operator's and the kubelet's.
func installThroughOLM(ctx context.Context, t *testing.T) olmInstall {
	startOLM(ctx, t)
	workDir := olmWorkDir(t, operatorNamespace)
	in := olmInstall{k: cluster.Kubectl().WithNamespace(operatorNamespace), workDir: workDir, images: suiteOLM.images}
	admin, k := cluster.Kubectl(), in.k
	holdOperatorGroup(ctx, t, operatorNamespace)
	framework.DumpOnFailure(t,
		func() string {
			return framework.Describe(ctx, admin, operatorNamespace, "operatorgroups,clusterserviceversions,memcached,deployments,services,pods,leases")
		},
		func() string {
			return "===== kubectl auth can-i --list as the operator's ServiceAccount\n" + output(admin.Run(ctx, "auth", "can-i", "--list",
				"--namespace", operatorNamespace, "--as", "system:serviceaccount:"+operatorNamespace+":"+operatorName))
		},
		olmLog,
		func() string {
			return "===== kubectl logs -l app.kubernetes.io/name=memcached-operator (leader and standby)\n" +
				output(k.Run(ctx, "logs", "-l", "app.kubernetes.io/name="+operatorName, "--prefix", "--tail=150"))
		},
		func() string {
			return "===== kubelet log (tail)\n" + tail(node.Log(ctx, "kubelet"), 60)
		},
	)

	t.Log("creating the OperatorGroup")
	mustRun(ctx, t, admin, "create", "namespace", operatorNamespace)
	mustApply(ctx, t, k, operatorGroup(operatorNamespace))
	waitForTargets(ctx, t, k, operatorNamespace)

	t.Log("applying CSV 0.0.1 before its requirements: it must stay Pending")
	mustRun(ctx, t, k, "apply", "-f", localCSV(t, workDir, "0.0.1", in.images))
	var pending csvStatus
	waitFor(ctx, t, csvTimeout, "CSV 0.0.1 to be Pending with RequirementsNotMet", func(ctx context.Context) error {
		s, err := getCSV(ctx, k, catalog.CSVName("0.0.1"))
		if err != nil {
			return err
		}
		if s.Phase != "Pending" || s.Reason != "RequirementsNotMet" {
			return fmt.Errorf("phase %q, reason %q: %s", s.Phase, s.Reason, s.Message)
		}
		pending = s
		return nil
	})
	t.Logf("CSV 0.0.1 is Pending; unmet requirements: %s", strings.Join(pending.unmet(), ", "))
	if _, err := k.Run(ctx, "get", "deployment", operatorName); !framework.IsNotFound(err) {
		t.Fatalf("operator Deployment exists while CSV 0.0.1 is Pending (err %v)", err)
	}

	t.Log("applying deploy/crd.yaml, sa.yaml and rbac.yaml: CSV 0.0.1 must succeed")
	mustRun(ctx, t, admin, "apply", "-f", paths.Deploy("crd.yaml"))
	mustRun(ctx, t, admin, "wait", "--for=condition=Established", "--timeout=60s", "-f", paths.Deploy("crd.yaml"))
	mustRun(ctx, t, k, "apply", "-f", paths.Deploy("sa.yaml"), "-f", paths.Deploy("rbac.yaml"))
	waitForCSVSucceeded(ctx, t, k, "0.0.1")
	in.deployment = waitForOperatorDeployment(ctx, t, k, "0.0.1", in.images.operator["0.0.1"], operatorNamespace)
	waitForOperatorVersion(ctx, t, k, "0.0.1")
	return in
}

// upgrade applies CSV 0.0.2, which replaces 0.0.1, and waits until 0.0.1 is gone, OLM has
// updated the operator Deployment in place to the 0.0.2 image, and the 0.0.2 leader has
// reconciled the n Memcacheds with nothing left queued: a template that this release meant
// to change has been written by the time it returns.
func (in olmInstall) upgrade(ctx context.Context, t *testing.T, n int) {
	k := in.k
	mustRun(ctx, t, k, "apply", "-f", localCSV(t, in.workDir, "0.0.2", in.images))
	waitForCSVSucceeded(ctx, t, k, "0.0.2")
	waitForCSVRemoved(ctx, t, k, "0.0.1")
	dep2 := waitForOperatorDeployment(ctx, t, k, "0.0.2", in.images.operator["0.0.2"], operatorNamespace)
	if dep2.UID != in.deployment.UID {
		t.Errorf("operator Deployment was recreated (uid %s, was %s); want it updated in place", dep2.UID, in.deployment.UID)
	}
	waitForOperatorVersion(ctx, t, k, "0.0.2")
	waitForReconciledBy(ctx, t, k, in.images.operator["0.0.2"], n)
}

// waitForReconciledBy waits until the operator pod that holds the Lease runs image and has
// reconciled at least n Memcacheds with success, with no key left in its work queues: its
// informers enqueued every Memcached as they started, so each has been reconciled since, and a
// template that this release meant to change would have been written by now.
func waitForReconciledBy(ctx context.Context, t *testing.T, k framework.Kubectl, image string, n int) {
	t.Helper()
	var reconciled, queued float64
	waitFor(ctx, t, csvTimeout, fmt.Sprintf("the leader on %s to reconcile the %d Memcacheds", image, n), func(ctx context.Context) error {
		p, err := operatorPod(ctx, k)
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Image != image {
			return fmt.Errorf("leader %s does not run %s yet: %+v", p.Metadata.Name, image, p.Status.ContainerStatuses)
		}
		page, err := scrape(ctx, p)
		if err != nil {
			return err
		}
		reconciled = value(page, `memcached_operator_reconcile_total{result="success"}`)
		queued = 0
		for _, line := range strings.Split(page, "\n") {
			if rest, ok := strings.CutPrefix(line, "memcached_operator_workqueue_depth{"); ok {
				var depth float64
				if _, err := fmt.Sscan(rest[strings.LastIndex(rest, " ")+1:], &depth); err == nil {
					queued += depth
				}
			}
		}
		if reconciled < float64(n) || queued != 0 {
			return fmt.Errorf("leader %s: %v successful reconciles, %v keys queued", p.Metadata.Name, reconciled, queued)
		}
		return nil
	})
	t.Logf("the leader on %s reconciled %v times with success and has nothing queued", image, reconciled)
}

// access says how the test's clients reach c, for the log.
func (c upgradeCache) access() string {
	switch {
	case c.auth:
		return " over TLS with a client certificate and a login"
	case c.tls:
		return " over TLS"
	}
	return ""
}

// cacheClients reach the upgrade's caches as their spec asks: plaintext, TLS trusting ca, or
// TLS presenting cert and logging in as user with password.
type cacheClients struct {
	ca             *testCA
	cert           *tls.Certificate
	user, password string
}

// set stores upgradeKey with value on the memcached at addr and reads it back.
func (cl cacheClients) set(ctx context.Context, c upgradeCache, addr, value string) error {
	if !c.tls {
		return framework.MemcachedSetGet(addr, upgradeKey, value)
	}
	conn, err := cl.dial(ctx, c, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if reply, err := conn.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", upgradeKey, len(value), value)); err != nil || reply != "STORED" {
		return fmt.Errorf("set %s: %q, %v", upgradeKey, reply, err)
	}
	if got, err := conn.get(upgradeKey); err != nil || got != value {
		return fmt.Errorf("get %s after set: %q, %v; want %q", upgradeKey, got, err, value)
	}
	return nil
}

// get checks that upgradeKey holds want on the memcached at addr.
func (cl cacheClients) get(ctx context.Context, c upgradeCache, addr, want string) error {
	if !c.tls {
		return framework.MemcachedGet(addr, upgradeKey, want)
	}
	conn, err := cl.dial(ctx, c, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if got, err := conn.get(upgradeKey); err != nil || got != want {
		return fmt.Errorf("get %s: %q, %v; want %q", upgradeKey, got, err, want)
	}
	return nil
}

// dial opens a TLS connection to c's pod at addr, logged in when c has auth.
func (cl cacheClients) dial(ctx context.Context, c upgradeCache, addr string) (*mcConn, error) {
	var cert *tls.Certificate
	if c.clientCert {
		cert = cl.cert
	}
	if c.auth {
		conn, _, err := session(ctx, addr, cl.ca, cert, cl.user, cl.password)
		return conn, err
	}
	conn, _, err := dialTLS(ctx, addr, cl.ca, cert)
	return conn, err
}

// requireSidecarsUp checks that the sidecar of every pod of the caches with monitoring
// reaches its memcached: memcached_up is 1, through TLS and its login.
func requireSidecarsUp(ctx context.Context, t *testing.T, caches []upgradeCache, pods map[string]map[string]podState) {
	t.Helper()
	for _, c := range caches {
		if !c.monitoring {
			continue
		}
		for name, s := range pods[c.name] {
			var p framework.Pod
			p.Metadata.Name, p.Status.PodIP = name, s.IP
			page, err := scrapeSidecar(ctx, p)
			if err != nil {
				t.Fatalf("%s: pod %s: %v", c.name, name, err)
			}
			if v := value(page, "memcached_up"); v != 1 {
				t.Errorf("%s: pod %s: the sidecar says memcached_up %v, want 1", c.name, name, v)
			}
		}
	}
}

// deploymentTemplate is what of a memcached Deployment shows whether its spec was written:
// its generation, the template hash the operator recorded, and the containers' images.
type deploymentTemplate struct {
	Generation int64
	Hash       string
	Images     []string
}

func getDeploymentTemplate(ctx context.Context, t *testing.T, k framework.Kubectl, name string) deploymentTemplate {
	t.Helper()
	var d appsv1.Deployment
	if err := k.GetJSON(ctx, &d, "deployment", name); err != nil {
		t.Fatal(err)
	}
	out := deploymentTemplate{Generation: d.Generation, Hash: d.Spec.Template.Annotations[templateHashAnnotation]}
	for _, c := range d.Spec.Template.Spec.Containers {
		out.Images = append(out.Images, c.Image)
	}
	return out
}

// upgradeKey is the memcached key written to every pod before the operator upgrade
// and read back after it; its value is the pod's name.
const upgradeKey = "written-before-the-upgrade"

// images are the local registry's images that the test runs.
type images struct {
	// operator maps a release to its image.
	operator  map[string]string
	memcached string
}

// localImages returns the images that `make images` builds, and fails unless the
// local registry holds them.
func localImages(ctx context.Context, t *testing.T, paths framework.Paths) images {
	t.Helper()
	im := images{operator: map[string]string{}}
	var refs []string
	for _, v := range []string{"0.0.1", "0.0.2"} {
		ref, err := framework.ImageRef(ctx, paths, "operator", v)
		if err != nil {
			t.Fatal(err)
		}
		im.operator[v] = ref
		refs = append(refs, ref)
	}
	var err error
	if im.memcached, err = framework.ImageRef(ctx, paths, "memcached"); err != nil {
		t.Fatal(err)
	}
	if err := framework.RequireImages(ctx, paths, append(refs, im.memcached)...); err != nil {
		t.Fatal(err)
	}
	return im
}

// localCSV writes the committed CSV of version with the operator container's image
// set to the local build of that release and MEMCACHED_IMAGE set to the local
// memcached image, checks that nothing else differs, and returns the file.
func localCSV(t *testing.T, workDir, version string, im images) string {
	t.Helper()
	data, err := os.ReadFile(csvFile(version))
	if err != nil {
		t.Fatal(err)
	}
	var shipped, local map[string]any
	if err := yaml.Unmarshal(data, &shipped); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &local); err != nil {
		t.Fatal(err)
	}
	c := operatorContainer(t, local)
	if c["image"] != catalog.Image(version) {
		t.Fatalf("CSV %s runs image %v, want %s", version, c["image"], catalog.Image(version))
	}
	c["image"] = im.operator[version]
	env, _ := c["env"].([]any)
	c["env"] = append(env, map[string]any{"name": "MEMCACHED_IMAGE", "value": im.memcached})

	// Undo the two changes on a copy: what remains must be the shipped CSV.
	var undone map[string]any
	out, err := yaml.Marshal(local)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(out, &undone); err != nil {
		t.Fatal(err)
	}
	uc := operatorContainer(t, undone)
	uc["image"] = catalog.Image(version)
	uc["env"] = uc["env"].([]any)[:len(env)]
	if len(env) == 0 {
		delete(uc, "env")
	}
	if !reflect.DeepEqual(undone, shipped) {
		t.Fatalf("the local CSV %s differs from the committed one in more than the two image fields", version)
	}
	file := filepath.Join(workDir, catalog.CSVFileName(version))
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// operatorContainer returns the operator's container in a CSV's install strategy.
func operatorContainer(t *testing.T, csv map[string]any) map[string]any {
	t.Helper()
	spec, _ := csv["spec"].(map[string]any)
	install, _ := spec["install"].(map[string]any)
	strategy, _ := install["spec"].(map[string]any)
	deployments, _ := strategy["deployments"].([]any)
	for _, d := range deployments {
		dep, _ := d.(map[string]any)
		podSpec, _ := dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		containers, _ := podSpec["containers"].([]any)
		for _, c := range containers {
			if cm, _ := c.(map[string]any); cm["name"] == operatorName {
				return cm
			}
		}
	}
	t.Fatalf("no container %s in the CSV's install strategy", operatorName)
	return nil
}

// waitForOperatorVersion waits until the operator's pod log says it runs version:
// the binary inside the image, not just the image's tag.
func waitForOperatorVersion(ctx context.Context, t *testing.T, k framework.Kubectl, version string) {
	t.Helper()
	want := "starting memcached-operator " + version + " "
	waitFor(ctx, t, csvTimeout, "the operator pod to log "+want, func(ctx context.Context) error {
		out, err := k.Run(ctx, "logs", "deployment/"+operatorName)
		if err != nil {
			return err
		}
		if !strings.Contains(out, want) {
			return fmt.Errorf("log: %s", tail(out, 3))
		}
		return nil
	})
}

// requireFreshCatalog fails at once when the committed catalog is not what deploy/ renders.
// Otherwise a CSV whose permissions the Role no longer grants would sit Pending with
// RequirementsNotMet until the test times out, as it would for a user.
func requireFreshCatalog(t *testing.T, workDir string) {
	t.Helper()
	d, err := catalog.LoadDeploy(paths.Deploy(""))
	if err != nil {
		t.Fatal(err)
	}
	rendered := filepath.Join(workDir, "rendered-catalog")
	if err := catalog.Regenerate(d, catalogDir(), rendered); err != nil {
		t.Fatal(err)
	}
	diffs, err := catalog.Diff(catalogDir(), rendered)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("deploy/olm-catalog is stale (see TestCatalogIsUpToDate):\n  %s", strings.Join(diffs, "\n  "))
	}
}

// olmCRDs checks that `make tools` built the olm binary and copies OLM's CRD manifests
// from the Go module cache into workDir, returning their directory.
func olmCRDs(ctx context.Context, t *testing.T, paths framework.Paths, workDir string) string {
	t.Helper()
	if err := paths.RequireTools("olm"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, paths.Script("olm-crds-dir.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test/scripts/olm-crds-dir.sh: %v", err)
	}
	src := strings.TrimSpace(string(out))
	dst := filepath.Join(workDir, "olm-crds")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no OLM CRDs in %s (err %v)", src, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// olmWorkDir returns a new folder of the suite's OLM folder for the install in namespace ns,
// where it writes its local CSVs.
func olmWorkDir(t *testing.T, ns string) string {
	t.Helper()
	dir := filepath.Join(scratch, "olm", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// catalogDir is the package's folder in deploy/olm-catalog.
func catalogDir() string {
	return paths.Deploy(filepath.Join("olm-catalog", catalog.PackageName))
}

func csvFile(version string) string {
	return filepath.Join(catalogDir(), version, catalog.CSVFileName(version))
}

func operatorGroup(namespace string) string {
	return fmt.Sprintf(`apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: %s
spec:
  targetNamespaces:
    - %s
`, operatorName, namespace)
}

// memcached is the manifest of Memcached name of size, with the rest of its spec from spec
// (YAML, may be empty).
func memcached(name string, size int, spec string) string {
	extra := ""
	if spec != "" {
		extra = "  " + strings.ReplaceAll(spec, "\n", "\n  ") + "\n"
	}
	return fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: %s
spec:
  size: %d
%s`, name, size, extra)
}

// waitForTargets waits until OLM has resolved the target namespaces of k's OperatorGroup
// memcached-operator to targets: [""] for AllNamespaces.
func waitForTargets(ctx context.Context, t *testing.T, k framework.Kubectl, targets ...string) {
	t.Helper()
	waitFor(ctx, t, csvTimeout, "OLM to resolve the OperatorGroup's target namespaces", func(ctx context.Context) error {
		var og struct {
			Status struct {
				Namespaces []string `json:"namespaces"`
			} `json:"status"`
		}
		if err := k.GetJSON(ctx, &og, "operatorgroup", operatorName); err != nil {
			return err
		}
		if !reflect.DeepEqual(og.Status.Namespaces, targets) {
			return fmt.Errorf("status.namespaces = %q, want %q", og.Status.Namespaces, targets)
		}
		return nil
	})
}

// csvStatus is the part of a CSV's status that the test reads.
type csvStatus struct {
	Phase             string `json:"phase"`
	Reason            string `json:"reason"`
	Message           string `json:"message"`
	RequirementStatus []struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"requirementStatus"`
}

// unmet lists the requirements that OLM reports as not present or not satisfied.
func (s csvStatus) unmet() []string {
	var out []string
	for _, r := range s.RequirementStatus {
		if r.Status != "Present" {
			out = append(out, fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.Status))
		}
	}
	return out
}

func getCSV(ctx context.Context, k framework.Kubectl, name string) (csvStatus, error) {
	var csv struct {
		Status csvStatus `json:"status"`
	}
	err := k.GetJSON(ctx, &csv, "clusterserviceversion", name)
	return csv.Status, err
}

func waitForCSVSucceeded(ctx context.Context, t *testing.T, k framework.Kubectl, version string) {
	t.Helper()
	waitFor(ctx, t, csvTimeout, "CSV "+version+" to succeed", func(ctx context.Context) error {
		s, err := getCSV(ctx, k, catalog.CSVName(version))
		if err != nil {
			return err
		}
		if s.Phase == "Failed" {
			return framework.Permanent(fmt.Errorf("CSV %s failed: %s: %s", version, s.Reason, s.Message))
		}
		if s.Phase != "Succeeded" {
			return fmt.Errorf("phase %q, reason %q: %s; unmet: %v", s.Phase, s.Reason, s.Message, s.unmet())
		}
		return nil
	})
	t.Logf("CSV %s is Succeeded", version)
}

// waitForCSVRemoved waits until CSV version is gone, as OLM deletes a CSV that another replaced.
func waitForCSVRemoved(ctx context.Context, t *testing.T, k framework.Kubectl, version string) {
	t.Helper()
	waitFor(ctx, t, csvTimeout, "CSV "+version+" to be removed", func(ctx context.Context) error {
		s, err := getCSV(ctx, k, catalog.CSVName(version))
		if framework.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("CSV %s still exists: phase %q, reason %q", version, s.Phase, s.Reason)
	})
}

// operatorDeployment is the part of the OLM-managed operator Deployment the test reads.
type operatorDeployment struct {
	UID   string
	Image string
	Owner string
}

// waitForOperatorDeployment waits until OLM's operator Deployment belongs to CSV version,
// runs image, has the OperatorGroup's target namespaces, targets ("" for all), in its pod
// template's annotation, and is available: its pod passed the kubelet's checks on the real
// node.
func waitForOperatorDeployment(ctx context.Context, t *testing.T, k framework.Kubectl, version, image, targets string) operatorDeployment {
	t.Helper()
	var got operatorDeployment
	waitFor(ctx, t, csvTimeout, "operator Deployment of CSV "+version, func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := k.GetJSON(ctx, &d, "deployment", operatorName); err != nil {
			return err
		}
		got = operatorDeployment{UID: string(d.UID), Owner: d.Labels["olm.owner"]}
		if c := d.Spec.Template.Spec.Containers; len(c) > 0 {
			got.Image = c[0].Image
		}
		if got.Owner != catalog.CSVName(version) || got.Image != image {
			return fmt.Errorf("owner %q, image %q", got.Owner, got.Image)
		}
		// The operator's WATCH_NAMESPACE is a fieldRef to this pod annotation.
		if ns, ok := d.Spec.Template.Annotations[catalog.TargetNamespacesAnnotation]; !ok || ns != targets {
			return framework.Permanent(fmt.Errorf("pod template annotation %s = %q (set: %t), want %q",
				catalog.TargetNamespacesAnnotation, ns, ok, targets))
		}
		if d.Status.AvailableReplicas < 1 || d.Status.UpdatedReplicas < 1 {
			return fmt.Errorf("available %d, updated %d", d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
		}
		return nil
	})
	t.Logf("operator Deployment %s: owner %s, image %s", operatorName, got.Owner, got.Image)
	return got
}

// podState identifies a pod across the upgrade: its UID, IP and each container's restarts.
type podState struct {
	UID string
	IP  string
	// Restarts maps each container's name to its restartCount.
	Restarts map[string]int
}

// addr is the pod's memcached address.
func (s podState) addr() string {
	return s.IP + ":11211"
}

// listPods returns the Running and Ready pods of Memcached cr by name.
func listPods(ctx context.Context, k framework.Kubectl, cr string) (map[string]podState, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				UID               string  `json:"uid"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				Phase      string `json:"phase"`
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
				ContainerStatuses []struct {
					Name         string `json:"name"`
					RestartCount int    `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := k.GetJSON(ctx, &list, "pods", "-l", "app=memcached,memcached_cr="+cr); err != nil {
		return nil, err
	}
	pods := map[string]podState{}
	for _, p := range list.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == "Ready" && c.Status == "True")
		}
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" || !ready {
			continue
		}
		s := podState{UID: p.Metadata.UID, IP: p.Status.PodIP, Restarts: map[string]int{}}
		for _, c := range p.Status.ContainerStatuses {
			s.Restarts[c.Name] = c.RestartCount
		}
		pods[p.Metadata.Name] = s
	}
	return pods, nil
}

// waitForMemcached waits until the operator has created CR name's Deployment (owned by the
// CR), size pods run, and status.nodes lists exactly their names, sorted. It returns the pods.
func waitForMemcached(ctx context.Context, t *testing.T, k framework.Kubectl, name string, size int) map[string]podState {
	t.Helper()
	var pods map[string]podState
	waitFor(ctx, t, podTimeout, "memcached "+name+" to converge", func(ctx context.Context) error {
		var d struct {
			Metadata struct {
				OwnerReferences []struct {
					Kind       string `json:"kind"`
					Name       string `json:"name"`
					Controller bool   `json:"controller"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
		}
		if err := k.GetJSON(ctx, &d, "deployment", name); err != nil {
			return err
		}
		owned := false
		for _, o := range d.Metadata.OwnerReferences {
			owned = owned || (o.Kind == "Memcached" && o.Name == name && o.Controller)
		}
		if !owned {
			return fmt.Errorf("deployment %s is not controlled by memcached %s: %+v", name, name, d.Metadata.OwnerReferences)
		}
		var err error
		if pods, err = listPods(ctx, k, name); err != nil {
			return err
		}
		var cr struct {
			Status struct {
				Nodes []string `json:"nodes"`
			} `json:"status"`
		}
		if err := k.GetJSON(ctx, &cr, "memcached", name); err != nil {
			return err
		}
		want := podNames(pods)
		if len(want) != size || !reflect.DeepEqual(cr.Status.Nodes, want) {
			return fmt.Errorf("running pods %v (want %d), status.nodes %v", want, size, cr.Status.Nodes)
		}
		for p, s := range pods {
			for c, n := range s.Restarts {
				if n != 0 {
					return framework.Permanent(fmt.Errorf("pod %s: container %s restarted %d times", p, c, n))
				}
			}
		}
		return nil
	})
	return pods
}

func podNames(pods map[string]podState) []string {
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	if err := framework.Eventually(ctx, timeout, what, check); err != nil {
		t.Fatal(err)
	}
}

func mustRun(ctx context.Context, t *testing.T, k framework.Kubectl, args ...string) string {
	t.Helper()
	out, err := k.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustApply(ctx context.Context, t *testing.T, k framework.Kubectl, manifest string) {
	t.Helper()
	if err := k.Apply(ctx, manifest); err != nil {
		t.Fatal(err)
	}
}

// collapse drops the time and request-id fields of OLM's log lines and elides a line that
// repeats one of the 8 before it, so that a CSV requeued hundreds of times shows once.
func collapse(log string) string {
	noise := regexp.MustCompile(`time="[^"]*" |id=\S+ |^E\d{4} [\d:.]+ +\d+ `)
	var b strings.Builder
	var recent []string
	elided := 0
	for _, line := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		line = noise.ReplaceAllString(line, "")
		if slices.Contains(recent, line) {
			elided++
			continue
		}
		if elided > 0 {
			fmt.Fprintf(&b, "   ... %d repeated lines elided\n", elided)
			elided = 0
		}
		b.WriteString(line + "\n")
		if recent = append(recent, line); len(recent) > 8 {
			recent = recent[1:]
		}
	}
	if elided > 0 {
		fmt.Fprintf(&b, "   ... %d repeated lines elided\n", elided)
	}
	return b.String()
}

func output(out string, err error) string {
	if err != nil {
		return out + "(error: " + err.Error() + ")\n"
	}
	return out
}
