// Command memcached-operator runs memcached clusters for Memcached custom
// resources in the namespaces that WATCH_NAMESPACE names: one namespace, a
// comma-separated list of them, or every namespace when it is empty (see
// watchScope); with every namespace, --namespace-selector may narrow them
// to the namespaces of matching labels (see checkNamespaceSelector and
// kube.NamespaceCache).
//
// With --leader-elect, several replicas can run at once: they elect a leader
// on a Lease (pkg/leader) in their own namespace, POD_NAMESPACE (see
// ownNamespace), and only the leader reconciles. Every replica
// watches from the start, so that a standby's caches are warm when it takes
// over; a leader that loses the Lease stops its workers and stands by, in
// the same process, until it leads again; and a leader asked to stop hands
// the Lease over once its workers are done. With --metrics-addr, every
// replica serves /metrics, /healthz and /readyz (pkg/metrics).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/events"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/leader"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/metrics"
	"github.com/example-inc/memcached-operator/pkg/sidecarpoll"
	"github.com/example-inc/memcached-operator/pkg/stub"
	"github.com/example-inc/memcached-operator/pkg/version"
	"github.com/operator-framework/operator-sdk/pkg/k8sclient"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	"github.com/operator-framework/operator-sdk/pkg/util/k8sutil"
	sdkversion "github.com/operator-framework/operator-sdk/version"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// component names the operator in Events and in its API user agent.
const component = "memcached-operator"

func main() {
	opts, err := parseOptions(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", component, err)
		os.Exit(2)
	}
	if opts.version {
		fmt.Println(versionString())
		return
	}
	opts.configureLogging()
	memoryLimit, err := setMemoryLimit(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", component, err)
		os.Exit(2)
	}
	logrus.Info(memoryLimit)
	// client-go 1.11 logs through glog, which writes to files by default;
	// a container with a read-only root file system needs stderr.
	_ = flag.CommandLine.Set("logtostderr", "true")

	stopProfiles, err := startProfiles(opts.cpuProfile, opts.memProfile)
	if err != nil {
		logrus.Fatalf("%v", err)
	}
	err = run(opts)
	if perr := stopProfiles(); perr != nil {
		logrus.Errorf("%v", perr)
	}
	if err != nil {
		logrus.Fatalf("%v", err)
	}
}

// run watches Memcached resources and their children until SIGINT or SIGTERM,
// and reconciles them: with --leader-elect, in each term that it holds the
// Lease.
func run(opts *options) error {
	logrus.Infof("starting %s", versionString())
	scope, err := watchScope(os.LookupEnv)
	if err != nil {
		return err
	}
	if err := checkNamespaceSelector(scope, opts.namespaces); err != nil {
		return err
	}
	var own string
	if opts.leaderElect {
		if own, err = ownNamespace(os.Getenv, scope); err != nil {
			return err
		}
	}
	operatorNamespace, err := podNamespace(os.Getenv)
	if err != nil {
		return err
	}
	if err := checkKubeConfig(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// Before any client or work queue exists: client-go reports only
	// to hooks registered before they are created.
	m := metrics.New()
	m.RegisterClientGo()

	// The SDK's client is limited to client-go's default of 5 requests/s; the
	// reconcile gets clients of its own from a copy of the same config. Each
	// request of theirs ends after --kube-api-timeout; the caches' lists and
	// watches, which a timeout would cut, go through twins without one.
	base := k8sclient.GetKubeConfig()
	cacheCfg := rest.CopyConfig(base)
	cacheCfg.QPS = float32(opts.kubeAPIQPS)
	cacheCfg.Burst = opts.kubeAPIBurst
	rest.AddUserAgent(cacheCfg, component)
	cfg := rest.CopyConfig(cacheCfg)
	cfg.Timeout = opts.kubeAPITimeout
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("failed to register Memcached: %v", err)
	}
	clients, err := kube.NewClients(cfg, cacheCfg)
	if err != nil {
		return err
	}
	// Event recording is never stopped: the process's exit ends it. The
	// sink of Events("") writes each Event in its own namespace, that of
	// the object it is about: a Memcached's in the Memcached's, the Lease's
	// in the operator's own.
	recorder, _ := events.NewRecorder(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")},
		scheme.Scheme, corev1.EventSource{Component: component}, logrus.Debugf)

	var elector *leader.Elector
	if opts.leaderElect {
		if elector, err = newElector(opts, base, own, recorder); err != nil {
			return err
		}
	}

	// Every readiness check is in place before the server answers its
	// first probe, so /readyz never says ready before it can know. A
	// replica is ready once its caches hold the Deployments and pods of
	// every watched namespace, so that a standby can take over without
	// filling them first, and, with leader election, while the API server
	// answers about the Lease.
	var synced atomic.Bool
	server := metrics.NewServer(m)
	server.AddReadyCheck("reconciler", func() error {
		if !synced.Load() {
			return errors.New("the informer caches have not synced yet")
		}
		return nil
	})
	if elector != nil {
		server.AddReadyCheck("leader-election", elector.Check)
	}
	if opts.metricsAddr != "" {
		addr, err := server.Start(ctx, opts.metricsAddr)
		if err != nil {
			return err
		}
		logrus.Infof("serving /metrics, /healthz and /readyz on %s", addr)
	}

	// sdk.Watch panics when it cannot resolve the kind, so wait for the API
	// first. Waiting, instead of exiting, rides out an API server outage and a
	// CRD applied after the operator: a replica that exited would be restarted
	// with the kubelet's growing back-off and come back later than the API.
	if !waitForMemcachedAPI(ctx, memcachedAPIPoll, clients.Discovery.ServerResourcesForGroupVersion) {
		logrus.Info("received a termination signal, shutting down")
		return nil
	}

	// The caches, the handler and the SDK's watch live as long as the
	// process, through every term: the SDK keeps its informers in a list of
	// its own, so sdk.Watch is called once for each watched namespace (once,
	// with "", for every namespace) before sdk.Run, and none of them can be
	// stopped. Between terms the handler keeps the latest Memcacheds and
	// queues nothing (see stub.Handler.Run).
	client, err := kube.NewCachedClient(clients, scope, stub.Kinds()...)
	if err != nil {
		return err
	}
	client.CheckServedEvery(opts.serviceMonitorCheck)
	var writer stub.Client = client
	if elector != nil {
		// No write leaves this process once its Lease may have
		// passed to another (see leader.Elector.MayWrite).
		writer = stub.GateWrites(client, elector.MayWrite)
	}
	handler := stub.NewHandler(writer, recorder, opts.memcachedImage)
	handler.UseSidecarImage(opts.sidecarImage)
	handler.BatchChildUpdates(opts.childBatch)
	handler.ReportProgressEvery(opts.progressEvery)
	handler.EnforcePolicy(opts.policy)
	handler.PaceRolls(opts.maxRollsParsed)
	handler.ObservePacingWaits(m.ObservePacingWait)
	handler.AdmitToNetworkPolicies(memcached.NetworkPolicyOptions{
		MonitoringNamespaces: opts.monitoringSelector,
		OperatorNamespace:    operatorNamespace,
	})
	if operatorNamespace == "" {
		logrus.Infof("%s is unset: the NetworkPolicies of spec.networkPolicy cannot name the operator's pods, and admit no operator to the sidecars' port", podNamespaceEnv)
	}
	if opts.windowParsed != nil {
		handler.UseMaintenanceWindow(*opts.windowParsed)
		logrus.Infof("rolls for a change of the operator's pod template start only in the maintenance window %s UTC of Memcacheds without their own", opts.windowParsed)
	}
	handler.ObserveReconciles(func(took time.Duration, err error) {
		m.ObserveReconcile(took, reconcileResult(err))
	})
	client.OnChildChange(handler.EnqueueMemcached)
	var namespaces *kube.NamespaceCache
	if opts.namespaces != nil {
		namespaces = kube.NewNamespaceCache(clients.CacheKube, opts.namespaces)
		handler.ServeNamespaces(namespaces.Serves)
		namespaces.OnServed(handler.EnqueueNamespace)
	}
	var poller *sidecarpoll.Poller
	if opts.sidecarPoll > 0 {
		poller = sidecarpoll.New(handler.PolledPods, handler.EnqueueMemcached, opts.sidecarPoll, logrus.StandardLogger())
		handler.ReadSidecarReports(poller)
	}
	if err := startCaches(ctx.Done(), namespaces, client); err != nil {
		if ctx.Err() != nil {
			logrus.Info("received a termination signal, shutting down")
			return nil
		}
		return err
	}
	synced.Store(true)
	logrus.Infof("watching %s, resync every %v, memcached image %s, sidecar image %s, at most %s concurrent rolls for a change of the operator's pod template", scope, opts.resync, opts.memcachedImage, opts.sidecarImage, opts.maxRolls)
	if namespaces != nil {
		logrus.Infof("serving only the namespaces labelled %s", opts.namespaces)
	}
	if opts.leaderElect {
		logrus.Infof("the Lease %s is in namespace %s", component, own)
	}
	for _, ns := range scope.Namespaces() {
		sdk.Watch(v1alpha1.APIVersion(), v1alpha1.Kind, ns, opts.resync)
	}
	sdk.Handle(handler)
	go sdk.Run(ctx)

	// lead is one term: the workers and the sidecar poll run until ctx
	// ends, and lead returns once they have stopped, so that the elector
	// hands the Lease over, or campaigns again, after their last writes.
	// The leader metric says 0 from the moment the term ends.
	lead := func(ctx context.Context) error {
		m.SetLeader(true)
		off := make(chan struct{})
		go func() {
			defer close(off)
			<-ctx.Done()
			m.SetLeader(false)
		}()
		var wg sync.WaitGroup
		if poller != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				poller.Run(ctx)
			}()
		}
		handler.Run(ctx, opts.workers)
		wg.Wait()
		<-off
		return nil
	}
	if elector == nil {
		err = lead(ctx)
	} else {
		err = elector.Run(ctx, lead)
	}
	if err == nil {
		logrus.Info("received a termination signal, shutting down")
	}
	return err
}

// startCaches runs the cache of served namespaces, if there is one, and
// the client's caches, and waits until they are filled, failing if stop
// closes first: a replica is ready only once it knows which namespaces it
// serves.
func startCaches(stop <-chan struct{}, namespaces *kube.NamespaceCache, client *kube.CachedClient) error {
	if namespaces != nil {
		if err := namespaces.Start(stop); err != nil {
			return err
		}
	}
	return client.Start(stop)
}

// memcachedAPIPoll is how often the operator checks, before it starts, whether
// the Memcached API is served.
const memcachedAPIPoll = 2 * time.Second

// waitForMemcachedAPI returns true once discover finds the Memcached API, polling
// every interval, or false when ctx ends first. It logs the first failure and then
// every tenth, so that a missing CRD is plain in the log without flooding it.
func waitForMemcachedAPI(ctx context.Context, interval time.Duration, discover func(groupVersion string) (*metav1.APIResourceList, error)) bool {
	attempts := 0
	err := wait.PollImmediateUntil(interval, func() (bool, error) {
		_, err := discover(v1alpha1.APIVersion())
		if err == nil {
			if attempts > 0 {
				logrus.Infof("the Memcached API %s is served", v1alpha1.APIVersion())
			}
			return true, nil
		}
		if attempts%10 == 0 {
			logrus.Warnf("waiting for the Memcached API %s (is deploy/crd.yaml applied?): %v", v1alpha1.APIVersion(), err)
		}
		attempts++
		return false, nil
	}, ctx.Done())
	return err == nil
}

// newElector returns the elector for the Lease named after the operator in
// namespace, with this process's identity.
func newElector(opts *options, base *rest.Config, namespace string, recorder record.EventRecorder) (*leader.Elector, error) {
	identity := opts.identity
	if identity == "" {
		// In a pod the host name is the pod's name too; POD_NAME says so
		// explicitly, and outside a pod the host name is the best there is.
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--leader-elect needs an identity: set POD_NAME (%v)", err)
		}
		identity = host
	}
	// The Lease gets a client of its own: its requests never wait behind
	// the reconcile's for a rate limiter (a renewal is a GET and a PUT per
	// retry period), and none of them can hang for longer than half the
	// renew deadline, so that the elector gets to retry in time. Its watch
	// gets a twin without that timeout, which client-go 1.11 would apply to
	// the watch too.
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = 10, 20
	rest.AddUserAgent(cfg, component+"/leader-election")
	watcher, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the leader election client: %v", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = opts.renewDeadline / 2
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the leader election client: %v", err)
	}
	return leader.New(leader.Config{
		Lock:          leader.NewLeaseLock(dyn, watcher, namespace, component, identity, recorder),
		LeaseDuration: opts.leaseDuration,
		RenewDeadline: opts.renewDeadline,
		RetryPeriod:   opts.retryPeriod,
		StopTime:      leaderStopTime,
	})
}

// leaderStopTime is how long the operator takes to stop writing once it has
// lost the Lease: every write asks leader.Elector.MayWrite first, which
// refuses from before the loss is reported, and a write that the API server
// had already received is taken to be stored within this time.
const leaderStopTime = time.Second

// reconcileResult names the outcome of a reconcile for the metrics.
func reconcileResult(err error) string {
	switch {
	case err == nil:
		return metrics.ResultSuccess
	case errors.Is(err, stub.ErrPanicked):
		return metrics.ResultPanic
	case stub.IsStale(err):
		return metrics.ResultConflict
	default:
		return metrics.ResultError
	}
}

// checkKubeConfig reports a missing cluster configuration as an error,
// before the SDK, which panics on it, gets to build its client.
func checkKubeConfig() error {
	if path := os.Getenv(k8sutil.KubeConfigEnvVar); path != "" {
		if _, err := clientcmd.BuildConfigFromFlags("", path); err != nil {
			return fmt.Errorf("failed to load %s=%s: %v", k8sutil.KubeConfigEnvVar, path, err)
		}
		return nil
	}
	if _, err := rest.InClusterConfig(); err != nil {
		return fmt.Errorf("not in a cluster (%v): set %s to a kubeconfig to run outside one", err, k8sutil.KubeConfigEnvVar)
	}
	return nil
}

// versionString names the build for --version and the first log line.
func versionString() string {
	return fmt.Sprintf("memcached-operator %s (commit %s, operator-sdk %s, %s %s/%s)",
		version.Version, version.GitCommit, sdkversion.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
