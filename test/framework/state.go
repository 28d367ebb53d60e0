package framework

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
)

// The types below decode just the fields the suites check from `kubectl get -o json`
// (or, in Observe, the same GET requests sent in-process);
// the suites read the API as a user would and share no code with the operator.

// ObjectMeta is the part of an object's metadata that the suites check.
type ObjectMeta struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	Generation        int64             `json:"generation"`
	Labels            map[string]string `json:"labels"`
	OwnerReferences   []OwnerReference  `json:"ownerReferences"`
	DeletionTimestamp *string           `json:"deletionTimestamp"`
}

// OwnerReference is one entry of metadata.ownerReferences.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller *bool  `json:"controller"`
	// BlockOwnerDeletion makes the garbage collector's foreground deletion
	// of the owner wait for this object.
	BlockOwnerDeletion *bool `json:"blockOwnerDeletion"`
}

// Condition is a status condition of a Memcached or a pod.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// ObservedGeneration is the generation a Memcached's condition
	// describes; pods' conditions have none.
	ObservedGeneration int64 `json:"observedGeneration"`
}

// Memcached is a Memcached resource as `kubectl get -o json` prints it.
type Memcached struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Nodes              []string    `json:"nodes"`
		Replicas           int         `json:"replicas"`
		ReadyReplicas      int         `json:"readyReplicas"`
		ObservedGeneration int64       `json:"observedGeneration"`
		Conditions         []Condition `json:"conditions"`
	} `json:"status"`
}

// Condition returns the condition of type typ, or nil.
func (m *Memcached) Condition(typ string) *Condition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == typ {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

// Deployment is the part of a Deployment that the suites check.
type Deployment struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     struct {
		Replicas *int `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata ObjectMeta `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
}

// Pod is the part of a pod that the suites check.
type Pod struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		Phase             string            `json:"phase"`
		PodIP             string            `json:"podIP"`
		Conditions        []Condition       `json:"conditions"`
		ContainerStatuses []ContainerStatus `json:"containerStatuses"`
	} `json:"status"`
}

// ContainerStatus is the part of a container's status that the suites check.
type ContainerStatus struct {
	Name         string `json:"name"`
	ContainerID  string `json:"containerID"`
	Image        string `json:"image"`
	Ready        bool   `json:"ready"`
	RestartCount int    `json:"restartCount"`
	State        struct {
		Waiting *struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"waiting"`
		Running *struct {
			StartedAt string `json:"startedAt"`
		} `json:"running"`
	} `json:"state"`
}

// Ready reports whether the pod's Ready condition is True.
func (p *Pod) Ready() bool {
	return IsTrue(p.Status.Conditions, "Ready")
}

// IsTrue reports whether conditions hold a condition of type typ whose status
// is True.
func IsTrue(conditions []Condition, typ string) bool {
	for _, c := range conditions {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

// Event is the part of an Event that the suites check.
type Event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// Observed is one reading of a Memcached and what belongs to it.
type Observed struct {
	Memcached Memcached
	// Deployment is nil when there is no Deployment with the Memcached's name.
	Deployment *Deployment
	// Pods are the pods labelled memcached_cr=<name>.
	Pods []Pod
}

// PodNames returns the sorted names of the pods.
func (o Observed) PodNames() []string {
	names := make([]string, 0, len(o.Pods))
	for _, p := range o.Pods {
		names = append(names, p.Metadata.Name)
	}
	sort.Strings(names)
	return names
}

// Observe reads Memcached name, its same-named Deployment and its pods in k's
// namespace, as k's user, with the GET requests that `kubectl get -o json`
// sends but from this process (see getPath): the suites poll it.
func Observe(ctx context.Context, k Kubectl, name string) (Observed, error) {
	var o Observed
	mcs, err := k.nsPath("/apis/cache.example.com/v1alpha1")
	if err != nil {
		return o, err
	}
	if err := k.getPath(ctx, &o.Memcached, mcs+"/memcacheds/"+url.PathEscape(name), nil); err != nil {
		return o, err
	}
	apps, err := k.nsPath("/apis/apps/v1")
	if err != nil {
		return o, err
	}
	var d Deployment
	switch err := k.getPath(ctx, &d, apps+"/deployments/"+url.PathEscape(name), nil); {
	case err == nil:
		o.Deployment = &d
	case !IsNotFound(err):
		return o, err
	}
	core, err := k.nsPath("/api/v1")
	if err != nil {
		return o, err
	}
	var pods struct{ Items []Pod }
	if err := k.getPath(ctx, &pods, core+"/pods", url.Values{"labelSelector": {"memcached_cr=" + name}}); err != nil {
		return o, err
	}
	o.Pods = pods.Items
	return o, nil
}

// OwnedBy reports whether d has a controller reference to Memcached m.
func OwnedBy(d *Deployment, m *Memcached) bool {
	for _, r := range d.Metadata.OwnerReferences {
		if r.Controller != nil && *r.Controller && r.Kind == "Memcached" &&
			r.APIVersion == "cache.example.com/v1alpha1" && r.Name == m.Metadata.Name && r.UID == m.Metadata.UID {
			return true
		}
	}
	return false
}

// Converged returns nil when o is the steady state for spec.size == size: the
// Memcached's own Deployment (controller reference, labels, replicas), exactly size
// Running and Ready pods, and a status that lists exactly those pods, sorted, with
// matching counts and Degraded=False. Otherwise it says what differs.
func Converged(o Observed, size int) error {
	m := &o.Memcached
	name := m.Metadata.Name
	if m.Spec.Size != size {
		return fmt.Errorf("spec.size is %d, the test expects %d", m.Spec.Size, size)
	}
	d := o.Deployment
	if d == nil {
		return fmt.Errorf("no deployment %s", name)
	}
	if !OwnedBy(d, m) {
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
		return fmt.Errorf("deployment %s spec.replicas = %v, want %d", name, Deref(d.Spec.Replicas), size)
	}
	if len(o.Pods) != size {
		return fmt.Errorf("%d pods labelled memcached_cr=%s, want %d: %v", len(o.Pods), name, size, o.PodNames())
	}
	for _, p := range o.Pods {
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" || !p.Ready() {
			return fmt.Errorf("pod %s is %s (ready %t, deleting %t), want Running and Ready", p.Metadata.Name, p.Status.Phase, p.Ready(), p.Metadata.DeletionTimestamp != nil)
		}
	}
	if want := o.PodNames(); !slices.Equal(m.Status.Nodes, want) {
		return fmt.Errorf("status.nodes = %q, want the sorted pod names %q", m.Status.Nodes, want)
	}
	if m.Status.Replicas != size || m.Status.ReadyReplicas != size {
		return fmt.Errorf("status.replicas = %d, status.readyReplicas = %d, want %d", m.Status.Replicas, m.Status.ReadyReplicas, size)
	}
	if m.Status.ObservedGeneration != m.Metadata.Generation {
		return fmt.Errorf("status.observedGeneration = %d, want metadata.generation %d", m.Status.ObservedGeneration, m.Metadata.Generation)
	}
	if c := m.Condition("Degraded"); c == nil || c.Status != "False" {
		return fmt.Errorf("condition Degraded = %+v, want status False", c)
	}
	return nil
}

// Deref returns *p, or nil for a nil p, for messages that print optional fields.
func Deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
