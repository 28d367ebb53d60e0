package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// readClient sends plain GET requests to the API server of one kubeconfig, as
// its user.
type readClient struct {
	host string
	http *http.Client
	// namespace is the kubeconfig context's namespace, or default.
	namespace string
}

// readClients holds one readClient per kubeconfig content, so that a
// kubeconfig file written again with other credentials gets a client of its
// own.
var readClients sync.Map // string (kubeconfig content) -> *readClient

// errNotFound is what getPath returns for an object the API server does not
// have; IsNotFound recognises it.
var errNotFound = errors.New("(NotFound)")

// getPath decodes into v the object or list at the API path under the
// kubeconfig's server, with the query q: the JSON that `kubectl get -o json`
// prints, read in-process. The polls of Observe run every half second in many
// tests at once; a kubectl process for each read cost about 90 ms of CPU,
// a fifth of what the suites used on 2 cores.
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
	u := c.host + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("GET %s: %w %s", path, errNotFound, strings.TrimSpace(string(body)))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
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
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", k.Kubeconfig, err)
	}
	c, _ := readClients.LoadOrStore(string(data), &readClient{host: strings.TrimSuffix(cfg.Host, "/"), http: hc, namespace: ns})
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
