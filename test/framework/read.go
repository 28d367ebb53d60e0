package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// readClient sends GET requests to the API server of one kubeconfig, as its
// user.
type readClient struct {
	rest *rest.RESTClient
	// namespace is the kubeconfig context's namespace, or default.
	namespace string
}

// readClients holds one readClient per kubeconfig content, so that a
// kubeconfig file written again with other credentials gets a client of its
// own.
var readClients sync.Map // string (kubeconfig content) -> *readClient

// getPath decodes into v the object or list at the API path under the
// kubeconfig's server, with the query q: the JSON that `kubectl get -o json`
// prints, read in-process. The polls of Observe run every half second in many
// tests at once; a kubectl process for each read cost about 90 ms of CPU,
// a fifth of what the suites used on 2 cores. A missing object gives an
// error that IsNotFound recognises.
func (k Kubectl) getPath(ctx context.Context, v any, path string, q url.Values) error {
	c, err := k.readClient()
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CommandTimeout)
		defer cancel()
	}
	req := c.rest.Get().AbsPath(path).SetHeader("Accept", "application/json")
	for key, values := range q {
		for _, value := range values {
			req = req.Param(key, value)
		}
	}
	body, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode GET %s: %v", path, err)
	}
	return nil
}

// readClient returns the client for k's kubeconfig as the file holds it now.
func (k Kubectl) readClient() (*readClient, error) {
	data, err := os.ReadFile(k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if c, ok := readClients.Load(string(data)); ok {
		return c.(*readClient), nil
	}
	kc, err := clientcmd.NewClientConfigFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", k.Kubeconfig, err)
	}
	cfg, err := kc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", k.Kubeconfig, err)
	}
	ns, _, err := kc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", k.Kubeconfig, err)
	}
	// Raw JSON in, raw JSON out: the suites decode it into their own types.
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	// No client-side limit, as with kubectl's one process per read: the
	// polls of the parallel tests share this client, and client-go's default
	// 5 requests per second made them miss their deadlines.
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", k.Kubeconfig, err)
	}
	c, _ := readClients.LoadOrStore(string(data), &readClient{rest: rc, namespace: ns})
	return c.(*readClient), nil
}

// nsPath returns the API path prefix of k's namespace, as kubectl picks it:
// k.Namespace, else the kubeconfig context's, else default.
func (k Kubectl) nsPath(group string) (string, error) {
	ns := k.Namespace
	if ns == "" {
		c, err := k.readClient()
		if err != nil {
			return "", err
		}
		ns = c.namespace
	}
	return group + "/namespaces/" + url.PathEscape(ns), nil
}
