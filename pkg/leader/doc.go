// Package leader elects one leader among the operator's replicas, so that
// only one of them reconciles at a time, with client-go 1.11's
// tools/leaderelection on a coordination.k8s.io/v1 Lease.
//
// client-go 1.11 can lock only on a ConfigMap or an Endpoints object, which
// stores the leader in an annotation and makes every renewal look like a
// change to an object that other controllers watch. A Lease is the object the
// API now has for exactly this (client-go added a Lease lock in 1.14, and
// kube-controller-manager and kube-scheduler use one), so LeaseLock provides
// one for 1.11.
//
// # What it guarantees
//
// Elector.Run states the guarantee and its limits exactly. In short: two
// processes never lead at once, as long as a process stops writing within
// Config.StopTime of the loss that Run reports and clocks run at the same
// rate. A leader that loses the Lease stops its work and stands by: it
// stays up and campaigns again, waiting a lease duration like any standby,
// even when the Lease still names it (TestLeadsAgainAfterALoss,
// TestNoResumeAfterALoss). A leader is fenced: it stops at the first
// renewal that reads the Lease deleted, released by someone else or held by
// another, and in any
// case RenewDeadline plus a quarter of RetryPeriod after its last successful
// renewal, even when a request hangs. A standby takes the Lease only after
// it has seen the same record, or no Lease, for LeaseDuration on its own
// clock, and New refuses timings that leave less than StopTime between the
// leader's deadline and that. A standby also watches the Lease, so a Lease
// created and deleted between two of its reads restarts its count
// (TestLeaseCreatedAndDeletedBetweenReadsRestartsTheClock). Not covered: a
// release or an edit naming a starting process written by hand, and an
// edit that comes and goes between two reads of a candidate; until the old
// leader's next renewal, two could lead then. TestOneLeaderThenFailover (a leader whose requests stall),
// TestOutsideChangeFencesTheLeader (a deleted or edited Lease) and
// TestHandOverOnStop check that both never lead at once, and
// TestLeaseLockFencesOnLoss that a fenced lock writes no more; the
// real-node suite's TestLeaderFailover, TestLeaderHandOverOnRollout and
// TestOutsideLeaseChange do the same with real pods.
//
// # Timings
//
// The operator's defaults are a lease duration of 12 s, a renew deadline of
// 8 s and a retry period of 1 s. With client-go 1.11's jitter (a retry
// waits up to 1.2 periods more), a standby takes over at most about
// LeaseDuration + 2×2.2×RetryPeriod after the leader's last renewal: about
// 17 s with these defaults, where 15 s/10 s/2 s would allow about 24 s. A
// leader that stops hands over: it waits for its workers' last writes and
// releases the Lease, which a standby takes at once. After an outside
// change of the Lease (deleted, or its holder edited), nobody leads for
// about a lease duration, since a standby cannot tell whether the old
// leader has noticed yet; a new installation waits a lease duration before
// its first leader for the same reason
// (TestStandbyTakesAReleasedLeaseAtOnce,
// TestMissingLeaseIsCreatedAfterALeaseDuration).
//
// # Readiness
//
// Elector.Check is a replica's readiness: the API server has answered about
// the Lease within a lease duration, for leader and standby alike, so that a
// replica that could never take over (its Lease rules revoked, say) is not
// Ready.
package leader
