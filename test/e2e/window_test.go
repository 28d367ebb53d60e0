package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestMaintenanceWindow changes the operator's default image under three
// Memcacheds while its --maintenance-window, the platform team's default,
// is days away: they keep their pods and say that they wait, with the
// window's next opening, and a spec change that a user makes to one of
// them rolls it at once. Then the user moves the other two's window
// (spec.maintenanceWindow) to one that opens a minute later. No roll of
// theirs starts before it opens and both finish inside it.
//
// Nothing here depends on seeing a state while it lasts a short time:
// the waiting state of the first part lasts for days, and when each roll
// started and ended is read afterwards from what the API server recorded,
// the creationTimestamp of the ReplicaSet of the new template and the
// lastTransitionTime of the Progressing condition that says Complete, on
// the clock of this machine, which the test shares with the cluster.
func TestMaintenanceWindow(t *testing.T) {
	t.Parallel()
	const (
		size     = 2
		oldImage = "example.com/memcached:window-old"
		newImage = "example.com/memcached:window-new"
		userArg  = "--threads=2"
	)
	ns := newNamespace(t, slug(t.Name()))
	// The default window opens three days from now at noon: closed now,
	// and still closed when the test ends.
	day := time.Now().UTC().AddDate(0, 0, 3)
	farOpening := time.Date(day.Year(), day.Month(), day.Day(), 12, 0, 0, 0, time.UTC)
	flags := func(image string) []string {
		// No resync: only the operator's own requeue for the window's
		// opening can start the waiting rolls.
		return []string{"--log-level=debug", "--sidecar-poll-interval=0", "--resync=0", "--memcached-image=" + image, "--max-concurrent-rolls=1",
			fmt.Sprintf("--maintenance-window=%s 12:00 1h", farOpening.Weekday())}
	}
	op := ns.startOperator(flags(oldImage)[2:]...)
	names := []string{"window-a", "window-b", "window-user"}
	var manifest strings.Builder
	for _, name := range names {
		fmt.Fprintf(&manifest, "---\napiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %s\nspec:\n  size: %d\n", name, size)
	}
	ns.apply(manifest.String())
	for _, name := range names {
		ns.waitConverged(name, size)
	}

	// A new operator default image: every roll waits for the window.
	if err := op.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the operator: %v", err)
	}
	if err := op.SetArgs(flags(newImage)...); err != nil {
		t.Fatal(err)
	}
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	wantWait := "opens next at " + farOpening.Format(time.RFC3339)
	ns.eventually("every Memcached to wait for the default window", func(ctx context.Context) error {
		for _, name := range names {
			m, err := ns.memcached(ctx, name)
			if err != nil {
				return err
			}
			c := m.Condition("Progressing")
			if c == nil || c.Status != "True" || c.Reason != "WaitingForMaintenanceWindow" || !strings.Contains(c.Message, wantWait) || !strings.Contains(c.Message, "(--maintenance-window)") {
				return fmt.Errorf("memcached %s: Progressing %+v, want True WaitingForMaintenanceWindow, %q", name, c, wantWait)
			}
		}
		return nil
	})
	if m, err := ns.memcached(context.Background(), names[0]); err == nil {
		c := m.Condition("Progressing")
		t.Logf("memcached %s waits: Progressing %s %s: %s", names[0], c.Status, c.Reason, c.Message)
	}
	kube := kubeClient(t)
	for _, name := range names {
		if img := deploymentImage(t, kube, ns.name, name); img != oldImage {
			t.Fatalf("deployment %s runs %s while it waits for the window, want %s", name, img, oldImage)
		}
	}

	// A user's spec change goes at once, with the operator's new image:
	// its window is the default one, days away.
	ns.run("patch", "memcached", "window-user", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"extraArgs":[%q]}}`, userArg))

	// The other two get a window of their own that opens at the start of
	// a minute 60 to 120 s from now, for an hour.
	opening := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Minute)
	window := fmt.Sprintf(`{"spec":{"maintenanceWindow":{"day":%q,"start":%q,"duration":"1h"}}}`, opening.Weekday(), opening.Format("15:04"))
	for _, name := range names[:2] {
		ns.run("patch", "memcached", name, "--type=merge", "-p", window)
	}
	t.Logf("window-a and window-b wait for %s; the default window opens at %s", opening.Format(time.RFC3339), farOpening.Format(time.RFC3339))

	err := framework.Eventually(context.Background(), time.Until(opening)+5*time.Minute, "every Memcached to roll to "+newImage, func(ctx context.Context) error {
		if err := convergedAndComplete(ctx, ns, names, size); err != nil {
			return err
		}
		for _, name := range names {
			if img := deploymentImage(t, kube, ns.name, name); img != newImage {
				return fmt.Errorf("deployment %s runs %s", name, img)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	closing := opening.Add(time.Hour)
	for _, name := range names {
		started := rollStarted(t, kube, ns.name, name, newImage)
		completed := completedAt(t, ns, name)
		t.Logf("memcached %s: roll started at %s, Complete at %s", name, started.Format(time.RFC3339), completed.Format(time.RFC3339))
		if name == "window-user" {
			// That it rolled at all shows that its spec change did not
			// wait for its window, the default one, days away.
			continue
		}
		if started.Before(opening) {
			t.Errorf("memcached %s: roll started at %s, before its window opened at %s", name, started, opening)
		}
		if !completed.Before(closing) {
			t.Errorf("memcached %s: roll completed at %s, not before its window closed at %s", name, completed, closing)
		}
	}
}

// deploymentImage returns the memcached image of Deployment name's template.
func deploymentImage(t *testing.T, kube kubernetes.Interface, namespace, name string) string {
	t.Helper()
	d, err := kube.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// rollStarted returns when the Deployment controller created Deployment
// name's ReplicaSet that runs image, right after the Deployment's template
// changed to it: the earliest such, as the API server stamped it.
func rollStarted(t *testing.T, kube kubernetes.Interface, namespace, name, image string) time.Time {
	t.Helper()
	list, err := kube.AppsV1().ReplicaSets(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "memcached_cr=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	for _, rs := range list.Items {
		if rs.Spec.Template.Spec.Containers[0].Image != image {
			continue
		}
		if c := rs.CreationTimestamp.Time; first.IsZero() || c.Before(first) {
			first = c
		}
	}
	if first.IsZero() {
		t.Fatalf("deployment %s has no ReplicaSet running %s", name, image)
	}
	return first
}

// completedAt returns when Memcached name's Progressing condition last
// turned False Complete.
func completedAt(t *testing.T, ns *namespace, name string) time.Time {
	t.Helper()
	var m struct {
		Status struct {
			Conditions []struct {
				Type, Status, Reason string
				LastTransitionTime   time.Time `json:"lastTransitionTime"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := ns.kubectl.GetJSON(context.Background(), &m, "memcached", name); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Status.Conditions {
		if c.Type == "Progressing" && c.Status == "False" && c.Reason == "Complete" {
			return c.LastTransitionTime
		}
	}
	t.Fatalf("memcached %s: no Progressing False Complete in %+v", name, m.Status.Conditions)
	return time.Time{}
}
