package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

const (
	testNamespace = "ns"
	testLease     = "memcached-operator"
	leasesPath    = "/apis/coordination.k8s.io/v1/namespaces/" + testNamespace + "/leases"
)

// fakeAPI serves the Lease API of one namespace as the API server does:
// GET, POST and PUT, resourceVersion bumped on every write, PUT refused
// with a Conflict unless it carries the stored resourceVersion, POST
// refused with AlreadyExists.
type fakeAPI struct {
	mu     sync.Mutex
	leases map[string]map[string]interface{}
	rv     int
	writes int
	// watchers receive every change as a watch event line.
	watchers map[chan []byte]bool
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{leases: map[string]map[string]interface{}{}, watchers: map[chan []byte]bool{}}
}

// lease returns a copy of the stored Lease name, or nil.
func (a *fakeAPI) lease(name string) map[string]interface{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	obj, ok := a.leases[name]
	if !ok {
		return nil
	}
	data, _ := json.Marshal(obj)
	var out map[string]interface{}
	_ = json.Unmarshal(data, &out)
	return out
}

// remove deletes Lease name, as `kubectl delete lease` would.
func (a *fakeAPI) remove(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if obj, ok := a.leases[name]; ok {
		delete(a.leases, name)
		a.notify("DELETED", obj)
	}
}

// setHolder writes holder into Lease name's spec, as `kubectl edit` would.
func (a *fakeAPI) setHolder(name, holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	obj := a.leases[name]
	obj["spec"].(map[string]interface{})["holderIdentity"] = holder
	obj["metadata"].(map[string]interface{})["resourceVersion"] = strconv.Itoa(a.rv)
	a.notify("MODIFIED", obj)
}

// put stores obj as Lease name, as another client would.
func (a *fakeAPI) put(name string, obj map[string]interface{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	obj["metadata"].(map[string]interface{})["resourceVersion"] = strconv.Itoa(a.rv)
	a.leases[name] = obj
	a.notify("MODIFIED", obj)
}

// notify sends a watch event of typ about obj to every watcher; a.mu is
// held. A watcher too slow for its buffer fails the watch, as the API
// server ends a watch that falls behind.
func (a *fakeAPI) notify(typ string, obj map[string]interface{}) {
	line, err := json.Marshal(map[string]interface{}{"type": typ, "object": obj})
	if err != nil {
		panic(err)
	}
	// Every watcher writes the same line, so it is complete before it is shared.
	line = append(line, '\n')
	for ch := range a.watchers {
		select {
		case ch <- line:
		default:
			close(ch)
			delete(a.watchers, ch)
		}
	}
}

// serveWatch streams the changes of the Leases, as a watch of the API
// server does, until the client or the test goes away.
func (a *fakeAPI) serveWatch(w http.ResponseWriter, r *http.Request) {
	events := make(chan []byte, 64)
	a.mu.Lock()
	a.watchers[events] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.watchers[events] {
			delete(a.watchers, events)
		}
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case line, ok := <-events:
			if !ok {
				return
			}
			_, _ = w.Write(line)
			w.(http.Flusher).Flush()
		}
	}
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == leasesPath && r.URL.Query().Get("watch") == "true" {
		a.serveWatch(w, r)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, leasesPath), "/")
	if !strings.HasPrefix(r.URL.Path, leasesPath) || strings.Contains(name, "/") {
		writeStatus(w, http.StatusNotFound, "NotFound", "no such path "+r.URL.Path)
		return
	}
	var body map[string]interface{}
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && name != "":
		obj, ok := a.leases[name]
		if !ok {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
			return
		}
		writeJSON(w, http.StatusOK, obj)
	case r.Method == http.MethodPost && name == "":
		meta := body["metadata"].(map[string]interface{})
		name = meta["name"].(string)
		if _, ok := a.leases[name]; ok {
			writeStatus(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("leases.coordination.k8s.io %q already exists", name))
			return
		}
		a.rv++
		a.writes++
		meta["resourceVersion"] = strconv.Itoa(a.rv)
		meta["uid"] = "uid-" + name
		a.leases[name] = body
		a.notify("ADDED", body)
		writeJSON(w, http.StatusCreated, body)
	case r.Method == http.MethodPut && name != "":
		old, ok := a.leases[name]
		if !ok {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
			return
		}
		meta := body["metadata"].(map[string]interface{})
		if meta["resourceVersion"] != old["metadata"].(map[string]interface{})["resourceVersion"] {
			writeStatus(w, http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on leases.coordination.k8s.io %q: the object has been modified", name))
			return
		}
		a.rv++
		a.writes++
		meta["resourceVersion"] = strconv.Itoa(a.rv)
		a.leases[name] = body
		a.notify("MODIFIED", body)
		writeJSON(w, http.StatusOK, body)
	default:
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" "+r.URL.Path)
	}
}

func writeJSON(w http.ResponseWriter, code int, obj interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	writeJSON(w, code, map[string]interface{}{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]interface{}{},
		"status": "Failure", "reason": reason, "message": message, "code": code,
	})
}

// front is one candidate's way to the fake API server, which a test can
// pause (requests wait, as they do when the process or the network stalls,
// and reach the API server late once resumed) or make refuse the candidate
// (403, as RBAC would).
type front struct {
	srv    *httptest.Server
	forbid atomic.Bool
	mu     sync.Mutex
	// held is closed by resume; nil while requests pass.
	held chan struct{}
	// closing is closed when the test ends, dropping held requests.
	closing chan struct{}
}

func newFront(t *testing.T, api http.Handler) *front {
	f := &front{closing: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		held := f.held
		f.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-f.closing:
				return
			}
		}
		if f.forbid.Load() {
			writeStatus(w, http.StatusForbidden, "Forbidden", `leases.coordination.k8s.io is forbidden: User "system:serviceaccount:ns:x" cannot get resource "leases"`)
			return
		}
		// A watch lasts until the test ends, which must not wait for it.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-f.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		api.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() {
		close(f.closing)
		f.srv.Close()
	})
	return f
}

// pause makes requests through f wait until resume.
func (f *front) pause() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = make(chan struct{})
	}
}

// resume lets the waiting requests reach the API server, late, and the
// next ones pass.
func (f *front) resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		close(f.held)
		f.held = nil
	}
}

// lock returns a LeaseLock for identity through f.
func (f *front) lock(t *testing.T, identity string) *LeaseLock {
	t.Helper()
	// Renewing at the tests' short retry period takes far more than
	// client-go's default 5 requests/s.
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: f.srv.URL, QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return NewLeaseLock(dyn, dyn, testNamespace, testLease, identity, nil)
}
