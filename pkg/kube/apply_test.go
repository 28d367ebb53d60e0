package kube

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// readTestdata returns a file of package memcached's testdata: a Deployment
// as the operator applies it (applied.json) and kube-apiserver v1.37.2's
// answers to that apply and to hand edits (see memcached's owned_test.go).
func readTestdata(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../memcached/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

func status(code int32, reason metav1.StatusReason) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: code, Reason: reason}
}

func TestApplyNewSendsAnApplyThatNeverForces(t *testing.T) {
	applied := readTestdata(t, "applied.json")
	live := readTestdata(t, "live-applied.json")
	edited := readTestdata(t, "live-image-changed.json")
	tests := []struct {
		name string
		// answer is the API server's answer to the apply; a GET then gets
		// live.
		answer     interface{}
		wantExists bool
		wantDigest bool
	}{
		{name: "201 is a create", answer: kubetest.Created{Object: live.Object}, wantDigest: true},
		{name: "200 is an object that existed", answer: live.Object, wantExists: true},
		{name: "a conflict is an object that exists", answer: status(http.StatusConflict, metav1.StatusReasonConflict), wantExists: true},
		{name: "a second controller is an object that exists", answer: status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid), wantExists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r kubetest.Request) interface{} {
				if r.Method == "GET" {
					return edited.Object
				}
				return tt.answer
			})

			got, err := c.ApplyNew(DeploymentKind, applied)

			reqs := api.Got()
			if len(reqs) == 0 {
				t.Fatal("no request")
			}
			r := reqs[0]
			if r.Method != "PATCH" || r.Path != "/apis/apps/v1/namespaces/default/deployments/example" ||
				r.ContentType != "application/apply-patch+yaml" || r.Query != "fieldManager=memcached-operator" {
				t.Errorf("request: got %s %s %s ?%s, want PATCH of deployments/example as an apply by memcached-operator, without force", r.Method, r.Path, r.ContentType, r.Query)
			}
			if tt.wantExists != apierrors.IsAlreadyExists(err) || (!tt.wantExists && err != nil) {
				t.Fatalf("error: got %v, want AlreadyExists %t", err, tt.wantExists)
			}
			if !tt.wantDigest {
				return
			}
			want, _ := memcached.DesiredDigest(applied.Object)
			if d := got.GetAnnotations()[memcached.ObservedDigestAnnotation]; d != want {
				t.Errorf("created deployment's digest: got %q, want %q, the applied one's", d, want)
			}
		})
	}
}

func TestApplyForcesWithTheUIDAsItsPrecondition(t *testing.T) {
	applied := readTestdata(t, "applied.json")
	other := readTestdata(t, "live-applied.json")
	other.SetUID("uid-of-another")
	tests := []struct {
		name         string
		answer       interface{}
		read         interface{}
		wantReplaced bool
	}{
		{name: "applied", answer: other.Object},
		{name: "another object of the name", answer: status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid), read: other.Object, wantReplaced: true},
		{name: "gone", answer: status(http.StatusConflict, metav1.StatusReasonConflict), wantReplaced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r kubetest.Request) interface{} {
				if r.Method == "GET" {
					return tt.read
				}
				return tt.answer
			})

			err := c.Apply(DeploymentKind, applied, "uid-1")

			if got := errors.Is(err, ErrReplaced); got != tt.wantReplaced || (!tt.wantReplaced && err != nil) {
				t.Fatalf("error: got %v, want ErrReplaced %t", err, tt.wantReplaced)
			}
			r := api.Got()[0]
			if r.Method != "PATCH" || r.ContentType != "application/apply-patch+yaml" || r.Query != "fieldManager=memcached-operator&force=true" ||
				!strings.Contains(r.Body, `"uid":"uid-1"`) {
				t.Errorf("request: got %s %s ?%s %s, want a forced apply by memcached-operator that carries uid-1", r.Method, r.ContentType, r.Query, r.Body)
			}
		})
	}
}

func TestConvertUpdatesPatchesTheRecordOnlyWhenItMust(t *testing.T) {
	applied := readTestdata(t, "live-applied.json")
	updated := applied.DeepCopy()
	entries, _, _ := unstructured.NestedSlice(updated.Object, "metadata", "managedFields")
	entries[0].(map[string]interface{})["operation"] = "Update"
	_ = unstructured.SetNestedSlice(updated.Object, entries, "metadata", "managedFields")
	uid := applied.GetUID()
	tests := []struct {
		name string
		live *unstructured.Unstructured
		want []string
	}{
		{name: "never applied", live: updated, want: []string{"GET", "PATCH"}},
		{name: "applied", live: applied, want: []string{"GET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api := newTestCachedClient(t, nil, func(r kubetest.Request) interface{} { return tt.live.Object })

			if err := c.ConvertUpdates(DeploymentKind, "default", "example", uid); err != nil {
				t.Fatal(err)
			}

			var got []string
			for _, r := range api.Got() {
				got = append(got, r.Method)
				if r.Method == "PATCH" && (!strings.Contains(r.Body, `{"op":"test","path":"/metadata/resourceVersion","value":"`+tt.live.GetResourceVersion()+`"}`) ||
					!strings.Contains(r.Body, `"operation":"Apply"`)) {
					t.Errorf("patch %s: want it to test the resourceVersion and make the entry an Apply", r.Body)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("requests: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAppliesCarryTheAPIServersRefusal: a refused apply returns the API
// server's Status, whose message the Degraded condition and the Warning
// Event carry.
func TestAppliesCarryTheAPIServersRefusal(t *testing.T) {
	applied := readTestdata(t, "applied.json")
	refusal := status(http.StatusForbidden, metav1.StatusReasonForbidden)
	refusal.Message = `deployments.apps "example" is forbidden: exceeded quota: no-deployments`
	c, _ := newTestCachedClient(t, nil, func(kubetest.Request) interface{} { return refusal })

	_, err := c.ApplyNew(DeploymentKind, applied)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: no-deployments") {
		t.Errorf("ApplyNew: got %v, want the API server's Forbidden with its message", err)
	}
	err = c.Apply(DeploymentKind, applied, "uid-1")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: no-deployments") {
		t.Errorf("Apply: got %v, want the API server's Forbidden with its message", err)
	}
}

// TestObservedListPagesAndTrims: the Deployment cache lists page by page
// through the API server, each object trimmed with its digest kept, and the
// list has the first page's resourceVersion, the snapshot all pages are
// from.
func TestObservedListPagesAndTrims(t *testing.T) {
	live := readTestdata(t, "live-applied.json")
	page := func(names []string, version, next string) map[string]interface{} {
		var items []interface{}
		for _, n := range names {
			o := live.DeepCopy()
			o.SetName(n)
			items = append(items, o.Object)
		}
		return map[string]interface{}{"apiVersion": "apps/v1", "kind": "DeploymentList",
			"metadata": map[string]interface{}{"resourceVersion": version, "continue": next}, "items": items}
	}
	api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
		if strings.Contains(r.Query, "continue=next") {
			return page([]string{"c"}, "20", "")
		}
		return page([]string{"a", "b"}, "10", "next")
	})
	client, codec, err := kindREST(cfg, DeploymentKind, jsonScheme([]*Kind{DeploymentKind}))
	if err != nil {
		t.Fatal(err)
	}
	list, watchFn := jsonListWatch(client, codec, DeploymentKind, "default", nil)
	lw := trimmedListWatch(labelSelector(memcached.ManagedSelector), list, watchFn, DeploymentKind.Trim)

	got, err := lw.List(metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}

	l := got.(*appsv1.DeploymentList)
	want, _ := memcached.DesiredDigest(readTestdata(t, "applied.json").Object)
	if len(l.Items) != 3 || l.ResourceVersion != "10" {
		t.Fatalf("list: %d items at resourceVersion %q, want 3 at the first page's 10", len(l.Items), l.ResourceVersion)
	}
	for _, d := range l.Items {
		if d.Annotations[memcached.ObservedDigestAnnotation] != want || len(d.Spec.Template.Spec.Containers) != 0 {
			t.Errorf("deployment %s: digest %q, %d containers; want %q and trimmed", d.Name, d.Annotations[memcached.ObservedDigestAnnotation], len(d.Spec.Template.Spec.Containers), want)
		}
	}
	reqs := api.Got()
	if len(reqs) != 2 || !strings.Contains(reqs[0].Query, "limit=500") || strings.Contains(reqs[0].Query, "resourceVersion") {
		t.Errorf("requests %+v, want two pages of at most 500", reqs)
	}
}
