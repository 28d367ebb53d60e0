package stub

import (
	"errors"
	"fmt"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/kube"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ErrWritesStopped is wrapped by the error of a write that GateWrites's
// check refused. Such a reconcile stops where it is, writes no status and
// records no Event, which would be writes too, and is retried quietly: the
// process stands by, or leads again by then.
var ErrWritesStopped = errors.New("writes are stopped")

// GateWrites returns client with every write asking mayWrite first and not
// sent when it refuses, such as a leader elector's check that the Lease
// was renewed recently enough that no other replica can lead yet. Reads
// are not gated: they change nothing.
func GateWrites(client Client, mayWrite func() error) Client {
	return &gatedClient{Client: client, mayWrite: mayWrite}
}

type gatedClient struct {
	Client
	mayWrite func() error
}

func (g *gatedClient) check() error {
	if err := g.mayWrite(); err != nil {
		return fmt.Errorf("%w: %v", ErrWritesStopped, err)
	}
	return nil
}

func (g *gatedClient) UpdateMemcachedStatus(m *v1alpha1.Memcached) (*v1alpha1.Memcached, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.Client.UpdateMemcachedStatus(m)
}

func (g *gatedClient) Create(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.Client.Create(k, manifest)
}

func (g *gatedClient) ApplyNew(k *kube.Kind, manifest *unstructured.Unstructured) (kube.Object, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.Client.ApplyNew(k, manifest)
}

func (g *gatedClient) Apply(k *kube.Kind, manifest *unstructured.Unstructured, uid types.UID) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Apply(k, manifest, uid)
}

func (g *gatedClient) ConvertUpdates(k *kube.Kind, namespace, name string, uid types.UID) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.ConvertUpdates(k, namespace, name, uid)
}

func (g *gatedClient) Patch(k *kube.Kind, namespace, name string, uid types.UID, patch []byte) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Patch(k, namespace, name, uid, patch)
}

func (g *gatedClient) Delete(k *kube.Kind, namespace, name string, uid types.UID) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Delete(k, namespace, name, uid)
}

func (g *gatedClient) ScaleDeployment(namespace, name string, uid types.UID, replicas int32) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.ScaleDeployment(namespace, name, uid, replicas)
}
