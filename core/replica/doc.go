// Package replica is one partition's replication state on one broker: a
// deterministic value that does no I/O, reads no clock and starts no
// goroutine, in the style of etcd raft and of core/groups and
// core/controller. The broker's node feeds it what happens (the partition's
// state record as read from the coordination store, appends moving the log
// end, followers' fetches, the leader's high watermark arriving at a
// follower, an epoch's end offset arriving from the leader, time passing)
// and executes what comes out of Ready: publish and checkpoint the high
// watermark, record the start of a leader epoch in the log, ask the leader
// where an epoch ended, truncate, point the fetcher at the leader, propose
// an ISR change to the store, resign from the ISR.
//
//	state record    SetState                  ─┐
//	the log         Appended, Truncated        ─┤
//	leader side     FollowerFetch, Tick        ─┼─▶ Replica ──Ready──▶ HW, epoch start, truncate, fetch,
//	follower side   LeaderHighWatermark,       ─┤                      ISR proposal, resignation
//	                EpochEnd, OutOfRange       ─┤
//	store outcome   ProposalFailed             ─┤
//	the log failed  LogFailed, TruncateFailed  ─┘
//
// # Roles
//
// The state record (leader, leader epoch, ISR, version; written by the
// controller, and for ISR changes by the leader, see core/controller) says
// who leads. A broker named leader is the leader for that epoch; a replica
// of the assignment that is not the leader follows the named leader; with no
// leader (or a broker that is not a replica) the role is None and the
// replica only keeps its high watermark.
//
// # The leader (Kafka 3.8's Partition and Replica, ZooKeeper mode)
//
//   - Becoming leader of epoch e with log end L records (e, L) in the log's
//     leader-epoch cache before any record of the epoch (Ready.StartEpoch;
//     Kafka's makeLeader, PR #5678), so a follower holding a later epoch's
//     data truncates correctly. Every follower's log end is unknown until
//     it fetches; ISR members count as caught up as of that moment.
//   - A follower's log end is the offset of its last fetch (fetching N
//     proves it holds everything below N). Its last caught-up time is the
//     fetch's time when it fetched at the leader's log end, else the time of
//     its previous fetch if this fetch reached the log end the leader had
//     then (Kafka's Replica.updateFetchState).
//   - The high watermark is the smallest log end over the maximal ISR (the
//     ISR in the record, plus a member a pending proposal adds, as Kafka's
//     PendingExpandIsr; a pending removal still counts until written),
//     including the leader's own; it never goes down, and a member whose log
//     end is unknown holds it where it is. Kafka 3.7+ also holds it while the
//     ISR is below min.insync.replicas, but only with KRaft's eligible leader
//     replicas; in ZooKeeper mode, as here, it does not.
//   - ISR shrink (Tick): a follower in the ISR that is not caught up (its log
//     end is not the leader's, and it last caught up more than LagTimeMax
//     ago: replica.lag.time.max.ms, 30 s) is proposed out.
//   - ISR expand (FollowerFetch): a replica outside the ISR whose log end has
//     reached both the high watermark and the start of the leader's epoch is
//     proposed in.
//   - One proposal at a time, written by compare-and-set on the record's
//     version; it takes effect when a SetState with a newer version arrives
//     (the write confirmed, or someone else's change read), and is dropped on
//     ProposalFailed (a conflict: the store moved), to be made again if the
//     rules still call for it.
//   - acks=all: a produce needs min.insync.replicas members in the ISR before
//     it appends (CheckAppend: ErrNotEnoughReplicas), and completes when the
//     high watermark passes its last offset (AcksAll), with
//     ErrNotEnoughReplicasAfterAppend if by then the maximal ISR is below
//     min.insync.replicas (Kafka's checkEnoughReplicasReachOffset).
//
// # The follower (Kafka's AbstractFetcherThread, with Fetch v11: no
// DivergingEpoch, so truncation goes through OffsetForLeaderEpoch)
//
//   - Following leader b in epoch e first asks b where the follower's latest
//     epoch ends (Ready.QueryEpoch), then truncates (KIP-101/279): to the
//     smallest of the leader's answer, the follower's own end of that epoch,
//     and its log end; an answer of "unknown epoch" falls back to the high
//     watermark. Never to its own high watermark alone: that was KIP-101's
//     data loss. Then it fetches from there (Ready.Fetch).
//   - Its high watermark is min(leader's, own log end), one round trip
//     behind the leader's.
//   - A fetch out of range: below the leader's log start (retention went
//     past the follower) empties the log and restarts it at the leader's
//     start; above the leader's log end (an unclean election) asks again
//     where the follower's epoch ends, which truncates it.
//
// # A failed log (Kafka's offline log directory)
//
// A log whose write or fsync failed recovers in place by cutting back to
// its last fsync (core/partlog). An in-sync replica of a partition with
// others must not do that by itself: as a leader it would give the cut
// offsets to new records in the same epoch, which its followers hold other
// records at; as a follower it could be elected without records the high
// watermark counted. So while it is in the ISR, its log's automatic
// recovery is held (HoldRecovery), and a failure makes it resign
// (LogFailed, Ready.Resign): the controller takes it out of the ISR as for
// a bounce of that broker, moving the leadership to another in-sync replica
// (or back to it, alone, in a new epoch). The loop recovers the log once a
// state record says that is safe (MayRecover), and the replica then follows
// (truncating by epochs) and rejoins the ISR when it has caught up. A
// truncation that fails is asked for again (TruncateFailed), never skipped.
//
// # Back from an unclean shutdown (KIP-966 in spirit)
//
// A log that was not closed cleanly (a crash or a power cut; or a
// partition directory that is gone) may have lost what the page cache
// held, while the state record, if no controller reacted in time, still
// names this broker in the ISR, even as leader in the epoch it led. Led
// in that epoch, its followers would truncate to its shortened log, and
// acknowledged records only they still hold would be gone. So the loop
// calls Unclean before the first SetState, and in every term whose record
// names the broker in the ISR (with other replicas) it resigns as for a
// failed log, serving nothing as leader, until a record takes it out of
// the ISR or makes it leader alone in a new epoch. Kafka in ZooKeeper mode
// has the same exposure; KRaft closes it at broker registration
// (KAFKA-15586, KAFKA-18106).
package replica
