package realnode

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// failoverBudget is how soon after the leader crashes the standby must hold the
// Lease and have applied a change made while nobody led.
const failoverBudget = 20 * time.Second

// TestLeaderFailover deploys the operator as `make deploy` does, two replicas
// electing a leader on a Lease, to a namespace of its own, and crashes the leader
// twice: SIGKILL of its process on the real node, then a forced delete of its pod,
// so that the kubelet cannot restart it in place (a restarted container keeps its
// pod name and would resume its own lease at once). Right after each kill it
// scales the Memcached. Each time a standby must hold the Lease and have scaled
// the Deployment within failoverBudget of the kill; the change must end applied;
// there must be one Deployment, created once; the Lease must count one
// transition; and the standby must not have restarted.
//
// The new leader is usually the standby, but may be the pod that the ReplicaSet
// starts in place of the killed one: each candidate waits a lease duration from
// when it first saw the last renewal, and a replacement that starts within a
// second of the kill can see it before the standby's next look.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := deployOperatorNamespace(t, "leader-failover", memcachedImage)
	createMemcached(t, k, "failover", 1)
	waitConverged(t, k, "failover", 1)
	var deploymentUID string
	requireOneDeployment(t, k, "failover", &deploymentUID)

	for round, size := range []int{2, 1} {
		leader, standby := leaderAndStandby(t, k)
		before, err := getLease(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := containerProcess(ctx, leader, operatorName)
		if err != nil {
			t.Fatal(err)
		}

		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill leader process %d: %v", pid, err)
		}
		killed := time.Now()
		if _, err := k.Run(ctx, "delete", "pod", leader.Metadata.Name, "--grace-period=0", "--force"); err != nil {
			t.Fatal(err)
		}
		// A change made while nobody leads.
		if _, err := k.Run(ctx, "scale", "memcached/failover", "--replicas="+strconv.Itoa(size)); err != nil {
			t.Fatal(err)
		}

		var tookOver, applied time.Duration
		var successor string
		err = framework.EventuallyEvery(ctx, 3*failoverBudget, 100*time.Millisecond, "a standby to lead and scale deployment failover to "+strconv.Itoa(size), func(ctx context.Context) error {
			if tookOver == 0 {
				l, err := getLease(ctx, k)
				if err != nil {
					return err
				}
				if l.Spec.HolderIdentity == leader.Metadata.Name {
					return fmt.Errorf("lease still held by the killed leader %s", leader.Metadata.Name)
				}
				tookOver = time.Since(killed)
				successor = l.Spec.HolderIdentity
			}
			var d framework.Deployment
			if err := k.GetJSON(ctx, &d, "deployment", "failover"); err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != size {
				return fmt.Errorf("deployment failover spec.replicas = %v", framework.Deref(d.Spec.Replicas))
			}
			applied = time.Since(killed)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		role := "the standby"
		if successor != standby.Metadata.Name {
			role = "the pod that replaced it"
		}
		t.Logf("round %d: killed leader %s (pid %d); %s, %s, held the lease after %v and had scaled deployment failover to %d after %v",
			round+1, leader.Metadata.Name, pid, role, successor, tookOver.Round(100*time.Millisecond), size, applied.Round(100*time.Millisecond))
		if err := requireLiveOperatorPod(ctx, k, successor); err != nil {
			t.Errorf("round %d: %v", round+1, err)
		}
		if applied > failoverBudget {
			t.Errorf("round %d: failover took %v, want at most %v", round+1, applied.Round(100*time.Millisecond), failoverBudget)
		}

		after, err := getLease(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if after.Spec.LeaseTransitions != before.Spec.LeaseTransitions+1 {
			t.Errorf("round %d: leaseTransitions %d, want %d", round+1, after.Spec.LeaseTransitions, before.Spec.LeaseTransitions+1)
		}
		waitConverged(t, k, "failover", size)
		requireOneDeployment(t, k, "failover", &deploymentUID)
		if now, err := operatorPods(ctx, k); err == nil {
			for _, p := range now {
				if p.Metadata.UID == standby.Metadata.UID && restarts(p) != restarts(standby) {
					t.Errorf("round %d: the standby %s restarted to take over (%d restarts, had %d)", round+1, p.Metadata.Name, restarts(p), restarts(standby))
				}
			}
		}
	}
}

// requireLiveOperatorPod fails unless name is a live operator pod of k's namespace.
func requireLiveOperatorPod(ctx context.Context, k framework.Kubectl, name string) error {
	pods, err := operatorPods(ctx, k)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pods, func(p framework.Pod) bool { return p.Metadata.Name == name }) {
		return fmt.Errorf("the lease is held by %q, which is not a live operator pod", name)
	}
	return nil
}

// lease is the part of a coordination.k8s.io/v1 Lease that the tests read.
type lease struct {
	Spec struct {
		HolderIdentity       string `json:"holderIdentity"`
		LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
		RenewTime            string `json:"renewTime"`
		LeaseTransitions     int    `json:"leaseTransitions"`
	} `json:"spec"`
}

func getLease(ctx context.Context, k framework.Kubectl) (lease, error) {
	var l lease
	err := k.GetJSON(ctx, &l, "lease", operatorName)
	return l, err
}

// leaderAndStandby waits until k's namespace has two live operator pods, both
// Running and Ready, one of them holding the Lease, and returns them.
func leaderAndStandby(t *testing.T, k framework.Kubectl) (leader, standby framework.Pod) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, "a Ready leader and a Ready standby", func(ctx context.Context) error {
		pods, err := operatorPods(ctx, k)
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d live operator pods, want 2", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != "Running" || !p.Ready() {
				return fmt.Errorf("operator pod %s is %s, ready %t", p.Metadata.Name, p.Status.Phase, p.Ready())
			}
		}
		holder, err := leaseHolder(ctx, k)
		if err != nil {
			return err
		}
		switch holder {
		case pods[0].Metadata.Name:
			leader, standby = pods[0], pods[1]
		case pods[1].Metadata.Name:
			leader, standby = pods[1], pods[0]
		default:
			return fmt.Errorf("lease held by %q, neither of %s and %s", holder, pods[0].Metadata.Name, pods[1].Metadata.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return leader, standby
}

// waitConverged is waitServing for a Memcached in any namespace: its Deployment,
// size Running and Ready pods on the real node, and a status that lists them.
func waitConverged(t *testing.T, k framework.Kubectl, name string, size int) {
	t.Helper()
	err := framework.Eventually(context.Background(), readyTimeout, fmt.Sprintf("memcached %s to serve with %d Ready pods", name, size), func(ctx context.Context) error {
		o, err := framework.Observe(ctx, k, name)
		if err != nil {
			return err
		}
		return framework.Converged(o, size)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// requireOneDeployment fails unless the namespace holds exactly one Deployment
// besides the operator's, Memcached name's, and it is the one of the first call,
// whose UID it keeps in *uid: no replica deleted it or created a second one.
func requireOneDeployment(t *testing.T, k framework.Kubectl, name string, uid *string) {
	t.Helper()
	ctx := context.Background()
	var deployments struct{ Items []framework.Deployment }
	if err := k.GetJSON(ctx, &deployments, "deployments"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range deployments.Items {
		if d.Metadata.Name == operatorName {
			continue
		}
		names = append(names, d.Metadata.Name)
		if d.Metadata.Name != name {
			continue
		}
		if *uid == "" {
			*uid = d.Metadata.UID
		} else if d.Metadata.UID != *uid {
			t.Errorf("deployment %s has uid %s, want %s: it was deleted and created again", name, d.Metadata.UID, *uid)
		}
	}
	if !slices.Equal(names, []string{name}) {
		t.Errorf("deployments %v, want only %s", names, name)
	}
}

// restarts returns the restart count of a pod's operator container.
func restarts(p framework.Pod) int {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == operatorName {
			return c.RestartCount
		}
	}
	return 0
}
