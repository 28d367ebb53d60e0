package leader

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// at is a time with nanoseconds, which the Lease keeps to the microsecond.
var at = time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)

func electionRecord(holder string, renew time.Time, transitions int) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{
		HolderIdentity:       holder,
		LeaseDurationSeconds: 12,
		AcquireTime:          metav1.NewTime(at),
		RenewTime:            metav1.NewTime(renew),
		LeaderTransitions:    transitions,
	}
}

// createLease creates through f the Lease that holder holds, renewed at
// renew after transitions changes of holder, failing t if it cannot.
func (f *front) createLease(t *testing.T, holder string, renew time.Time, transitions int) {
	t.Helper()
	if err := f.lock(t, holder).Create(electionRecord(holder, renew, transitions)); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseLockCreatesTheLease(t *testing.T) {
	api := newFakeAPI()
	lock := newFront(t, api).lock(t, "pod-a")

	// The elector updates what Get showed it: a record held by nobody.
	if _, err := lock.Get(); err != nil {
		t.Fatalf("Get of a missing lease: %v", err)
	}
	if err := lock.Update(electionRecord("pod-a", at.Add(time.Second), 1)); err != nil {
		t.Fatal(err)
	}

	got := api.lease(testLease)
	want := map[string]interface{}{
		"holderIdentity":       "pod-a",
		"leaseDurationSeconds": float64(12),
		"acquireTime":          "2026-11-29T12:00:00.123456Z",
		"renewTime":            "2026-11-29T12:00:01.123456Z",
		"leaseTransitions":     float64(0),
	}
	if !reflect.DeepEqual(got["spec"], want) {
		t.Errorf("stored spec: got %v, want %v", got["spec"], want)
	}
	if got["apiVersion"] != "coordination.k8s.io/v1" || got["kind"] != "Lease" {
		t.Errorf("stored apiVersion/kind: got %v/%v, want coordination.k8s.io/v1/Lease", got["apiVersion"], got["kind"])
	}
}

func TestLeaseLockReadsTheRecord(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	f.createLease(t, "pod-a", at.Add(time.Second), 3)

	got, err := f.lock(t, "pod-b").Get()
	if err != nil {
		t.Fatal(err)
	}

	want := resourcelock.LeaderElectionRecord{
		HolderIdentity:       "pod-a",
		LeaseDurationSeconds: 12,
		AcquireTime:          metav1.NewTime(at.Truncate(time.Microsecond)),
		RenewTime:            metav1.NewTime(at.Add(time.Second).Truncate(time.Microsecond)),
		LeaderTransitions:    3,
	}
	if got.HolderIdentity != want.HolderIdentity || got.LeaseDurationSeconds != want.LeaseDurationSeconds ||
		got.LeaderTransitions != want.LeaderTransitions ||
		!got.AcquireTime.Equal(&want.AcquireTime) || !got.RenewTime.Equal(&want.RenewTime) {
		t.Errorf("got %+v, want %+v", *got, want)
	}
}

// TestLeaseLockUpdateConflicts: of two candidates that read the same Lease,
// only the first to write wins; the other's write is refused.
func TestLeaseLockUpdateConflicts(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	f.createLease(t, "pod-old", at, 0)
	a, b := f.lock(t, "pod-a"), f.lock(t, "pod-b")
	if _, err := a.Get(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(); err != nil {
		t.Fatal(err)
	}

	if err := b.Update(electionRecord("pod-b", at.Add(time.Minute), 1)); err != nil {
		t.Fatalf("first write: %v", err)
	}
	err := a.Update(electionRecord("pod-a", at.Add(time.Minute), 1))

	if !apierrors.IsConflict(err) {
		t.Fatalf("second write on the same resourceVersion: got %v, want Conflict", err)
	}
	if holder := api.lease(testLease)["spec"].(map[string]interface{})["holderIdentity"]; holder != "pod-b" {
		t.Errorf("holderIdentity = %v, want pod-b", holder)
	}
	// Once it has read the new version, a may write again.
	if _, err := a.Get(); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(electionRecord("pod-a", at.Add(2*time.Minute), 2)); err != nil {
		t.Errorf("write after a fresh read: %v", err)
	}
}

func TestLeaseLockCreateRefusedWhenItExists(t *testing.T) {
	f := newFront(t, newFakeAPI())
	f.createLease(t, "pod-a", at, 0)
	if err := f.lock(t, "pod-b").Create(electionRecord("pod-b", at, 0)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("got %v, want AlreadyExists", err)
	}
}

func TestLeaseLockUpdateNeedsARead(t *testing.T) {
	lock := newFront(t, newFakeAPI()).lock(t, "pod-a")
	if err := lock.Update(electionRecord("pod-a", at, 0)); err == nil || !strings.Contains(err.Error(), "not yet read") {
		t.Errorf("got %v, want an error saying the lease was not read", err)
	}
}

// TestLeaseLockKeepsOtherSpecFields: fields of the Lease's spec that the
// elector's record lacks, such as newer API servers' strategy, survive.
func TestLeaseLockKeepsOtherSpecFields(t *testing.T) {
	api := newFakeAPI()
	api.put(testLease, map[string]interface{}{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]interface{}{"name": testLease, "namespace": testNamespace},
		"spec":     map[string]interface{}{"holderIdentity": "pod-old", "strategy": "OldestEmulationVersion"},
	})
	lock := newFront(t, api).lock(t, "pod-a")
	if _, err := lock.Get(); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(electionRecord("pod-a", at, 1)); err != nil {
		t.Fatal(err)
	}
	spec := api.lease(testLease)["spec"].(map[string]interface{})
	if spec["strategy"] != "OldestEmulationVersion" || spec["holderIdentity"] != "pod-a" {
		t.Errorf("spec = %v, want strategy kept and holderIdentity pod-a", spec)
	}
}

func TestLeaseLockTracksRenewals(t *testing.T) {
	api := newFakeAPI()
	lock := newFront(t, api).lock(t, "pod-a")
	if !lock.RenewedAt().IsZero() {
		t.Fatalf("RenewedAt = %v before any write, want zero", lock.RenewedAt())
	}
	before := time.Now()
	if err := lock.Create(electionRecord("pod-a", at, 0)); err != nil {
		t.Fatal(err)
	}
	if r := lock.RenewedAt(); r.Before(before) || r.After(time.Now()) {
		t.Errorf("RenewedAt = %v, want the time the write was sent", r)
	}
}

func TestLeaseLockRecordsEventsOnTheLease(t *testing.T) {
	api := newFakeAPI()
	recorder := record.NewFakeRecorder(10)
	f := newFront(t, api)
	lock := f.lock(t, "pod-a")
	lock.recorder = recorder
	if err := lock.Create(electionRecord("pod-a", at, 0)); err != nil {
		t.Fatal(err)
	}
	lock.RecordEvent("became leader")
	if got, want := <-recorder.Events, "Normal LeaderElection pod-a became leader"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
}

// TestLeaseLockShowsTheElector: what Get returns for each state of the
// Lease, which decides whether client-go's elector takes it at once, waits a
// lease duration, or creates it (see LeaseLock's Patience).
func TestLeaseLockShowsTheElector(t *testing.T) {
	released := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: releasedDurationSeconds, RenewTime: metav1.NewTime(at), LeaderTransitions: 2}
	tests := []struct {
		name string
		// stored is the Lease's record, nil for none; writtenHere has
		// the lock under test write it.
		stored      *resourcelock.LeaderElectionRecord
		writtenHere bool
		// readBefore has the lock read the Lease before it is stored.
		readBefore  bool
		wantHolder  string
		wantMissing bool
	}{
		{name: "missing", wantHolder: ""},
		{name: "released by its holder", stored: &released, wantMissing: true},
		{name: "another holder", stored: ptrRecord(electionRecord("pod-b", at, 0)), wantHolder: "pod-b"},
		{name: "own name written here", stored: ptrRecord(electionRecord("pod-a", at, 0)), writtenHere: true, wantHolder: "pod-a"},
		{name: "own name at the first read", stored: ptrRecord(electionRecord("pod-a", at, 0)), wantHolder: "pod-a"},
		{name: "own name written elsewhere after a read", stored: ptrRecord(electionRecord("pod-a", at, 0)), readBefore: true, wantHolder: "pod-a (not written by this process)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFront(t, newFakeAPI())
			lock := f.lock(t, "pod-a")
			if tt.readBefore {
				if _, err := lock.Get(); err != nil {
					t.Fatal(err)
				}
			}
			if tt.stored != nil {
				writer := f.lock(t, "pod-other")
				if tt.writtenHere {
					writer = lock
				}
				if err := writer.Create(*tt.stored); err != nil {
					t.Fatal(err)
				}
			}

			got, err := lock.Get()

			if tt.wantMissing {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("got %+v, %v; want NotFound", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.HolderIdentity != tt.wantHolder {
				t.Errorf("holder %q, want %q", got.HolderIdentity, tt.wantHolder)
			}
			if tt.stored == nil {
				// With a watch open, the stamp holds while nothing changes.
				watchChanges(t, lock)
				got, err = lock.Get()
				if err != nil {
					t.Fatal(err)
				}
				again, err := lock.Get()
				if err != nil || got.RenewTime.IsZero() || !reflect.DeepEqual(again, got) {
					t.Errorf("a missing lease read %+v then %+v (%v); want the same record, stamped", got, again, err)
				}
			}
		})
	}
}

func ptrRecord(r resourcelock.LeaderElectionRecord) *resourcelock.LeaderElectionRecord { return &r }

// TestLeaseLockFencesOnLoss: a lock that holds the Lease reports it Lost
// when a read shows it deleted or held by another, and then refuses to write,
// so that its elector cannot create the Lease again.
func TestLeaseLockFencesOnLoss(t *testing.T) {
	tests := []struct {
		name   string
		change func(api *fakeAPI)
		want   string
	}{
		{"deleted", func(api *fakeAPI) { api.remove(testLease) }, "deleted"},
		{"another holder", func(api *fakeAPI) { api.setHolder(testLease, "pod-b") }, `names "pod-b"`},
		{"holder emptied", func(api *fakeAPI) { api.setHolder(testLease, "") }, `names ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			lock := newFront(t, api).lock(t, "pod-a")
			if err := lock.Create(electionRecord("pod-a", at, 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := lock.Get(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-lock.Lost():
				t.Fatal("Lost closed while the lease is held")
			default:
			}

			tt.change(api)
			_, _ = lock.Get()

			select {
			case <-lock.Lost():
			default:
				t.Fatal("Lost not closed")
			}
			if !strings.Contains(lock.LostReason(), tt.want) {
				t.Errorf("LostReason %q, want it to contain %q", lock.LostReason(), tt.want)
			}
			writes := api.writes
			if err := lock.Update(electionRecord("pod-a", at, 0)); err == nil {
				t.Error("Update after the loss succeeded")
			}
			if err := lock.Create(electionRecord("pod-a", at, 0)); err == nil {
				t.Error("Create after the loss succeeded")
			}
			if api.writes != writes {
				t.Errorf("%d writes after the loss, want none", api.writes-writes)
			}
		})
	}
}

// TestLeaseLockRelease: Release empties the holder of a Lease it holds,
// marks it released and keeps the transitions; a lock that does not hold
// the Lease writes nothing. Either way the lock writes nothing afterwards.
func TestLeaseLockRelease(t *testing.T) {
	for _, holds := range []bool{true, false} {
		t.Run(fmt.Sprintf("holds %t", holds), func(t *testing.T) {
			api := newFakeAPI()
			f := newFront(t, api)
			lock := f.lock(t, "pod-a")
			if holds {
				if err := lock.Create(electionRecord("pod-a", at, 3)); err != nil {
					t.Fatal(err)
				}
			} else {
				f.createLease(t, "pod-b", at, 3)
				if _, err := lock.Get(); err != nil {
					t.Fatal(err)
				}
			}
			writes := api.writes

			if err := lock.Release(); err != nil {
				t.Fatal(err)
			}

			spec := api.lease(testLease)["spec"].(map[string]interface{})
			if holds {
				if spec["holderIdentity"] != "" || spec["leaseDurationSeconds"] != float64(releasedDurationSeconds) || spec["leaseTransitions"] != float64(3) {
					t.Errorf("released spec %v, want no holder, leaseDurationSeconds 1, 3 transitions", spec)
				}
			} else if api.writes != writes || spec["holderIdentity"] != "pod-b" {
				t.Errorf("%d writes, spec %v; want none, holder pod-b", api.writes-writes, spec)
			}
			writes = api.writes
			if _, err := lock.Get(); err == nil {
				t.Error("Get after Release succeeded")
			}
			if err := lock.Create(electionRecord("pod-a", at, 0)); err == nil {
				t.Error("Create after Release succeeded")
			}
			if api.writes != writes {
				t.Errorf("%d writes after Release, want none", api.writes-writes)
			}
		})
	}
}

// watchChanges has lock follow the Lease's changes until the test ends, and
// returns once its watch is open.
func watchChanges(t *testing.T, lock *LeaseLock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lock.followChanges(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		lock.mu.Lock()
		watching := lock.watching
		lock.mu.Unlock()
		if watching {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock's watch on the lease did not open within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLeaseCreatedAndDeletedBetweenReadsRestartsTheClock: a standby that
// found no Lease, then finds none again, must not count from its first read
// when a Lease came and went in between (a leader took it and someone
// deleted it): that leader may not have noticed the delete yet.
func TestLeaseCreatedAndDeletedBetweenReadsRestartsTheClock(t *testing.T) {
	api := newFakeAPI()
	f := newFront(t, api)
	standby := f.lock(t, "pod-b")
	watchChanges(t, standby)
	first, err := standby.Get()
	if err != nil {
		t.Fatal(err)
	}
	again, err := standby.Get()
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("a lease missing twice read %+v then %+v (%v); want the same stamp", first, again, err)
	}

	leader := f.lock(t, "pod-a")
	if _, err := leader.Get(); err != nil {
		t.Fatal(err)
	}
	if err := leader.Create(electionRecord("pod-a", time.Now(), 0)); err != nil {
		t.Fatal(err)
	}
	api.remove(testLease)
	deadline := time.Now().Add(5 * time.Second)
	for !standby.changedSince(first.RenewTime.Time) {
		if time.Now().After(deadline) {
			t.Fatal("the standby's watch reported no change within 5s")
		}
		time.Sleep(time.Millisecond)
	}

	after, err := standby.Get()
	if err != nil {
		t.Fatal(err)
	}
	if !after.RenewTime.After(first.RenewTime.Time) {
		t.Errorf("after a lease came and went, the missing lease reads stamped %v, want later than the first read's %v", after.RenewTime, first.RenewTime)
	}
}
