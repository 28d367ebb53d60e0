package stub

import (
	"errors"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// outcome is what a ReconcileObserver was told about one reconcile.
type outcome struct {
	ok, stale bool
}

func TestTellsObserverEveryReconcile(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.Resource}, "example", errors.New("modified"))
	m := memcachedtest.NewMemcached("example", 1)
	tests := []struct {
		name    string
		objects []runtime.Object
		failOn  map[string]error
		want    outcome
	}{
		{name: "success", objects: []runtime.Object{m, memcachedtest.OwnedDeployment(m, 1)}, want: outcome{ok: true}},
		{name: "failed step", objects: []runtime.Object{m}, failOn: map[string]error{"create deployment": quotaExceeded}, want: outcome{}},
		{name: "lost a race", objects: []runtime.Object{m, memcachedtest.OwnedDeployment(m, 1)}, failOn: map[string]error{"update memcached/status": conflict}, want: outcome{stale: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objects...)
			for k, v := range tt.failOn {
				f.client.failOn[k] = v
			}
			var got []outcome
			f.handler.ObserveReconciles(func(took time.Duration, err error) {
				if took < 0 {
					t.Errorf("reconcile took %v", took)
				}
				got = append(got, outcome{ok: err == nil, stale: IsStale(err)})
			})

			_ = f.handle(m, false)                     // an SDK event
			_ = f.handler.reconcileKey("test/example") // a child's change

			if len(got) != 2 || got[0] != tt.want || got[1] != tt.want {
				t.Errorf("observed %+v, want %+v twice", got, tt.want)
			}
		})
	}
}
