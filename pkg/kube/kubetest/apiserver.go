// Package kubetest serves the tests of the operator's API clients with an
// API server of their own, which records every request and answers with
// what the test says, so that a test checks the requests a client sends as
// the API server sees them.
package kubetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Request is one request the APIServer received.
type Request struct {
	Method, Path, ContentType, Body string
	// Query is the request's query string, as sent.
	Query string
}

// APIServer records the requests of a client and answers each with the
// JSON of respond's object, or 404 without one; a *metav1.Status goes with
// its code, and a Created with 201.
type APIServer struct {
	mu       sync.Mutex
	requests []Request
	respond  func(r Request) interface{}
}

// NewAPIServer starts an APIServer that answers with respond until the
// test ends, and returns it with the client configuration that reaches it.
func NewAPIServer(t *testing.T, respond func(r Request) interface{}) (*APIServer, *rest.Config) {
	t.Helper()
	api := &APIServer{respond: respond}
	server := httptest.NewServer(api)
	t.Cleanup(server.Close)
	return api, &rest.Config{Host: server.URL}
}

// ServeHTTP records r and answers it.
func (s *APIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Body: string(body), Query: r.URL.RawQuery}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	var obj interface{}
	if s.respond != nil {
		obj = s.respond(req)
	}
	w.Header().Set("Content-Type", "application/json")
	switch o := obj.(type) {
	case *metav1.Status:
		w.WriteHeader(int(o.Code))
	case Created:
		w.WriteHeader(http.StatusCreated)
		obj = o.Object
	}
	if obj == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	_ = json.NewEncoder(w).Encode(obj)
}

// Created, as respond's answer, answers with its Object and 201 Created, as
// the API server answers an apply that created the object.
type Created struct {
	Object interface{}
}

// Got returns the requests received so far, in their order.
func (s *APIServer) Got() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}
