package stub

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/kube/kubetest"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// configMapChild is a child that only this file declares, as a new child's
// file would: a ConfigMap that holds its Memcached's size. The tests below
// run it through the generic step, the fake client and CachedClient as they
// are, which shows that a new kind of child needs nothing else.
var configMapChild = &ownedChild[*corev1.ConfigMap]{
	childKind: childKind{
		kind:         "configmap",
		readFailed:   "ConfigMapReadFailed",
		createFailed: "ConfigMapCreateFailed",
		notOwned:     "ConfigMapNotOwned",
		updateFailed: "ConfigMapUpdateFailed",
	},
	api: &kube.Kind{
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		New:      func() kube.Object { return &corev1.ConfigMap{} },
		NewList:  func() runtime.Object { return &corev1.ConfigMapList{} },
	},
	want: func(_ *Handler, m *v1alpha1.Memcached) (*corev1.ConfigMap, error) {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: memcached.NewService(m).ObjectMeta,
			Data:       map[string]string{"size": fmt.Sprint(m.Spec.Size)},
		}, nil
	},
	holds: func(got, want *corev1.ConfigMap) bool { return reflect.DeepEqual(got.Data, want.Data) },
	restore: func(_, want *corev1.ConfigMap) map[string]interface{} {
		return map[string]interface{}{"/data": want.Data}
	},
	restoreFailed: "failed to restore configmap %s/%s: %w",
	restored:      event{"ConfigMapUpdated", "Restored configmap %s"},
}

func TestANewChildIsOneDeclaration(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	want, _ := configMapChild.want(nil, m)
	changed := want.DeepCopy()
	changed.Data["size"] = "7"
	foreign := want.DeepCopy()
	foreign.OwnerReferences = nil
	tests := []struct {
		name        string
		existing    *corev1.ConfigMap
		wantActions []string
		wantErr     string
		wantEvents  []string
	}{
		{
			name:        "created",
			wantActions: []string{"get configmap test/example", "create configmap test/example"},
		},
		{
			name:        "as wanted",
			existing:    want,
			wantActions: []string{"get configmap test/example"},
		},
		{
			name:        "restored",
			existing:    changed,
			wantActions: []string{"get configmap test/example", "patch configmap test/example"},
			wantEvents:  []string{"Normal ConfigMapUpdated Restored configmap example"},
		},
		{
			name:        "someone else's is left alone",
			existing:    foreign,
			wantActions: []string{"get configmap test/example", "read configmap test/example"},
			wantErr:     "configmap test/example already exists and is not controlled by memcached example",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, m)
			configMaps := map[string]*corev1.ConfigMap{}
			if tt.existing != nil {
				configMaps["test/example"] = tt.existing.DeepCopy()
			}
			gr := configMapChild.api.Resource.GroupResource()
			f.client.stores[gr] = typedStore[*corev1.ConfigMap]{"configmap", gr, configMaps}

			fail := configMapChild.ensure(f.handler, m)

			if tt.wantErr == "" && fail != nil || tt.wantErr != "" && (fail == nil || fail.Error() != tt.wantErr) {
				t.Fatalf("ensure: got %v, want %q", fail, tt.wantErr)
			}
			if tt.wantErr != "" && fail.reason != "ConfigMapNotOwned" {
				t.Errorf("reason: got %q, want ConfigMapNotOwned", fail.reason)
			}
			checkActions(t, f.client.actions, tt.wantActions)
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events: got %q, want %q", got, tt.wantEvents)
			}
			if tt.wantErr == "" {
				if got := configMaps["test/example"]; got == nil || !reflect.DeepEqual(got.Data, want.Data) {
					t.Errorf("configmap after ensure: got %v, want data %v", got, want.Data)
				}
			}
			if tt.wantErr != "" && !reflect.DeepEqual(configMaps["test/example"], foreign) {
				t.Errorf("someone else's configmap changed: got %v", configMaps["test/example"])
			}
		})
	}
}

// TestCachedClientServesANewChild: CachedClient, given a kind that package
// kube has never heard of, creates it from its manifest and then knows it
// without a read, so the second reconcile of the step sends no request.
func TestCachedClientServesANewChild(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 2)
	want, _ := configMapChild.want(nil, m)
	api, cfg := kubetest.NewAPIServer(t, func(r kubetest.Request) interface{} {
		if r.Method == "POST" {
			return want
		}
		return nil // 404
	})
	clients, err := kube.NewClients(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewCachedClient(clients, kube.NewScope("test"), append(Kinds(), configMapChild.api)...)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(c, record.NewFakeRecorder(10), memcachedtest.Image)

	for i := 0; i < 2; i++ {
		if f := configMapChild.ensure(h, m); f != nil {
			t.Fatalf("ensure %d: %v", i, f)
		}
	}

	reqs := api.Got()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/api/v1/namespaces/test/configmaps" ||
		!strings.Contains(reqs[0].Body, `"size":"2"`) {
		t.Errorf("API requests: got %+v, want one POST of the configmap", reqs)
	}
}

func TestTrimmedServiceAndBudgetKeepWhatTheReconcileCompares(t *testing.T) {
	m := memcachedtest.NewMemcached("example", 3)
	s := memcached.NewService(m)
	s.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	want := memcached.NewService(m)
	trimService(s)
	if !reflect.DeepEqual(s, want) {
		t.Errorf("trimmed service:\n got %+v\nwant %+v", s, want)
	}
	p := memcached.NewPodDisruptionBudget(m)
	p.Status.CurrentHealthy = 3
	wantPDB := memcached.NewPodDisruptionBudget(m)
	trimPodDisruptionBudget(p)
	if !reflect.DeepEqual(p, wantPDB) {
		t.Errorf("trimmed budget:\n got %+v\nwant %+v", p, wantPDB)
	}
}
