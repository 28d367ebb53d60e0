package kube

import (
	"encoding/json"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/memcached"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestObserveRecordsALoosenedTemplate: the Deployment cache records, from
// the JSON that kube-apiserver sent, where someone loosened the pod
// template, as the trimmed copy that the reconcile reads keeps it, beside
// the digest, and none for the operator's own template; a change of the
// findings alone is a change that the reconcile hears of.
func TestObserveRecordsALoosenedTemplate(t *testing.T) {
	memcachedContainer := func(live map[string]interface{}) map[string]interface{} {
		containers, _, _ := unstructured.NestedFieldNoCopy(live, "spec", "template", "spec", "containers")
		c := containers.([]interface{})[0].(map[string]interface{})
		if c["name"] != "memcached" {
			t.Fatalf("first container %v, want memcached", c["name"])
		}
		return c
	}
	tests := []struct {
		name string
		edit func(live map[string]interface{})
		want string
	}{
		{name: "as applied", edit: func(map[string]interface{}) {}},
		{
			name: "runAsNonRoot false on the memcached container",
			edit: func(live map[string]interface{}) {
				memcachedContainer(live)["securityContext"].(map[string]interface{})["runAsNonRoot"] = false
			},
			want: "containers[memcached].securityContext.runAsNonRoot",
		},
		{
			name: "a privileged container and the host's network",
			edit: func(live map[string]interface{}) {
				spec, _, _ := unstructured.NestedMap(live, "spec", "template", "spec")
				spec["containers"] = append(spec["containers"].([]interface{}), map[string]interface{}{
					"name": "debug", "image": "busybox",
					"securityContext": map[string]interface{}{
						"privileged": true, "allowPrivilegeEscalation": true, "readOnlyRootFilesystem": true,
						"capabilities": map[string]interface{}{"drop": []interface{}{"ALL"}},
					},
				})
				spec["hostNetwork"] = true
				if err := unstructured.SetNestedMap(live, spec, "spec", "template", "spec"); err != nil {
					t.Fatal(err)
				}
			},
			want: "containers[debug].securityContext.allowPrivilegeEscalation,containers[debug].securityContext.privileged,hostNetwork",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := readTestdata(t, "live-applied.json").Object
			tt.edit(live)

			raw, err := json.Marshal(live)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := DeploymentKind.decodeJSON(raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			DeploymentKind.Trim(obj)

			d := obj.(*appsv1.Deployment)
			got, ok := d.Annotations[memcached.LoosenedAnnotation]
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("%s: got %q (set %v), want %q", memcached.LoosenedAnnotation, got, ok, tt.want)
			}
			if d.Annotations[memcached.ObservedDigestAnnotation] == "" {
				t.Errorf("the trimmed deployment lost its digest: %v", d.Annotations)
			}
			if len(d.Spec.Template.Spec.Containers) != 0 {
				t.Errorf("the trimmed deployment holds its containers")
			}
		})
	}
}

// TestObserveForgetsFindingsThatAreGone: an object that carried findings
// before is observed afresh, so that a template put back has none.
func TestObserveForgetsFindingsThatAreGone(t *testing.T) {
	raw, err := readTestdata(t, "live-applied.json").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	d.Annotations = map[string]string{memcached.LoosenedAnnotation: "hostPID"}
	if err := observeDeployment(raw, nil, d); err != nil {
		t.Fatal(err)
	}
	if v, ok := d.Annotations[memcached.LoosenedAnnotation]; ok {
		t.Errorf("got %q, want no findings", v)
	}
}

func TestDeploymentChangedCountsTheFindings(t *testing.T) {
	old := &appsv1.Deployment{}
	loosened := old.DeepCopy()
	loosened.Annotations = map[string]string{memcached.LoosenedAnnotation: "hostPID"}
	trimDeployment(old)
	trimDeployment(loosened)
	if !deploymentChanged(old, loosened) || !deploymentChanged(loosened, old) {
		t.Errorf("a change of %s alone must count as a change", memcached.LoosenedAnnotation)
	}
	if deploymentChanged(loosened, loosened.DeepCopy()) {
		t.Errorf("the same findings must not count as a change")
	}
}
