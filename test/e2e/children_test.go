package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// The tests in this file check the children and the pod template that issue 11
// adds: the headless Service, the PodDisruptionBudget, the spread of the pods
// over the KWOK nodes, and the optional spec fields that change the pod
// template. They read the API as a user would, with kubectl, and decode only
// the fields they check into the types below.

const (
	// templateHashAnnotation is on the Deployment's pod template and on every
	// pod; it changes exactly when the desired pod template changes.
	templateHashAnnotation = "cache.example.com/template-hash"
	// kwokNodeLabel is a label that every KWOK node of cluster.sh carries
	// (kwokctl's node template), and the real node does not.
	kwokNodeLabel, kwokNodeLabelValue = "type", "kwok"
	// untouchedWindow is how long a negative check watches an object that
	// the operator must leave alone: it acts on a watch event in well under
	// a second, and retries a failing Memcached with a backoff that starts
	// at milliseconds.
	untouchedWindow = 5 * time.Second
	// handEditEnv is the env var that TestPodTemplateUpdates adds to the pod
	// template by hand: a field the operator does not set, which it keeps.
	handEditEnv = "E2E_HAND_EDIT"
)

// labelSelector is a metav1.LabelSelector.
type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []any             `json:"matchExpressions"`
}

// service is the part of a Service that the tests check.
type service struct {
	Metadata struct {
		framework.ObjectMeta
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Type      string            `json:"type"`
		ClusterIP string            `json:"clusterIP"`
		Selector  map[string]string `json:"selector"`
		Ports     []servicePort     `json:"ports"`
	} `json:"spec"`
}

// servicePort is one entry of a Service's spec.ports. TargetPort is a
// number or a name, as JSON decodes it (float64 or string).
type servicePort struct {
	Name       string `json:"name"`
	Protocol   string `json:"protocol"`
	Port       int    `json:"port"`
	TargetPort any    `json:"targetPort"`
}

// podDisruptionBudget is the part of a PodDisruptionBudget that the tests
// check. MaxUnavailable and MinAvailable are numbers or percentages.
type podDisruptionBudget struct {
	APIVersion string               `json:"apiVersion"`
	Metadata   framework.ObjectMeta `json:"metadata"`
	Spec       struct {
		MaxUnavailable any            `json:"maxUnavailable"`
		MinAvailable   any            `json:"minAvailable"`
		Selector       *labelSelector `json:"selector"`
	} `json:"spec"`
	Status struct {
		ExpectedPods       int `json:"expectedPods"`
		CurrentHealthy     int `json:"currentHealthy"`
		DisruptionsAllowed int `json:"disruptionsAllowed"`
	} `json:"status"`
}

// deploymentDetail is a Deployment with the parts of its strategy and pod
// template that the tests check; framework.Deployment has only what every
// suite needs.
type deploymentDetail struct {
	Metadata framework.ObjectMeta `json:"metadata"`
	Spec     struct {
		Replicas *int          `json:"replicas"`
		Selector labelSelector `json:"selector"`
		Strategy struct {
			Type          string `json:"type"`
			RollingUpdate *struct {
				MaxSurge       any `json:"maxSurge"`
				MaxUnavailable any `json:"maxUnavailable"`
			} `json:"rollingUpdate"`
		} `json:"strategy"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec podSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// hash returns the pod template's template-hash annotation.
func (d *deploymentDetail) hash() string {
	return d.Spec.Template.Metadata.Annotations[templateHashAnnotation]
}

// podSpec is the part of a pod's spec that the tests check.
type podSpec struct {
	NodeName                      string             `json:"nodeName"`
	NodeSelector                  map[string]string  `json:"nodeSelector"`
	Tolerations                   []toleration       `json:"tolerations"`
	PriorityClassName             string             `json:"priorityClassName"`
	AutomountServiceAccountToken  *bool              `json:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int               `json:"terminationGracePeriodSeconds"`
	TopologySpreadConstraints     []spreadConstraint `json:"topologySpreadConstraints"`
	Containers                    []container        `json:"containers"`
}

// toleration is a corev1.Toleration.
type toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int   `json:"tolerationSeconds,omitempty"`
}

// spreadConstraint is the part of a corev1.TopologySpreadConstraint that the
// tests check.
type spreadConstraint struct {
	MaxSkew           int            `json:"maxSkew"`
	TopologyKey       string         `json:"topologyKey"`
	WhenUnsatisfiable string         `json:"whenUnsatisfiable"`
	LabelSelector     *labelSelector `json:"labelSelector"`
}

// container is the part of a container that the tests check. Quantities
// are compared as the API server canonicalizes them ("100m", "256Mi").
type container struct {
	Name      string   `json:"name"`
	Image     string   `json:"image"`
	Command   []string `json:"command"`
	Args      []string `json:"args"`
	Env       []envVar `json:"env"`
	Resources struct {
		Limits   map[string]string `json:"limits"`
		Requests map[string]string `json:"requests"`
	} `json:"resources"`
	Lifecycle *struct {
		PreStop *struct {
			Exec *struct {
				Command []string `json:"command"`
			} `json:"exec"`
			Sleep *struct {
				Seconds int `json:"seconds"`
			} `json:"sleep"`
		} `json:"preStop"`
	} `json:"lifecycle"`
}

// commandLine is what the container runs: its command and args, joined.
func (c *container) commandLine() string {
	return strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
}

// envVar is the name of a container's environment variable.
type envVar struct {
	Name string `json:"name"`
}

// preStopSleep returns the seconds that the container's preStop hook sleeps,
// written either as the kubelet's sleep action or as an exec of sleep.
func (c *container) preStopSleep() (int, bool) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0, false
	}
	h := c.Lifecycle.PreStop
	if h.Sleep != nil {
		return h.Sleep.Seconds, true
	}
	if h.Exec != nil {
		var secs int
		cmd := strings.Join(h.Exec.Command, " ")
		for _, prefix := range []string{"sleep ", "/bin/sleep ", "/bin/sh -c sleep ", "sh -c sleep "} {
			if rest, ok := strings.CutPrefix(cmd, prefix); ok {
				if _, err := fmt.Sscanf(rest, "%d", &secs); err == nil && fmt.Sprint(secs) == rest {
					return secs, true
				}
			}
		}
	}
	return 0, false
}

// memcachedContainer returns the pod spec's container named memcached.
func memcachedContainer(s podSpec) (*container, error) {
	for i := range s.Containers {
		if s.Containers[i].Name == "memcached" {
			return &s.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("no container named memcached among %d", len(s.Containers))
}

// annotatedPod is a pod with its annotations and the parts of its spec that
// the tests check.
type annotatedPod struct {
	Metadata struct {
		framework.ObjectMeta
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec podSpec `json:"spec"`
}

// memcachedLabels are the labels of every child of Memcached name, and the
// selector of its Deployment, Service and PodDisruptionBudget.
func memcachedLabels(name string) map[string]string {
	return map[string]string{"app": "memcached", "memcached_cr": name}
}

// controlledBy reports whether meta has a controller reference to m.
func controlledBy(meta framework.ObjectMeta, m *framework.Memcached) bool {
	return framework.OwnedBy(&framework.Deployment{Metadata: meta}, m)
}

// isInt reports whether an int-or-string field, as JSON decodes it, is the
// number n.
func isInt(v any, n int) bool {
	f, ok := v.(float64)
	return ok && f == float64(n)
}

// hasLabels returns nil when got holds every label of want with its value.
func hasLabels(what string, got, want map[string]string) error {
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s = %v, want %s=%s among them", what, got, k, v)
		}
	}
	return nil
}

// describeChildren is a failure report of the children that issue 11 adds,
// registered after newNamespace's so that it runs while they still exist.
func describeChildren(t testing.TB, ns *namespace) {
	framework.DumpOnFailure(t, func() string {
		return framework.Describe(context.Background(), cluster.Kubectl(), ns.name, "services,endpointslices,poddisruptionbudgets")
	}, func() string {
		out, err := ns.kubectl.Run(context.Background(), "get", "memcacheds", "-o", "yaml")
		return "===== kubectl -n " + ns.name + " get memcacheds -o yaml\n" + output(out, err)
	})
}

// output is a command's output followed by its error, for reports.
func output(out string, err error) string {
	if err != nil {
		return out + "(error: " + err.Error() + ")\n"
	}
	return out
}

// memcached reads Memcached name.
func (ns *namespace) memcached(ctx context.Context, name string) (framework.Memcached, error) {
	var m framework.Memcached
	err := ns.kubectl.GetJSON(ctx, &m, "memcached", name)
	return m, err
}

// serviceName reads status.serviceName of Memcached name, which the shared
// framework.Memcached does not decode.
func (ns *namespace) serviceName(ctx context.Context, name string) (string, error) {
	return ns.kubectl.Run(ctx, "get", "memcached", name, "-o", "jsonpath={.status.serviceName}")
}

// checkService returns nil when svc is the Service of the contract for
// Memcached m: headless, one TCP port memcached 11211 that targets the
// container port by name, selecting exactly the Memcached's pods, and
// controlled by m.
func checkService(svc *service, m *framework.Memcached) error {
	name := m.Metadata.Name
	if svc.Spec.ClusterIP != "None" || svc.Spec.Type != "ClusterIP" {
		return fmt.Errorf("service %s has type %s and clusterIP %q, want a headless ClusterIP Service (clusterIP None)", name, svc.Spec.Type, svc.Spec.ClusterIP)
	}
	want := servicePort{Name: "memcached", Protocol: "TCP", Port: 11211, TargetPort: "memcached"}
	if len(svc.Spec.Ports) != 1 || !reflect.DeepEqual(svc.Spec.Ports[0], want) {
		return fmt.Errorf("service %s ports = %+v, want exactly %+v", name, svc.Spec.Ports, want)
	}
	if !maps.Equal(svc.Spec.Selector, memcachedLabels(name)) {
		return fmt.Errorf("service %s selector = %v, want exactly %v", name, svc.Spec.Selector, memcachedLabels(name))
	}
	if err := hasLabels("service "+name+" labels", svc.Metadata.Labels, memcachedLabels(name)); err != nil {
		return err
	}
	if !controlledBy(svc.Metadata.ObjectMeta, m) {
		return fmt.Errorf("service %s ownerReferences = %+v, want a controller reference to memcached %s (uid %s)", name, svc.Metadata.OwnerReferences, name, m.Metadata.UID)
	}
	return nil
}

// waitService waits until Memcached name has the Service of the contract,
// named in its status, and returns the Service.
func (ns *namespace) waitService(name string) service {
	ns.t.Helper()
	var svc service
	ns.eventually("the headless service "+name+" of the contract", func(ctx context.Context) error {
		m, err := ns.memcached(ctx, name)
		if err != nil {
			return err
		}
		svc = service{}
		if err := ns.kubectl.GetJSON(ctx, &svc, "service", name); err != nil {
			return err
		}
		if err := checkService(&svc, &m); err != nil {
			return err
		}
		if got, err := ns.serviceName(ctx, name); err != nil || got != name {
			return fmt.Errorf("memcached %s status.serviceName = %q (%v), want %q", name, got, err, name)
		}
		return nil
	})
	return svc
}

// TestService: every Memcached owns a headless Service that selects its pods,
// so that each pod has a DNS name and clients can list the servers. The
// operator recreates it when deleted and repairs its selector and ports when
// edited, leaves a Service of the same name that it does not control alone
// (Degraded=True, ServiceNotOwned), and the garbage collector removes it
// with the Memcached.
func TestService(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	describeChildren(t, ns)
	ns.startOperator()
	ns.createMemcached("cache", 2)
	o := ns.waitConverged("cache", 2)
	first := ns.waitService("cache")

	ok := t.Run("its endpoints are the pods on the memcached port", func(t *testing.T) {
		// The endpoint slice controller resolves the named targetPort against
		// the pods' container ports: a Service that selected other pods or
		// named a port the pods lack would list no endpoints.
		want := make([]string, 0, len(o.Pods))
		for _, p := range o.Pods {
			want = append(want, p.Status.PodIP)
		}
		slices.Sort(want)
		ns.withT(t).eventually("endpoint slices of service cache to list the pods' IPs on port memcached 11211", func(ctx context.Context) error {
			var eps framework.EndpointSlices
			if err := ns.kubectl.GetJSON(ctx, &eps, "endpointslices", "-l", "kubernetes.io/service-name=cache"); err != nil {
				return err
			}
			var got []string
			for _, s := range eps.Items {
				if len(s.Ports) != 1 || s.Ports[0].Name != "memcached" || s.Ports[0].Port != 11211 {
					return fmt.Errorf("endpoint slice ports = %+v, want memcached 11211", s.Ports)
				}
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						got = append(got, e.Addresses...)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("ready endpoint addresses = %v, want the pods' IPs %v", got, want)
			}
			return nil
		})
	})
	ok = ok && t.Run("a deleted Service is recreated", func(t *testing.T) {
		ns := ns.withT(t)
		ns.run("delete", "service", "cache", "--wait=true")
		ns.eventually("a new service cache", func(ctx context.Context) error {
			var svc service
			if err := ns.kubectl.GetJSON(ctx, &svc, "service", "cache"); err != nil {
				return err
			}
			if svc.Metadata.UID == first.Metadata.UID {
				return fmt.Errorf("service cache still has the deleted uid %s", first.Metadata.UID)
			}
			return nil
		})
		ns.waitService("cache")
	})
	ok = ok && t.Run("an edited selector is repaired", func(t *testing.T) {
		ns := ns.withT(t)
		before := ns.waitService("cache")
		// One label changed and one added: the selector must equal the
		// labels again, not just contain them.
		ns.run("patch", "service", "cache", "--type=merge", "-p", `{"spec":{"selector":{"memcached_cr":"someone-else","extra":"x"}}}`)
		after := ns.waitService("cache")
		if after.Metadata.UID != before.Metadata.UID {
			t.Errorf("service cache was replaced (uid %s -> %s), want its selector repaired in place", before.Metadata.UID, after.Metadata.UID)
		}
	})
	ok = ok && t.Run("edited ports are repaired", func(t *testing.T) {
		ns := ns.withT(t)
		before := ns.waitService("cache")
		ns.run("patch", "service", "cache", "--type=json", "-p",
			`[{"op":"replace","path":"/spec/ports/0/port","value":11299},{"op":"replace","path":"/spec/ports/0/targetPort","value":11299}]`)
		after := ns.waitService("cache")
		if after.Metadata.UID != before.Metadata.UID {
			t.Errorf("service cache was replaced (uid %s -> %s), want its ports repaired in place", before.Metadata.UID, after.Metadata.UID)
		}
	})
	ok = ok && t.Run("a foreign Service of the name is left alone and reported", func(t *testing.T) {
		ns := ns.withT(t)
		ns.apply(`apiVersion: v1
kind: Service
metadata:
  name: taken
  labels:
    app: someone-else
spec:
  selector:
    app: someone-else
  ports:
    - name: http
      port: 80
      targetPort: 8080
`)
		var foreign service
		if err := ns.kubectl.GetJSON(context.Background(), &foreign, "service", "taken"); err != nil {
			t.Fatal(err)
		}
		ns.createMemcached("taken", 1)
		ns.eventually("condition Degraded=True with reason ServiceNotOwned", func(ctx context.Context) error {
			m, err := ns.memcached(ctx, "taken")
			if err != nil {
				return err
			}
			c := m.Condition("Degraded")
			if c == nil || c.Status != "True" || c.Reason != "ServiceNotOwned" {
				return fmt.Errorf("condition Degraded = %+v, want True with reason ServiceNotOwned", c)
			}
			t.Logf("condition Degraded: %s: %s", c.Reason, c.Message)
			return nil
		})
		// The operator keeps retrying the Memcached with backoff; the Service
		// must not change through those retries.
		err := framework.Consistently(context.Background(), untouchedWindow, "the foreign service taken", func(ctx context.Context) error {
			var now service
			if err := ns.kubectl.GetJSON(ctx, &now, "service", "taken"); err != nil {
				return err
			}
			if now.Metadata.UID != foreign.Metadata.UID || now.Metadata.ResourceVersion != foreign.Metadata.ResourceVersion {
				return fmt.Errorf("uid %s resourceVersion %s, was %s %s: it was replaced or written",
					now.Metadata.UID, now.Metadata.ResourceVersion, foreign.Metadata.UID, foreign.Metadata.ResourceVersion)
			}
			if len(now.Metadata.OwnerReferences) != 0 || !maps.Equal(now.Spec.Selector, map[string]string{"app": "someone-else"}) {
				return fmt.Errorf("ownerReferences %+v, selector %v, want none and app=someone-else", now.Metadata.OwnerReferences, now.Spec.Selector)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	if !ok {
		return
	}
	t.Run("deleting the Memcached collects its Service", func(t *testing.T) {
		ns := ns.withT(t)
		ns.run("delete", "memcached", "cache", "--wait=true")
		ns.eventually("service cache to be collected", func(ctx context.Context) error {
			out, err := ns.kubectl.Run(ctx, "get", "service", "cache", "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if out != "" {
				return fmt.Errorf("still there: %s", strings.TrimSpace(out))
			}
			return nil
		})
	})
}

// checkPDB returns nil when pdb is the PodDisruptionBudget of the contract
// for Memcached m of size pods: policy/v1, maxUnavailable 1 over exactly the
// Memcached's pods, controlled by m, and the disruption controller agrees
// that it covers the size pods and allows one disruption.
func checkPDB(pdb *podDisruptionBudget, m *framework.Memcached, size int) error {
	name := m.Metadata.Name
	if pdb.APIVersion != "policy/v1" {
		return fmt.Errorf("poddisruptionbudget %s is %s, want policy/v1", name, pdb.APIVersion)
	}
	if !isInt(pdb.Spec.MaxUnavailable, 1) || pdb.Spec.MinAvailable != nil {
		return fmt.Errorf("poddisruptionbudget %s maxUnavailable %v minAvailable %v, want maxUnavailable 1 alone", name, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if s := pdb.Spec.Selector; s == nil || !maps.Equal(s.MatchLabels, memcachedLabels(name)) || len(s.MatchExpressions) != 0 {
		return fmt.Errorf("poddisruptionbudget %s selector = %+v, want matchLabels %v alone", name, s, memcachedLabels(name))
	}
	if err := hasLabels("poddisruptionbudget "+name+" labels", pdb.Metadata.Labels, memcachedLabels(name)); err != nil {
		return err
	}
	if !controlledBy(pdb.Metadata, m) {
		return fmt.Errorf("poddisruptionbudget %s ownerReferences = %+v, want a controller reference to memcached %s (uid %s)", name, pdb.Metadata.OwnerReferences, name, m.Metadata.UID)
	}
	if st := pdb.Status; st.ExpectedPods != size || st.CurrentHealthy != size || st.DisruptionsAllowed != 1 {
		return fmt.Errorf("poddisruptionbudget %s status: %d expected pods, %d healthy, %d disruptions allowed; want %d, %d and 1",
			name, st.ExpectedPods, st.CurrentHealthy, st.DisruptionsAllowed, size, size)
	}
	return nil
}

// waitPDB waits until Memcached name of size pods has the
// PodDisruptionBudget of the contract and returns it.
func (ns *namespace) waitPDB(name string, size int) podDisruptionBudget {
	ns.t.Helper()
	var pdb podDisruptionBudget
	ns.eventually(fmt.Sprintf("poddisruptionbudget %s of the contract, covering %d pods", name, size), func(ctx context.Context) error {
		m, err := ns.memcached(ctx, name)
		if err != nil {
			return err
		}
		pdb = podDisruptionBudget{}
		if err := ns.kubectl.GetJSON(ctx, &pdb, "poddisruptionbudgets.v1.policy", name); err != nil {
			return err
		}
		return checkPDB(&pdb, &m, size)
	})
	return pdb
}

// waitNoPDB waits until Memcached name has no PodDisruptionBudget.
func (ns *namespace) waitNoPDB(name string) {
	ns.t.Helper()
	ns.eventually("poddisruptionbudget "+name+" to be deleted", func(ctx context.Context) error {
		out, err := ns.kubectl.Run(ctx, "get", "poddisruptionbudgets.v1.policy", name, "--ignore-not-found", "-o", "name")
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("still there: %s", strings.TrimSpace(out))
		}
		return nil
	})
}

// TestPodDisruptionBudget: a Memcached of more than one pod has a
// PodDisruptionBudget that lets a drain take one pod at a time; at size 1 or
// 0 it has none, because a budget of one pod that allows no disruption would
// block every drain of its node. A deleted budget comes back.
func TestPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	describeChildren(t, ns)
	ns.startOperator()
	ns.createMemcached("cache", 2)
	ns.waitConverged("cache", 2)
	first := ns.waitPDB("cache", 2)

	steps := []struct {
		name string
		size int
		// pdb says whether the size has a budget.
		pdb bool
	}{
		{"scaled to 1 it is deleted", 1, false},
		{"scaled to 3 it is back", 3, true},
		{"scaled to 0 it is deleted", 0, false},
		{"scaled to 2 from 0 it is back", 2, true},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			ns := ns.withT(t)
			ns.scale("cache", s.size)
			ns.waitConverged("cache", s.size)
			if !s.pdb {
				ns.waitNoPDB("cache")
				return
			}
			if pdb := ns.waitPDB("cache", s.size); pdb.Metadata.UID == first.Metadata.UID {
				t.Errorf("poddisruptionbudget cache has the uid %s of the one that was to be deleted", first.Metadata.UID)
			}
		})
		if !ok {
			return // later steps start from this one's state
		}
	}
	t.Run("a deleted budget is recreated", func(t *testing.T) {
		ns := ns.withT(t)
		ns.scale("cache", 3)
		ns.waitConverged("cache", 3)
		before := ns.waitPDB("cache", 3)
		ns.run("delete", "poddisruptionbudgets.v1.policy", "cache", "--wait=true")
		ns.eventually("a new poddisruptionbudget cache", func(ctx context.Context) error {
			var pdb podDisruptionBudget
			if err := ns.kubectl.GetJSON(ctx, &pdb, "poddisruptionbudgets.v1.policy", "cache"); err != nil {
				return err
			}
			if pdb.Metadata.UID == before.Metadata.UID {
				return fmt.Errorf("poddisruptionbudget cache still has the deleted uid %s", before.Metadata.UID)
			}
			return nil
		})
		ns.waitPDB("cache", 3)
	})
}

// deployment reads Deployment name with its strategy and pod template.
func (ns *namespace) deployment(ctx context.Context, name string) (deploymentDetail, error) {
	var d deploymentDetail
	err := ns.kubectl.GetJSON(ctx, &d, "deployment", name)
	return d, err
}

// pods lists the pods of Memcached name.
func (ns *namespace) pods(ctx context.Context, name string) ([]annotatedPod, error) {
	var list struct{ Items []annotatedPod }
	err := ns.kubectl.GetJSON(ctx, &list, "pods", "-l", "memcached_cr="+name)
	return list.Items, err
}

// nodeCounts counts the pods on each node that has any.
func nodeCounts(pods []annotatedPod) map[string]int {
	n := map[string]int{}
	for _, p := range pods {
		n[p.Spec.NodeName]++
	}
	return n
}

// TestSpread: the pods of a Memcached spread over the nodes, so that losing
// a node loses as few of them as possible, and the pod template has the
// contract's spread constraint, grace period, preStop pause and one-at-a-time
// rolling update. KWOK nodes have room for every pod, so only the spread
// constraint can separate them.
//
// It runs serially: it counts the KWOK nodes, which TestMassDelete scales,
// and the even spread is only a scheduler score (ScheduleAnyway) that other
// tests' pods placed at the same time could tip.
func TestSpread(t *testing.T) {
	ns := newNamespace(t, slug(t.Name()))
	describeChildren(t, ns)
	ns.startOperator()
	var nodeList struct {
		Items []struct{ Metadata framework.ObjectMeta }
	}
	if err := cluster.Kubectl().GetJSON(context.Background(), &nodeList, "nodes", "-l", kwokNodeLabel+"="+kwokNodeLabelValue); err != nil {
		t.Fatal(err)
	}
	if len(nodeList.Items) != nodes {
		t.Fatalf("%d nodes labelled %s=%s, want the suite's %d KWOK nodes", len(nodeList.Items), kwokNodeLabel, kwokNodeLabelValue, nodes)
	}
	ns.createMemcached("cache", nodes)
	ns.waitConverged("cache", nodes)

	t.Run("the pod template has the spread, grace period, preStop and strategy", func(t *testing.T) {
		d, err := ns.deployment(context.Background(), "cache")
		if err != nil {
			t.Fatal(err)
		}
		want := []spreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       "kubernetes.io/hostname",
			WhenUnsatisfiable: "ScheduleAnyway",
			LabelSelector:     &labelSelector{MatchLabels: memcachedLabels("cache")},
		}}
		if got := d.Spec.Template.Spec.TopologySpreadConstraints; !reflect.DeepEqual(got, want) {
			t.Errorf("topologySpreadConstraints = %+v, want %+v", got, want)
		}
		if got := d.Spec.Template.Spec.TerminationGracePeriodSeconds; got == nil || *got != 15 {
			t.Errorf("terminationGracePeriodSeconds = %v, want 15", framework.Deref(got))
		}
		c, err := memcachedContainer(d.Spec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if secs, ok := c.preStopSleep(); !ok || secs != 5 {
			lifecycle, _ := json.Marshal(c.Lifecycle)
			t.Errorf("container memcached lifecycle = %s, want a preStop hook that sleeps 5 seconds", lifecycle)
		}
		s := d.Spec.Strategy
		if s.Type != "RollingUpdate" || s.RollingUpdate == nil || !isInt(s.RollingUpdate.MaxSurge, 1) || !isInt(s.RollingUpdate.MaxUnavailable, 0) {
			strategy, _ := json.Marshal(s)
			t.Errorf("strategy = %s, want RollingUpdate with maxSurge 1 and maxUnavailable 0", strategy)
		}
	})
	for _, size := range []int{nodes, 2 * nodes} {
		t.Run(fmt.Sprintf("%d pods are spread evenly over %d nodes", size, nodes), func(t *testing.T) {
			ns := ns.withT(t)
			ns.scale("cache", size)
			ns.waitConverged("cache", size)
			pods, err := ns.pods(context.Background(), "cache")
			if err != nil {
				t.Fatal(err)
			}
			perNode := nodeCounts(pods)
			t.Logf("pods per node: %v", perNode)
			if len(perNode) != nodes {
				t.Errorf("the %d pods are on %d nodes (%v), want all %d", size, len(perNode), perNode, nodes)
			}
			for node, n := range perNode {
				if n != size/nodes {
					t.Errorf("node %s has %d pods, want %d: %v", node, n, size/nodes, perNode)
				}
			}
		})
	}
}

// recordStatus starts a framework.StatusRecorder on Memcached name, which
// the test's end stops. On KWOK a roll of three pods takes a few seconds,
// and a status that holds for less than a second between two writes can
// slip between polls; the watch sees every write.
func (ns *namespace) recordStatus(name string) *framework.StatusRecorder {
	ns.t.Helper()
	r, err := framework.RecordStatus(ns.kubectl, name)
	if err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(r.Stop)
	return r
}

// finishRecording waits until r has seen the Progressing state final, which
// the caller has already read with a GET: its watch event may still be on
// the way. Then it stops r and returns the Progressing states it saw.
func finishRecording(t testing.TB, r *framework.StatusRecorder, final string) []string {
	t.Helper()
	err := r.WaitFor(30*time.Second, "the watch to see Progressing "+final, func(samples []framework.StatusSample) error {
		if n := len(samples); n > 0 && samples[n-1].Progressing == final {
			return nil
		}
		return fmt.Errorf("it has seen %v", samples)
	})
	r.Stop()
	if err != nil {
		t.Error(err)
	}
	return r.Progressing()
}

// waitRolledOut waits until Memcached name has converged on size with every
// pod on the Deployment's current template hash and Progressing=False with
// reason Complete, and returns the Deployment and the pods it then saw.
func (ns *namespace) waitRolledOut(name string, size int) (deploymentDetail, framework.Observed) {
	ns.t.Helper()
	var (
		d deploymentDetail
		o framework.Observed
	)
	ns.eventually(fmt.Sprintf("memcached %s to roll out and converge on size %d", name, size), func(ctx context.Context) error {
		var err error
		if o, err = framework.Observe(ctx, ns.kubectl, name); err != nil {
			return err
		}
		if err := framework.Converged(o, size); err != nil {
			return err
		}
		if d, err = ns.deployment(ctx, name); err != nil {
			return err
		}
		hash := d.hash()
		if hash == "" {
			return fmt.Errorf("deployment %s pod template has no %s annotation: %v", name, templateHashAnnotation, d.Spec.Template.Metadata.Annotations)
		}
		pods, err := ns.pods(ctx, name)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if got := p.Metadata.Annotations[templateHashAnnotation]; got != hash {
				return fmt.Errorf("pod %s has %s %q, want the template's %q", p.Metadata.Name, templateHashAnnotation, got, hash)
			}
		}
		if c := o.Memcached.Condition("Progressing"); c == nil || c.Status != "False" || c.Reason != "Complete" {
			return fmt.Errorf("condition Progressing = %+v, want False with reason Complete", c)
		}
		return nil
	})
	return d, o
}

// TestPodTemplateUpdates: each optional spec field of issue 11 reaches the
// Deployment's pod template, and only it: replicas, selector and labels stay,
// the template-hash annotation changes, the pods roll to the new template
// (Progressing True with reason RollingUpdate, then False with reason
// Complete), and status.nodes follows the new pods. Scaling keeps the
// template, and a field of the template that the operator does not set stays.
// The defaults come first: the operator's --memcached-image, the default
// resources, and memcached's -m derived from the memory limit.
func TestPodTemplateUpdates(t *testing.T) {
	t.Parallel()
	const (
		size         = 3
		defaultImage = "registry.example.com/e2e/memcached:default"
		newImage     = "registry.example.com/e2e/memcached:1.6.38"
	)
	ctx := context.Background()
	ns := newNamespace(t, slug(t.Name()))
	describeChildren(t, ns)

	// PriorityClasses are cluster-scoped: this one is named after the
	// namespace, so that runs never share it.
	priorityClass := "memcached-" + ns.name
	if _, err := cluster.Kubectl().RunWithInput(ctx, fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: %s
value: 1000
preemptionPolicy: Never
description: memcached pods of the e2e test in namespace %s
`, priorityClass, ns.name), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "priorityclass", priorityClass, "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if out, err := cluster.Kubectl().Run(ctx, "get", "nodes", "-l", kwokNodeLabel+"!="+kwokNodeLabelValue, "-o", "name"); err != nil || out != "" {
		t.Fatalf("nodes without %s=%s: %q (%v), want none: the nodeSelector step relies on every node having it", kwokNodeLabel, kwokNodeLabelValue, out, err)
	}

	ns.startOperator("--memcached-image=" + defaultImage)
	ns.createMemcached("cache", size)
	d, o := ns.waitRolledOut("cache", size)

	ok := t.Run("the defaults", func(t *testing.T) {
		c, err := memcachedContainer(d.Spec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if c.Image != defaultImage {
			t.Errorf("image = %q, want the operator's --memcached-image %q", c.Image, defaultImage)
		}
		if got, want := c.commandLine(), "memcached -m 64 -p 11211 -v"; got != want {
			t.Errorf("command line = %q, want %q", got, want)
		}
		if want := map[string]string{"cpu": "50m", "memory": "96Mi", "ephemeral-storage": "16Mi"}; !maps.Equal(c.Resources.Requests, want) {
			t.Errorf("resources.requests = %v, want %v", c.Resources.Requests, want)
		}
		if want := map[string]string{"memory": "128Mi", "ephemeral-storage": "128Mi"}; !maps.Equal(c.Resources.Limits, want) {
			t.Errorf("resources.limits = %v, want %v", c.Resources.Limits, want)
		}
		s := d.Spec.Template.Spec
		if len(s.NodeSelector) != 0 || len(s.Tolerations) != 0 || s.PriorityClassName != "" {
			t.Errorf("nodeSelector %v, tolerations %+v, priorityClassName %q, want none", s.NodeSelector, s.Tolerations, s.PriorityClassName)
		}
	})
	if !ok {
		return
	}

	tolerations := []toleration{{Key: "example.com/dedicated", Operator: "Equal", Value: "memcached", Effect: "NoSchedule"}}
	steps := []struct {
		name string
		// patch is a merge patch of the Memcached.
		patch string
		// check says how the new pod template differs from the old.
		check func(s podSpec, c *container) error
	}{
		{
			name:  "nodeSelector",
			patch: fmt.Sprintf(`{"spec":{"nodeSelector":{%q:%q}}}`, kwokNodeLabel, kwokNodeLabelValue),
			check: func(s podSpec, _ *container) error {
				if want := map[string]string{kwokNodeLabel: kwokNodeLabelValue}; !maps.Equal(s.NodeSelector, want) {
					return fmt.Errorf("nodeSelector = %v, want %v", s.NodeSelector, want)
				}
				return nil
			},
		},
		{
			name:  "tolerations",
			patch: `{"spec":{"tolerations":[{"key":"example.com/dedicated","operator":"Equal","value":"memcached","effect":"NoSchedule"}]}}`,
			check: func(s podSpec, _ *container) error {
				if !reflect.DeepEqual(s.Tolerations, tolerations) {
					return fmt.Errorf("tolerations = %+v, want %+v", s.Tolerations, tolerations)
				}
				return nil
			},
		},
		{
			name:  "priorityClassName",
			patch: fmt.Sprintf(`{"spec":{"priorityClassName":%q}}`, priorityClass),
			check: func(s podSpec, _ *container) error {
				if s.PriorityClassName != priorityClass {
					return fmt.Errorf("priorityClassName = %q, want %q", s.PriorityClassName, priorityClass)
				}
				return nil
			},
		},
		{
			// No memoryMB: -m follows the new limit, 256*7/8-48 = 176.
			name:  "resources",
			patch: `{"spec":{"resources":{"requests":{"cpu":"100m","memory":"192Mi"},"limits":{"memory":"256Mi"}}}}`,
			check: func(_ podSpec, c *container) error {
				if want := map[string]string{"cpu": "100m", "memory": "192Mi"}; !maps.Equal(c.Resources.Requests, want) {
					return fmt.Errorf("resources.requests = %v, want %v", c.Resources.Requests, want)
				}
				if want := map[string]string{"memory": "256Mi"}; !maps.Equal(c.Resources.Limits, want) {
					return fmt.Errorf("resources.limits = %v, want %v: spec.resources replaces the default as a whole", c.Resources.Limits, want)
				}
				return commandIs(c, "memcached -m 176 -p 11211 -v")
			},
		},
		{
			name:  "memoryMB",
			patch: `{"spec":{"memoryMB":160}}`,
			check: func(_ podSpec, c *container) error { return commandIs(c, "memcached -m 160 -p 11211 -v") },
		},
		{
			name:  "extraArgs",
			patch: `{"spec":{"extraArgs":["--conn-limit=256","--disable-cas"]}}`,
			check: func(_ podSpec, c *container) error {
				return commandIs(c, "memcached --conn-limit=256 --disable-cas -m 160 -p 11211 -v")
			},
		},
		{
			name:  "image",
			patch: fmt.Sprintf(`{"spec":{"image":%q}}`, newImage),
			check: func(_ podSpec, c *container) error {
				if c.Image != newImage {
					return fmt.Errorf("image = %q, want %q", c.Image, newImage)
				}
				return nil
			},
		},
	}
	hashes := map[string]string{d.hash(): "the defaults"}
	for _, s := range steps {
		ok := t.Run("changing "+s.name+" rolls the pods to the new template", func(t *testing.T) {
			ns := ns.withT(t)
			before, beforePods := d, o.PodNames()
			rec := ns.recordStatus("cache")
			ns.run("patch", "memcached", "cache", "--type=merge", "-p", s.patch)
			ns.eventually("the deployment's pod template to change", func(ctx context.Context) error {
				now, err := ns.deployment(ctx, "cache")
				if err != nil {
					return err
				}
				if now.hash() == before.hash() {
					return fmt.Errorf("%s is still %q", templateHashAnnotation, before.hash())
				}
				c, err := memcachedContainer(now.Spec.Template.Spec)
				if err != nil {
					return err
				}
				if err := s.check(now.Spec.Template.Spec, c); err != nil {
					return framework.Permanent(fmt.Errorf("the template changed (hash %s) but not as expected: %v", now.hash(), err))
				}
				return nil
			})
			var after framework.Observed
			d, after = ns.waitRolledOut("cache", size)
			o = after
			if err := sameDeployment(before, d); err != nil {
				t.Error(err)
			}
			if earlier, seen := hashes[d.hash()]; seen {
				t.Errorf("template hash %s after changing %s is the one of %s", d.hash(), s.name, earlier)
			}
			hashes[d.hash()] = s.name
			if kept := intersect(beforePods, after.Memcached.Status.Nodes); len(kept) > 0 {
				t.Errorf("status.nodes %v still lists pods of the old template: %v", after.Memcached.Status.Nodes, kept)
			}
			seen := finishRecording(t, rec, "False/Complete")
			t.Logf("Progressing went %s", strings.Join(seen, " -> "))
			if !slices.Contains(seen, "True/RollingUpdate") || seen[len(seen)-1] != "False/Complete" {
				t.Errorf("Progressing went %v, want True/RollingUpdate during the roll and False/Complete at the end", seen)
			}
		})
		if !ok {
			return // later steps start from this one's state
		}
	}

	ok = t.Run("scaling keeps the template", func(t *testing.T) {
		ns := ns.withT(t)
		before := d
		rec := ns.recordStatus("cache")
		ns.scale("cache", size+1)
		after, _ := ns.waitRolledOut("cache", size+1)
		if after.hash() != before.hash() {
			t.Errorf("%s changed from %q to %q on a scale", templateHashAnnotation, before.hash(), after.hash())
		}
		seen := finishRecording(t, rec, "False/Complete")
		t.Logf("Progressing went %s", strings.Join(seen, " -> "))
		// The reconcile that scales the Deployment writes the status after
		// its other children's steps; on a busy machine the ReplicaSet
		// controller has made the new pod by then, and the status says it
		// starts (PodsStarting) rather than that the pods scale: either
		// is a scale, never a roll.
		if slices.Contains(seen, "True/RollingUpdate") || !slices.Contains(seen, "True/Scaling") && !slices.Contains(seen, "True/PodsStarting") {
			t.Errorf("Progressing went %v, want True/Scaling or True/PodsStarting, and never RollingUpdate", seen)
		}
		ns.scale("cache", size)
		d, o = ns.waitRolledOut("cache", size)
	})
	if !ok {
		return
	}

	ok = t.Run("a field the operator does not set stays, across a spec change", func(t *testing.T) {
		ns := ns.withT(t)
		ns.run("set", "env", "deployment/cache", "-c", "memcached", handEditEnv+"=1")
		err := framework.Consistently(ctx, untouchedWindow, "the hand edit", func(ctx context.Context) error {
			now, err := ns.deployment(ctx, "cache")
			if err != nil {
				return err
			}
			if !handEdited(now) {
				return fmt.Errorf("env %s is gone from the pod template", handEditEnv)
			}
			if now.hash() != d.hash() {
				return fmt.Errorf("%s changed from %q to %q", templateHashAnnotation, d.hash(), now.hash())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v: an env var the operator does not set is someone else's to keep", err)
		}
		ns.run("patch", "memcached", "cache", "--type=merge", "-p", `{"spec":{"memoryMB":150}}`)
		ns.eventually("the spec change to reach the template, beside the hand edit", func(ctx context.Context) error {
			now, err := ns.deployment(ctx, "cache")
			if err != nil {
				return err
			}
			c, err := memcachedContainer(now.Spec.Template.Spec)
			if err != nil {
				return err
			}
			if err := commandIs(c, "memcached --conn-limit=256 --disable-cas -m 150 -p 11211 -v"); err != nil {
				return err
			}
			if !handEdited(now) {
				return framework.Permanent(fmt.Errorf("env %s is gone: the operator's apply removed a field it never set", handEditEnv))
			}
			return nil
		})
		ns.run("set", "env", "deployment/cache", "-c", "memcached", handEditEnv+"-")
		d, o = ns.waitRolledOut("cache", size)
	})
	if !ok {
		return
	}

	t.Run("memoryMB defaults from the memory limit", func(t *testing.T) {
		ns := ns.withT(t)
		for _, c := range []struct {
			name, resources, command string
		}{
			{"limit-256mi", `{"limits":{"memory":"256Mi"}}`, "memcached -m 176 -p 11211 -v"},
			{"limit-1gi", `{"limits":{"memory":"1Gi"}}`, "memcached -m 848 -p 11211 -v"},
			{"no-limit", `{"requests":{"cpu":"10m"}}`, "memcached -m 64 -p 11211 -v"},
		} {
			ns.apply(memcachedManifest(c.name, fmt.Sprintf("spec:\n  size: 1\n  resources: %s\n", c.resources)))
			d, _ := ns.waitRolledOut(c.name, 1)
			mc, err := memcachedContainer(d.Spec.Template.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := commandIs(mc, c.command); err != nil {
				t.Errorf("resources %s: %v", c.resources, err)
			}
		}
	})
}

// commandIs returns nil when the container's command line is want.
func commandIs(c *container, want string) error {
	if got := c.commandLine(); got != want {
		return fmt.Errorf("command line = %q, want %q", got, want)
	}
	return nil
}

// handEdited reports whether the pod template has the env var that
// TestPodTemplateUpdates sets by hand.
func handEdited(d deploymentDetail) bool {
	c, err := memcachedContainer(d.Spec.Template.Spec)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == handEditEnv })
}

// sameDeployment returns nil when a pod template change left the
// Deployment's identity, replicas, selector and labels as they were.
func sameDeployment(before, after deploymentDetail) error {
	var diffs []string
	if after.Metadata.UID != before.Metadata.UID {
		diffs = append(diffs, fmt.Sprintf("uid %s -> %s (replaced)", before.Metadata.UID, after.Metadata.UID))
	}
	if !reflect.DeepEqual(after.Spec.Replicas, before.Spec.Replicas) {
		diffs = append(diffs, fmt.Sprintf("spec.replicas %v -> %v", framework.Deref(before.Spec.Replicas), framework.Deref(after.Spec.Replicas)))
	}
	if !reflect.DeepEqual(after.Spec.Selector, before.Spec.Selector) {
		diffs = append(diffs, fmt.Sprintf("spec.selector %+v -> %+v", before.Spec.Selector, after.Spec.Selector))
	}
	if !maps.Equal(after.Metadata.Labels, before.Metadata.Labels) {
		diffs = append(diffs, fmt.Sprintf("labels %v -> %v", before.Metadata.Labels, after.Metadata.Labels))
	}
	if !maps.Equal(after.Spec.Template.Metadata.Labels, before.Spec.Template.Metadata.Labels) {
		diffs = append(diffs, fmt.Sprintf("pod template labels %v -> %v", before.Spec.Template.Metadata.Labels, after.Spec.Template.Metadata.Labels))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("a pod template change changed more of the deployment: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// intersect returns the strings that are in both a and b.
func intersect(a, b []string) []string {
	var both []string
	for _, s := range a {
		if slices.Contains(b, s) {
			both = append(both, s)
		}
	}
	return both
}
