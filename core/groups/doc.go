// Package groups is the group coordinator of a broker: Kafka's classic
// consumer group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// DescribeGroups, ListGroups) and committed offsets (OffsetCommit,
// OffsetFetch) kept in the partitions of Kafka's internal topic
// __consumer_offsets.
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
// earliest deadline of any group. The state machine also says when a group
// metadata record is due (a rebalance completed, the group emptied), and
// the Coordinator writes it (see Group metadata below).
//
// # KIP-848 consumer groups
//
// Beside the classic groups, the coordinator serves KIP-848 ("next
// generation") consumer groups, where it assigns the partitions itself:
// each is a consumer.Group (package core/groups/consumer, a deterministic
// state machine like group, with the assignors of core/groups/assignor),
// kept under the same lock and timer and committing to the same offsets
// (consumer_groups.go). A group id is a classic group or a consumer group at
// a time; Options.Topics gives them the topic metadata they assign from.
//
// # Committed offsets: partitions of __consumer_offsets
//
// A group belongs to one partition of __consumer_offsets
// (Options.PartitionFor: Kafka's abs(hash(group)) % partitions), and its
// coordinator is the broker that leads that partition. The broker hands the
// coordinator each partition it comes to lead (Load, which replays the
// partition's log into memory; requests for its groups meanwhile get
// ErrCoordinatorLoadInProgress) and takes it back when it stops leading it
// (Unload: parked requests are answered ErrNotCoordinator and the groups
// forgotten here). A group whose partition is not loaded gets
// ErrNotCoordinator, and the client asks FindCoordinator again.
//
// Each record is one committed offset or one group's metadata, in the
// formats of Kafka's __consumer_offsets (big-endian, strings as an int16
// length and bytes), so tools that read the topic (Burrow,
// kafka-consumer-groups) understand it:
//
//	offset key    int16 version (1) | string group | string topic | int32 partition
//	offset value  int16 version (3) | int64 offset | int32 leader epoch | string metadata | int64 commit time (ms)
//	group key     int16 version (2) | string group
//	group value   kmsg.GroupMetadataValue, version 3: protocol type, generation, protocol, leader,
//	              state timestamp, members (id, instance id, client id and host, timeouts,
//	              subscription, assignment)
//
// A record without a value (a tombstone) removes the offset (Delete,
// RemoveTopic, ExpireOffsets) or the group (Delete, ExpireOffsets, an empty
// group without offsets). Replay passes over key versions 3 to 255 (record
// types of Kafka's newer coordinator) and fails on anything else. A
// transactional batch (attributes bit 4) holds offsets of a transaction,
// and a control batch (bit 5) its end (see Transactional offset commits).
//
// # Group metadata
//
// A group metadata record is written when a rebalance completes (the
// leader's SyncGroup), when a join phase ends without members, and when a
// static member replaces its id in a Stable group; Load restores each group
// from its latest record as Kafka's GroupCoordinator.onGroupLoaded does: a
// group with members Stable, each member alive for one session timeout from
// the load (it keeps its place by heartbeating with its id and generation,
// or is removed and the others rebalance), a group without members Empty
// since the record's time. So after a restart, or a move to another broker,
// DescribeGroups and ListGroups show a consumer group with its protocol, and
// its members need not rejoin. The record is appended in order with the
// group's commits but SyncGroup does not wait for it (group_metadata.go says
// why that is safe). One commit is one Log.Append of one or more
// batches, acknowledged when the Log says it is committed. The topic is
// compacted (cleanup.policy=compact, by the broker's log cleaner), which
// keeps the last record of every key: every live offset survives, and
// superseded commits and old tombstones go.
//
// # Transactional offset commits
//
// A transactional producer commits a group's offsets within its
// transaction (TxnOffsetCommit, TxnCommit): they are written at once, as
// transactional batches with the producer's id, epoch and sequence numbers,
// and wait in memory per producer, invisible to OffsetFetch, until the
// transaction's marker (a control batch the transaction coordinator has
// written to the partition) commits them (CompleteTxn) or drops them.
// OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for a
// partition whose offsets wait (FetchStable). Load replays the markers it
// meets in the log; a transaction without one keeps its offsets waiting. A
// partition's committed offset is always its record latest in the log, so
// a plain commit written after a transaction's offsets wins over them when
// the transaction commits later. txn_offsets.go says more.
//
// Before __consumer_offsets, each broker kept its offsets in a log of the
// same records in a directory of its own; ReadLegacy reads such a store and
// Import moves its offsets into the loaded partitions.
package groups
