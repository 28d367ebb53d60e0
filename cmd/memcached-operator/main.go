// Command memcached-operator runs memcached clusters for Memcached custom
// resources in the namespace named by WATCH_NAMESPACE.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/stub"
	"github.com/example-inc/memcached-operator/pkg/version"
	"github.com/operator-framework/operator-sdk/pkg/k8sclient"
	"github.com/operator-framework/operator-sdk/pkg/sdk"
	"github.com/operator-framework/operator-sdk/pkg/util/k8sutil"
	sdkversion "github.com/operator-framework/operator-sdk/version"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
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
	// client-go 1.11 logs through glog, which writes to files by default;
	// a container with a read-only root file system needs stderr.
	_ = flag.CommandLine.Set("logtostderr", "true")

	if err := run(opts); err != nil {
		logrus.Fatalf("%v", err)
	}
}

// run watches Memcached resources and their children until SIGINT or SIGTERM.
func run(opts *options) error {
	logrus.Infof("starting %s", versionString())
	namespace, err := k8sutil.GetWatchNamespace()
	if err != nil {
		return fmt.Errorf("%v: set it to the namespace to manage (the downward API's metadata.namespace in a pod)", err)
	}
	if err := checkKubeConfig(); err != nil {
		return err
	}
	// The SDK's client is limited to client-go's default of 5 requests/s; the
	// reconcile gets clients of its own from a copy of the same config.
	cfg := rest.CopyConfig(k8sclient.GetKubeConfig())
	cfg.QPS = float32(opts.kubeAPIQPS)
	cfg.Burst = opts.kubeAPIBurst
	rest.AddUserAgent(cfg, component)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create kubernetes client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create dynamic client: %v", err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.APIVersion()); err != nil {
		return fmt.Errorf("the Memcached API %s is not served, is deploy/crd.yaml applied? %v", v1alpha1.APIVersion(), err)
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("failed to register Memcached for Events: %v", err)
	}

	broadcaster := record.NewBroadcaster()
	broadcaster.StartLogging(logrus.Debugf)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events(namespace)})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	client := stub.NewCachedClient(kube, dyn, namespace)
	handler := stub.NewHandler(client, recorder, opts.memcachedImage)
	client.OnChildChange(handler.EnqueueMemcached)
	if err := client.Start(ctx.Done()); err != nil {
		return err
	}
	go handler.Run(ctx)

	logrus.Infof("watching namespace %q, resync every %v, memcached image %s", namespace, opts.resync, opts.memcachedImage)
	sdk.Watch(v1alpha1.APIVersion(), v1alpha1.Kind, namespace, opts.resync)
	sdk.Handle(handler)
	sdk.Run(ctx)
	logrus.Info("received a termination signal, shutting down")
	return nil
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
