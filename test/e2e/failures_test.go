package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
)

// maxAttemptsBeforeResync bounds the operator's attempts at a Memcached that
// keeps failing, in any window shorter than its resync period (5 minutes by
// default). One queue holds it, the handler's, with exponential backoff
// (5ms, 10ms ... 164s, then 5 minutes apart for as long as it fails): 16
// retries after the first attempt in the first 5.5 minutes, of which 11 fit
// in backoffWindow (5 ms × (2^11 − 1) ≈ 10 s), fewer than 15. Add one for
// the update event of the status write that reports the failure, which
// queues an attempt only when the SDK delivers it before the write's
// response, and one for a status write that loses a resourceVersion race
// with it. An operator that did not back off would
// make hundreds of attempts in the window.
const maxAttemptsBeforeResync = (1 + 15) + 1 + 1

// backoffWindow is how long TestRefusedByQuota watches a failing Memcached:
// long enough for a hot loop to show as hundreds of attempts, and for the
// backoff to reach retries seconds apart.
const backoffWindow = 20 * time.Second

// TestRefusedByQuota: when the API server refuses a Memcached's Deployment for
// a reason the CRD cannot know about, here a ResourceQuota that allows no
// Deployments, the Memcached says so: a Warning Event and Degraded=True, both
// with the API server's message. The operator retries with backoff, records
// one Event for all its attempts, and clears the condition by itself once the
// quota is gone.
func TestRefusedByQuota(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.run("create", "quota", "no-deployments", "--hard=count/deployments.apps=0")
	op := ns.startOperator()
	ns.createMemcached("cache", 2)
	const apiMessage = `deployments.apps "cache" is forbidden: exceeded quota: no-deployments`
	failedCreate := "failed to create deployment " + ns.name + "/cache"

	ok := t.Run("a Warning Event carries the API server's message", func(t *testing.T) {
		ns.withT(t).eventually("a Warning Event DeploymentCreateFailed", func(ctx context.Context) error {
			evs, err := ns.events(ctx, "cache", "DeploymentCreateFailed")
			if err != nil {
				return err
			}
			if len(evs) != 1 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, apiMessage) {
				return fmt.Errorf("events = %+v, want one Warning saying %q", evs, apiMessage)
			}
			t.Logf("event: %s %s: %s", evs[0].Type, evs[0].Reason, evs[0].Message)
			return nil
		})
	})
	ok = ok && t.Run("the Memcached is Degraded with reason DeploymentCreateFailed", func(t *testing.T) {
		ns.withT(t).eventually("condition Degraded=True", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "cache")
			if err != nil {
				return err
			}
			c := o.Memcached.Condition("Degraded")
			if c == nil || c.Status != "True" || c.Reason != "DeploymentCreateFailed" || !strings.Contains(c.Message, apiMessage) {
				return fmt.Errorf("condition Degraded = %+v, want True, reason DeploymentCreateFailed, saying %q", c, apiMessage)
			}
			if a := o.Memcached.Condition("Available"); a == nil || a.Status != "False" {
				return fmt.Errorf("condition Available = %+v, want False", a)
			}
			return nil
		})
	})
	ok = ok && t.Run("retries back off and leave one Event", func(t *testing.T) {
		start := time.Now()
		err := framework.Consistently(context.Background(), backoffWindow, "the backoff", func(ctx context.Context) error {
			if n := attempts(op, failedCreate); n > maxAttemptsBeforeResync {
				return fmt.Errorf("%d attempts to create the deployment, want at most %d", n, maxAttemptsBeforeResync)
			}
			evs, err := ns.events(ctx, "cache", "DeploymentCreateFailed")
			if err != nil {
				return err
			}
			if len(evs) != 1 || evs[0].Count != 1 {
				return fmt.Errorf("events = %+v, want one with count 1: a failure that does not change is reported once", evs)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n := attempts(op, failedCreate)
		t.Logf("%d attempts to create the deployment in the first %s of failing", n, time.Since(start).Round(time.Second))
		if n < 3 {
			t.Errorf("%d attempts, want the operator to keep retrying", n)
		}
	})
	if !ok {
		return
	}
	t.Run("the condition clears once the quota is gone", func(t *testing.T) {
		ns := ns.withT(t)
		ns.run("delete", "quota", "no-deployments")
		ns.waitConverged("cache", 2)
	})
}

// TestRefusedByRBAC: steps that RBAC stops are reported too. A scale that the
// operator's Role does not allow makes the Memcached Degraded with reason
// DeploymentScaleFailed; a status write it does not allow can only be an
// Event, StatusUpdateFailed, whose count grows with the retries instead of
// new Events piling up. Both clear once deploy/rbac.yaml is applied again.
func TestRefusedByRBAC(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ns.createMemcached("cache", 1)
	ns.waitConverged("cache", 1)

	ok := t.Run("a forbidden scale is DeploymentScaleFailed", func(t *testing.T) {
		ns := ns.withT(t)
		ns.revokeVerb("deployments", "patch", "deployments.apps")
		ns.setSize("cache", 3)
		const apiMessage = `cannot patch resource "deployments" in API group "apps"`
		ns.eventually("condition Degraded=True with reason DeploymentScaleFailed", func(ctx context.Context) error {
			o, err := framework.Observe(ctx, ns.kubectl, "cache")
			if err != nil {
				return err
			}
			c := o.Memcached.Condition("Degraded")
			if c == nil || c.Status != "True" || c.Reason != "DeploymentScaleFailed" || !strings.Contains(c.Message, apiMessage) {
				return fmt.Errorf("condition Degraded = %+v, want True, reason DeploymentScaleFailed, saying %q", c, apiMessage)
			}
			if len(o.Memcached.Status.Nodes) != 1 {
				return fmt.Errorf("status.nodes = %v, want the one pod that still runs", o.Memcached.Status.Nodes)
			}
			return nil
		})
		ns.eventually("a Warning Event DeploymentScaleFailed", func(ctx context.Context) error {
			evs, err := ns.events(ctx, "cache", "DeploymentScaleFailed")
			if err != nil {
				return err
			}
			if len(evs) != 1 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, apiMessage) {
				return fmt.Errorf("events = %+v, want one Warning saying %q", evs, apiMessage)
			}
			return nil
		})
		ns.run("apply", "-f", paths.Deploy("rbac.yaml"))
		ns.waitConverged("cache", 3)
	})
	if !ok {
		return
	}
	t.Run("a forbidden status write is one StatusUpdateFailed Event with a count", func(t *testing.T) {
		ns := ns.withT(t)
		ns.revokeVerb("memcacheds/status", "update", "memcacheds.cache.example.com", "--subresource=status")
		ns.setSize("cache", 2)
		const apiMessage = `cannot update resource "memcacheds/status" in API group "cache.example.com"`
		ns.eventually("the retries to fold into one Warning Event StatusUpdateFailed", func(ctx context.Context) error {
			evs, err := ns.events(ctx, "cache", "StatusUpdateFailed")
			if err != nil {
				return err
			}
			if len(evs) != 1 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, apiMessage) || evs[0].Count < 2 {
				return fmt.Errorf("events = %+v, want one Warning saying %q with a count of 2 or more", evs, apiMessage)
			}
			t.Logf("event: %s %s (count %d): %s", evs[0].Type, evs[0].Reason, evs[0].Count, evs[0].Message)
			return nil
		})
		ns.run("apply", "-f", paths.Deploy("rbac.yaml"))
		ns.waitConverged("cache", 2)
	})
}

// attempts counts the failed reconciles of the operator whose error contains
// what: the queues log one error (or, when they drop the Memcached, one
// warning) per failed attempt.
func attempts(op *framework.Operator, what string) int {
	n := 0
	for _, line := range strings.Split(op.Log(), "\n") {
		if strings.Contains(line, what) && (strings.Contains(line, "level=error") || strings.Contains(line, "level=warning")) {
			n++
		}
	}
	return n
}

// policyRule is a rule of deploy/rbac.yaml's Role.
type policyRule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// revokeVerb removes verb from the operator's Role rule for resource (as the
// Role spells it, such as memcacheds/status) and waits until the API
// server's authorizer denies it, as `kubectl auth can-i verb canI...` asks,
// so that the operator's next attempt is certainly refused. Applying
// deploy/rbac.yaml restores it.
func (ns *namespace) revokeVerb(resource, verb string, canI ...string) {
	ns.t.Helper()
	var role struct{ Rules []policyRule }
	if err := ns.kubectl.GetJSON(context.Background(), &role, "role", "memcached-operator"); err != nil {
		ns.t.Fatal(err)
	}
	var rules []policyRule
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, resource) {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
		}
		if len(r.Verbs) > 0 { // a rule without verbs is invalid
			rules = append(rules, r)
		}
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/rules", "value": rules}})
	if err != nil {
		ns.t.Fatal(err)
	}
	ns.run("patch", "role", "memcached-operator", "--type=json", "-p", string(patch))
	operator := "system:serviceaccount:" + ns.name + ":" + operatorSA
	args := append(append([]string{"auth", "can-i", verb}, canI...), "--as", operator)
	ns.eventually(fmt.Sprintf("RBAC to deny %s %s", verb, resource), func(ctx context.Context) error {
		// kubectl auth can-i exits 1 when the answer is no.
		out, _ := ns.kubectl.Run(ctx, args...)
		if strings.TrimSpace(out) != "no" {
			return fmt.Errorf("kubectl %s = %q", strings.Join(args, " "), strings.TrimSpace(out))
		}
		return nil
	})
}
