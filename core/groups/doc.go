// Package groups is the group coordinator of a single-node broker: Kafka's
// classic consumer group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, DescribeGroups, ListGroups) and committed offsets (OffsetCommit,
// OffsetFetch) that survive a restart.
//
// # Why the classic protocol, and what the coordinator does not do
//
// librdkafka 2.0.2, franz-go and sarama all use the classic protocol by
// default, and in it the clients assign partitions themselves: the
// coordinator only decides who is in the group, picks a leader and a
// protocol (assignor) every member supports, hands the leader the members'
// subscriptions, and relays the leader's assignment to everyone. It never
// looks inside protocol metadata or assignments, so every client-side
// assignor (range, roundrobin, sticky, cooperative-sticky) works unchanged.
//
// # The state machine
//
// Each group is a deterministic state machine (group) that does no I/O:
// requests arrive as method calls with the current time, time passes as
// tick(now), and every answer, including answers to requests parked
// earlier, comes back as a reply for the caller to deliver, as in
// etcd-io/raft. Its unit tests drive it with explicit times, no goroutines.
//
//	          first member joins
//	Empty ──────────────────────────▶ PreparingRebalance ◀─────────────────┐
//	  ▲                                 │          │                        │
//	  └── join phase ends, no members ──┘          │                        │ a member joins, leaves
//	                                               ▼                        │ or times out; the leader
//	      join phase ends: all rejoined,   CompletingRebalance ─────────────┤ or a changed member
//	      or the rebalance timeout passed          │                        │ rejoins
//	                            leader's SyncGroup ▼                        │
//	                                             Stable ────────────────────┘
//
// Dead is a deleted group. The rules are Kafka's (GroupCoordinator.scala):
//
//   - A JoinGroup without a member id gets a new one; with
//     RequireKnownMemberID (JoinGroup v4+) it comes back with
//     ErrMemberIDRequired and rejoins with it, and the join phase waits for
//     such handed-out ids until they are used or their session timeout
//     passes.
//   - A join phase ends when every member has rejoined, or when the longest
//     rebalance timeout passes; dynamic members that did not rejoin are then
//     removed. A group that was Empty waits InitialRebalanceDelay first, and
//     again while new members keep arriving, up to the rebalance timeout.
//   - The leader is the first member to join, kept while it rejoins; the
//     protocol is the one every member supports that most members list first.
//   - The join phase's end bumps the generation and answers every member
//     (the leader with the member list). Then the leader's SyncGroup carries
//     the assignments, which answer every member's SyncGroup; members that
//     have not sent SyncGroup within the rebalance timeout are removed.
//   - Heartbeat keeps a session alive and answers ErrRebalanceInProgress
//     during a join phase; a session that runs out removes the member (a
//     member waiting for a join or sync answer is alive, except a new member
//     after five minutes). Leave removes members at once. Both rebalance
//     the rest.
//   - Static members (group.instance.id) keep their place across restarts:
//     rejoining without a member id replaces the old id (which is fenced,
//     ErrFencedInstanceID) and, in a Stable group whose protocol does not
//     change, keeps its assignment without a rebalance. A join phase does not
//     remove a static member that has not rejoined; its session timeout does.
//
// Coordinator is the thin concurrent layer around the groups: one mutex, a
// channel per parked request, and one timer (from Options.Clock) set to the
// earliest deadline of any group. Membership is not persisted: after a
// restart every member gets ErrUnknownMemberID and rejoins, which clients do
// on their own.
//
// # Committed offsets
//
// Offsets live in memory and in an append-only log (package partlog) of
// record batches (package record) in Options.Dir:
//
//	<Dir>/CURRENT            "offsets-000002\n": the live log directory
//	<Dir>/offsets-000002/    partition log of offset records
//
// Each record is one committed offset, in the formats of Kafka's
// __consumer_offsets (big-endian, strings as an int16 length and bytes):
//
//	key    int16 version (1) | string group | string topic | int32 partition
//	value  int16 version (3) | int64 offset | int32 leader epoch | string metadata | int64 commit time (ms)
//
// A record without a value (a tombstone) removes the offset (Delete,
// RemoveTopic). One commit is one Append of one or more batches; it is
// acknowledged once appended (the page cache), like Kafka's default, and
// Close closes the log cleanly. Open replays the log into memory.
//
// # Compaction
//
// Every commit appends, so a consumer committing every second would grow
// the log forever; compaction rewrites it with only the live offsets. It is
// due, at Open and after every write while running, when the dead records
// (superseded commits, tombstones and the commits they removed) number at
// least CompactMinSuperseded (10000 by default, about 1 MB of records) and
// outnumber the live offsets: Kafka's log cleaner default,
// min.cleanable.dirty.ratio=0.5, with a floor so that small logs are left
// alone. The log thus stays under about twice the live offsets plus the
// floor, and each live record is rewritten only after at least as many dead
// ones were appended: one record rewritten per record committed, at most.
//
// While the coordinator runs, a compaction takes its mutex twice, briefly,
// and does the bulk of the work between, on its own goroutine:
//
//	begin    (mutex)     copy the live offsets; from now on every record
//	                     written to offsets-<n> is also kept, in order (the delta)
//	rewrite  (no mutex)  remove leftover log directories; write the copy to
//	                     offsets-<n+1> and fsync it; commits and fetches go on
//	finish   (mutex)     append the delta, close offsets-<n+1> (fsynced) and
//	                     fsync Dir, reopen it, point CURRENT at it (a synced
//	                     temporary file renamed over CURRENT, then Dir synced);
//	                     commits now go to offsets-<n+1>
//	retire   (no mutex)  close offsets-<n>, remove it, fsync Dir
//
// A power cut before CURRENT's rename is durable leaves offsets-<n> live, as
// if no compaction had run (the next Open removes offsets-<n+1>); after it,
// offsets-<n+1>, complete and durable with every offset acknowledged before
// the switch. The log is never a mix of the two, and nothing durable is
// lost. A failure before the rename abandons the compaction: the new
// directory is removed, offsets-<n> stays in use, and the next try waits
// until as many records again have come. After the rename the switch
// stands; if the directory sync after it failed, offsets-<n> is kept (CURRENT
// on disk may still name it) until a later compaction, having synced Dir,
// removes it. Close abandons a compaction that has not started and stops a
// running one, waiting for it. At Open the same steps run in line.
package groups
