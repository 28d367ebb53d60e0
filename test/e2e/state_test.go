package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/example-inc/memcached-operator/test/framework"
)

// The types below decode just the fields the suite checks from `kubectl get -o json`;
// the suite reads the API as a user would and shares no code with the operator.

type objectMeta struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	Generation        int64             `json:"generation"`
	Labels            map[string]string `json:"labels"`
	OwnerReferences   []ownerReference  `json:"ownerReferences"`
	DeletionTimestamp *string           `json:"deletionTimestamp"`
}

type ownerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller *bool  `json:"controller"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type memcached struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Nodes              []string    `json:"nodes"`
		Replicas           int         `json:"replicas"`
		ReadyReplicas      int         `json:"readyReplicas"`
		ObservedGeneration int64       `json:"observedGeneration"`
		Conditions         []condition `json:"conditions"`
	} `json:"status"`
}

// condition returns the condition of type typ, or nil.
func (m *memcached) condition(typ string) *condition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == typ {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

type deployment struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Replicas *int `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata objectMeta `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
}

type pod struct {
	Metadata objectMeta `json:"metadata"`
	Status   struct {
		Phase      string      `json:"phase"`
		Conditions []condition `json:"conditions"`
	} `json:"status"`
}

func (p *pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

type event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// observed is one reading of a Memcached and what belongs to it.
type observed struct {
	memcached memcached
	// deployment is nil when there is no Deployment with the Memcached's name.
	deployment *deployment
	// pods are the pods labelled memcached_cr=<name>.
	pods []pod
}

// podNames returns the sorted names of the pods.
func (o observed) podNames() []string {
	names := make([]string, 0, len(o.pods))
	for _, p := range o.pods {
		names = append(names, p.Metadata.Name)
	}
	sort.Strings(names)
	return names
}

// observe reads Memcached name, its same-named Deployment and its pods.
func observe(ctx context.Context, k framework.Kubectl, name string) (observed, error) {
	var o observed
	if err := k.GetJSON(ctx, &o.memcached, "memcached", name); err != nil {
		return o, err
	}
	var d deployment
	switch err := k.GetJSON(ctx, &d, "deployment", name); {
	case err == nil:
		o.deployment = &d
	case !framework.IsNotFound(err):
		return o, err
	}
	var pods struct{ Items []pod }
	if err := k.GetJSON(ctx, &pods, "pods", "-l", "memcached_cr="+name); err != nil {
		return o, err
	}
	o.pods = pods.Items
	return o, nil
}

// ownedBy reports whether d has a controller reference to Memcached m.
func ownedBy(d *deployment, m *memcached) bool {
	for _, r := range d.Metadata.OwnerReferences {
		if r.Controller != nil && *r.Controller && r.Kind == "Memcached" &&
			r.APIVersion == "cache.example.com/v1alpha1" && r.Name == m.Metadata.Name && r.UID == m.Metadata.UID {
			return true
		}
	}
	return false
}

// converged returns nil when o is the steady state for spec.size == size: the
// Memcached's own Deployment (controller reference, labels, replicas), exactly size
// Running and Ready pods, and a status that lists exactly those pods, sorted, with
// matching counts and Degraded=False. Otherwise it says what differs.
func converged(o observed, size int) error {
	m := &o.memcached
	name := m.Metadata.Name
	if m.Spec.Size != size {
		return fmt.Errorf("spec.size is %d, the test expects %d", m.Spec.Size, size)
	}
	d := o.deployment
	if d == nil {
		return fmt.Errorf("no deployment %s", name)
	}
	if !ownedBy(d, m) {
		return fmt.Errorf("deployment %s has no controller reference to memcached %s (uid %s): %+v", name, name, m.Metadata.UID, d.Metadata.OwnerReferences)
	}
	wantLabels := map[string]string{"app": "memcached", "memcached_cr": name}
	for what, got := range map[string]map[string]string{
		"labels":                        d.Metadata.Labels,
		"spec.selector.matchLabels":     d.Spec.Selector.MatchLabels,
		"spec.template.metadata.labels": d.Spec.Template.Metadata.Labels,
	} {
		for k, v := range wantLabels {
			if got[k] != v {
				return fmt.Errorf("deployment %s %s = %v, want %s=%s", name, what, got, k, v)
			}
		}
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != size {
		return fmt.Errorf("deployment %s spec.replicas = %v, want %d", name, deref(d.Spec.Replicas), size)
	}
	if len(o.pods) != size {
		return fmt.Errorf("%d pods labelled memcached_cr=%s, want %d: %v", len(o.pods), name, size, o.podNames())
	}
	for _, p := range o.pods {
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" || !p.ready() {
			return fmt.Errorf("pod %s is %s (ready %t, deleting %t), want Running and Ready", p.Metadata.Name, p.Status.Phase, p.ready(), p.Metadata.DeletionTimestamp != nil)
		}
	}
	if want := o.podNames(); !slices.Equal(m.Status.Nodes, want) {
		return fmt.Errorf("status.nodes = %q, want the sorted pod names %q", m.Status.Nodes, want)
	}
	if m.Status.Replicas != size || m.Status.ReadyReplicas != size {
		return fmt.Errorf("status.replicas = %d, status.readyReplicas = %d, want %d", m.Status.Replicas, m.Status.ReadyReplicas, size)
	}
	if m.Status.ObservedGeneration != m.Metadata.Generation {
		return fmt.Errorf("status.observedGeneration = %d, want metadata.generation %d", m.Status.ObservedGeneration, m.Metadata.Generation)
	}
	if c := m.condition("Degraded"); c == nil || c.Status != "False" {
		return fmt.Errorf("condition Degraded = %+v, want status False", c)
	}
	return nil
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
