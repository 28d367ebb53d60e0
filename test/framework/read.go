package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Do, not DoRaw: Result.Error decodes the API server's Status, so that a
	// NotFound keeps the name of the object it is about (see namesObject).
	res := req.Do(ctx)
	body, err := res.Raw()
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, res.Error())
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
	// The scheme holds only metav1's Status, so that an error keeps what the
	// API server said (its reason and details) instead of a generic one.
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
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

// apiResource is where the API server serves one resource.
type apiResource struct {
	// prefix is the group version's path: /api/v1 or /apis/GROUP/VERSION.
	prefix     string
	resource   string
	namespaced bool
}

// readResources maps the names that the suites give `kubectl get` to the
// resources kubectl resolves them to: the core group first, as its discovery
// does (events are core/v1 Events, which the suites' involvedObject field
// selectors need).
var readResources = func() map[string]apiResource {
	m := map[string]apiResource{}
	add := func(prefix, resource string, namespaced bool, names ...string) {
		for _, n := range append(names, resource) {
			m[n] = apiResource{prefix: prefix, resource: resource, namespaced: namespaced}
		}
	}
	add("/api/v1", "pods", true, "pod", "po")
	add("/api/v1", "services", true, "service", "svc")
	add("/api/v1", "events", true, "event", "ev")
	add("/api/v1", "configmaps", true, "configmap", "cm")
	add("/api/v1", "resourcequotas", true, "resourcequota", "quota")
	add("/api/v1", "nodes", false, "node", "no")
	add("/apis/apps/v1", "deployments", true, "deployment", "deploy", "deployments.apps")
	add("/apis/policy/v1", "poddisruptionbudgets", true, "poddisruptionbudget", "pdb", "poddisruptionbudgets.v1.policy")
	add("/apis/coordination.k8s.io/v1", "leases", true, "lease")
	add("/apis/discovery.k8s.io/v1", "endpointslices", true, "endpointslice")
	add("/apis/rbac.authorization.k8s.io/v1", "roles", true, "role")
	add("/apis/cache.example.com/v1alpha1", "memcacheds", true, "memcached")
	add("/apis/monitoring.coreos.com/v1", "servicemonitors", true, "servicemonitor")
	add("/apis/monitoring.coreos.com/v1", "prometheusrules", true, "prometheusrule")
	add("/apis/operators.coreos.com/v1", "operatorgroups", true, "operatorgroup")
	add("/apis/operators.coreos.com/v1alpha1", "clusterserviceversions", true, "clusterserviceversion", "csv")
	return m
}()

// getRequest is a `kubectl get` that GetJSON reads in-process.
type getRequest struct {
	resource      apiResource
	name          string
	labels        string
	fields        string
	allNamespaces bool
}

// parseGet returns the in-process form of the `kubectl get` arguments args,
// or false for a form it does not know: several resources or names, a
// resource outside readResources, or another flag.
func parseGet(args []string) (getRequest, bool) {
	if len(args) == 0 {
		return getRequest{}, false
	}
	r := getRequest{}
	var ok bool
	if r.resource, ok = readResources[args[0]]; !ok {
		return getRequest{}, false
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		flag, value, hasValue := strings.Cut(a, "=")
		var into *string
		switch flag {
		case "-l", "--selector":
			into = &r.labels
		case "--field-selector":
			into = &r.fields
		case "-A", "--all-namespaces":
			if hasValue {
				return getRequest{}, false
			}
			r.allNamespaces = true
			continue
		default:
			if strings.HasPrefix(a, "-") || r.name != "" || a == "" {
				return getRequest{}, false
			}
			r.name = a
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return getRequest{}, false
			}
			i++
			value = args[i]
		}
		if *into != "" {
			return getRequest{}, false
		}
		*into = value
	}
	if r.name != "" && (r.labels != "" || r.fields != "" || r.allNamespaces) {
		return getRequest{}, false
	}
	return r, true
}

// getJSON reads r in-process and decodes it into v as `kubectl get -o json`
// prints it: an object as the API server serves it, a list as a kind List
// whose items carry their kind and apiVersion.
func (k Kubectl) getJSON(ctx context.Context, v any, r getRequest) error {
	usage.read()
	path := r.resource.prefix
	if r.resource.namespaced && !r.allNamespaces {
		var err error
		if path, err = k.nsPath(path); err != nil {
			return err
		}
	}
	path += "/" + r.resource.resource
	if r.name != "" {
		err := k.getPath(ctx, v, path+"/"+url.PathEscape(r.name), nil)
		if apierrors.IsNotFound(err) && !namesObject(err, r.name) {
			return notServed(path, err)
		}
		return err
	}
	q := url.Values{}
	if r.labels != "" {
		q.Set("labelSelector", r.labels)
	}
	if r.fields != "" {
		q.Set("fieldSelector", r.fields)
	}
	var list struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := k.getPath(ctx, &list, path, q); err != nil {
		if apierrors.IsNotFound(err) {
			// A list of a served resource is never missing, even in a
			// namespace that does not exist.
			return notServed(path, err)
		}
		return err
	}
	items := make([]any, len(list.Items))
	for i, item := range list.Items {
		item["apiVersion"] = list.APIVersion
		item["kind"] = strings.TrimSuffix(list.Kind, "List")
		items[i] = item
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
		"items":      items,
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode GET %s: %v", path, err)
	}
	return nil
}

// namesObject reports whether the NotFound err is the API server's answer for
// the object name, which names it in the Status's details; a path that the
// server does not serve at all (a kind it lacks, a CRD deleted) gets a
// NotFound without them.
func namesObject(err error, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == name
}

// notServed is the error of a read whose path the API server does not serve,
// as kubectl's "the server doesn't have a resource type" is: not one that
// IsNotFound recognises, or a poll for an object to be gone would pass when
// its kind is not served at all, or mapped to the wrong path in readResources.
func notServed(path string, err error) error {
	return fmt.Errorf("the API server does not serve %s: %v", path, err)
}
