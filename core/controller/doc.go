// Package controller is the cluster controller's state machine: the broker
// that wins the controller election runs one Controller, which decides every
// partition's leader and in-sync replicas (ISR) as brokers fail and start,
// gives new partitions their first state, and completes topic deletions.
//
// # The model
//
// A Controller is a deterministic value in the style of etcd raft and of
// core/groups: it does no I/O, reads no clock and starts no goroutine.
// Inputs are method calls, and what to do comes out of Ready as a batch of
// actions for a thin loop (not in this package) to execute:
//
//	store reads     SetBrokers, SetTopic, RemoveTopic, DeletionAcked ─┐
//	write outcomes  Applied, Failed                                  ─┼─▶ Controller ──Ready──▶ []Action
//	retry timer     Tick                                             ─┘
//
// The loop's side of the contract:
//
//  1. Having won the election with epoch e, it makes the value
//     (New(Config{ControllerEpoch: e})), sets its watches, then reads
//     /brokers/ids (each broker's Epoch is its registration's czxid) and
//     every topic (assignment, /config/topics, each partition's state record
//     with its version, whether /admin/delete_topics names it), and feeds
//     them: SetBrokers, then SetTopic per topic. On every watch event it reads again and feeds
//     what changed, the reads of one topic in the order it took them. ISR
//     changes that leaders make must reach it too (Kafka's ISR change
//     notifications, or watches on the state records): the controller
//     would otherwise learn of them only through conflicts, and not at all
//     for a partition it has no reason to write.
//  2. After any input it calls Ready and executes each action. A write
//     (CreateState, UpdateState, DeleteTopic) goes in one Multi with a
//     CheckOp on /controller_epoch, so a deposed controller writes nothing,
//     and with a check that the topic still has the write's topic ID
//     (required for DeleteTopic, advised for the others); its outcome goes
//     back as Applied or Failed with the store's error. A Reread is a new
//     read of the topic, fed with SetTopic (or RemoveTopic if it is gone).
//     Writes may run concurrently and settle in any order.
//  3. It calls Tick every second or so: writes that failed for a reason
//     other than a conflict are retried then.
//  4. When Deposed reports true, or a write is fenced, it resigns and drops
//     the value.
//
// Brokers do not hear from the controller directly: there are no
// LeaderAndIsr, UpdateMetadata or StopReplica requests. Each broker watches
// the state records of its partitions and serves Metadata from what it reads
// (the hybrid design of research/replication.md §2), so the controller's
// whole output is writes to the store.
//
// # Level, not edge
//
// The rules below are applied to the picture (live brokers, each
// partition's state as read), not to events: after every input, each
// partition whose state is not what the rules give for the current picture
// gets one write. That one mechanism is Kafka's onBrokerFailure,
// onBrokerStartup and onControllerFailover at once (a controller that starts
// while a leader is down sees a state naming a dead leader and treats it as
// that leader's failure, as Kafka's replica and partition state machines do
// at startup), and an event the loop missed (one-shot watches) cannot leave
// a partition stuck: the next read repairs it. The one change the picture
// cannot show is a bounce (a broker that re-registered between two reads is
// live in both), so SetBrokers compares broker epochs and remembers the
// bounced brokers per partition until a write has accounted for them.
//
// A partition has at most one write in flight. After a conflict (the record
// moved: a leader changed the ISR, or the read was stale) the controller
// asks for a Reread and writes nothing for that topic until the new read
// arrives; then it computes afresh. Other failures hold the partition until
// Tick. A write whose outcome is unknown (a lost connection) is recomputed
// and retried, and if it had been applied the retry conflicts and the
// re-read settles it, so no outcome needs guessing.
//
// Topic IDs tell incarnations of a name apart. The controller remembers the
// incarnations it knows are gone (deleted, removed, or replaced by a new
// one) and ignores late reads of them, so a read taken before a deletion
// cannot bring the topic back, or aim its writes at a new topic of the same
// name. Writes in flight outlive the topic they were for: until they
// settle, a new topic of the name gets no write on their records.
//
// # The rules, and where they come from
//
// Sources are apache/kafka 3.8.0 (the last release with the ZooKeeper-mode
// controller), core/src/main/scala/kafka/controller/ unless named otherwise;
// see also research/replication.md §2.
//
//   - A new partition (no state record) gets leader = its first live replica
//     in assignment order, ISR = its live replicas in assignment order,
//     leader epoch 0 (PartitionStateMachine.initializeLeaderAndIsrForPartitions).
//     With no live replica nothing is written, and the partition stays
//     without a state, as Kafka leaves it NewPartition, until one starts
//     (onBrokerStartup's triggerOnlinePartitionStateChange).
//   - A partition whose leader is -1 or not live gets a new leader: the first
//     replica in assignment order that is live and in the ISR, and the ISR
//     keeps its live members in ISR order; failing that, only with unclean
//     leader election, the first live replica, with the ISR [leader]; failing
//     that, leader -1 (PartitionStateMachine.leaderForOffline,
//     PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection). This
//     covers a leader's failure, a startup that brings an ISR member of an
//     offline partition back (with replication factor 1, the whole failover
//     story: the partition is offline while its broker is down and led by it
//     again when it returns), and a controller starting with stale leaders.
//   - Dead brokers leave the ISR of every partition, except that an ISR is
//     never emptied: one with no live member keeps one, so a clean election
//     later waits for it (ReplicaStateMachine.doRemoveReplicasFromIsr keeps an
//     ISR of size 1). The controller never adds to an ISR: a leader does
//     that when a follower catches up.
//   - A broker whose epoch (czxid) grew bounced, and is handled as a failure
//     followed by a startup (KafkaController.processBrokerChange): a bounced
//     leader with another live ISR member loses the leadership to it, and a
//     bounced sole replica leads again, in a new leader epoch.
//   - Every state the controller writes has leader epoch + 1 and the
//     controller's epoch (LeaderAndIsr.newLeaderAndIsr); a leader's own ISR
//     changes keep the epoch.
//   - Unclean election is Config.UncleanLeaderElection, overridden by the
//     topic's unclean.leader.election.enable (leaderForOffline reads the
//     topic's log config).
//   - Controlled shutdown (SetShuttingDown; Kafka's ControlledShutdown and
//     ControlledShutdownPartitionLeaderElectionStrategy): a broker shutting
//     down hands each partition it leads to the first live ISR member in
//     assignment order that is not shutting down, and leaves every ISR that
//     has such a member; a partition it alone holds keeps it (it could not
//     move without losing data). ShuttingDownDone tells the broker when it
//     may stop.
//   - Resignations (SetResignations; Kafka's log directory failure, where
//     the broker reports its replicas offline and the controller elects
//     other leaders, onReplicasBecomeOffline): a broker whose log of a
//     partition failed while it was in the ISR resigns that partition in the
//     current leader epoch (core/replica's LogFailed), and the controller
//     handles it as a bounce of that broker for that partition only: it
//     leaves the ISR, and a leader hands the leadership to the first other
//     live ISR member in assignment order, or, with none, leads again alone
//     in a new epoch, after its log's recovery. The new epoch makes the
//     resignation stale.
//   - A broker back from an unclean shutdown (a crash or a power cut: its
//     logs lack their clean-shutdown markers) resigns the same way every
//     partition whose state still names it in the ISR (core/replica's
//     Unclean), since its log may have lost what it had acknowledged. A
//     controller that saw its old registration handles it as a bounce
//     anyway; the resignations matter when none did (the controller was
//     down or cut off while the broker restarted, so a new controller
//     knows only the new registration): it must not keep a leadership or
//     an ISR membership it held before, and it serves nothing as leader
//     until the controller has moved the partition. KRaft's controller
//     does the same at registration (KIP-966, KAFKA-15586); Kafka's
//     ZooKeeper mode does not, and loses what the other replicas held
//     when they truncate to the shortened leader. When a bounced or
//     resigned broker is the only live member of an ISR that also names a
//     dead broker (read in the same picture), the ISR keeps the dead one
//     and the partition waits for it (leader -1), rather than giving the
//     bounced broker the leadership alone: its log may lack what the dead
//     one holds (KIP-966's eligible leader replicas, in spirit). Kafka
//     keeps whichever it processes last.
//   - Preferred-leader election (PreferredElection; Kafka's
//     auto.leader.rebalance.enable, run every
//     leader.imbalance.check.interval.seconds by the loop): a partition
//     whose first assigned replica is live, in the ISR and not shutting
//     down, but not leading, is handed back to it. Kafka only does this
//     when a broker's share of non-preferred leaders passes
//     leader.imbalance.per.broker.percentage (10%); here every call
//     rebalances every such partition.
//   - Topics being deleted get no elections and no ISR changes
//     (onReplicasBecomeOffline and triggerOnlinePartitionStateChange leave
//     topics queued for deletion out).
//   - A state written by a newer controller means this one is stale
//     (doElectLeaderForPartitions aborts); here Deposed turns true and
//     nothing more is handed out.
//
// # Deliberately different from Kafka
//
//   - One write per partition per change. Kafka writes an offline election,
//     then removes each dead replica from the ISR one by one, and handles a
//     bounce as two changes; each write bumps the leader epoch. Here the
//     combined result is one write, with epoch + 1: every change still gets
//     a new epoch (all fencing needs), with fewer epochs for the leader-epoch
//     caches, and no write that changes nothing (Kafka rewrites an ISR of one
//     it keeps, with a new epoch).
//   - When a whole ISR dies in one broker change, Kafka keeps whichever
//     member it happens to process last (a hash map's order); here the old
//     leader stays (it has at least everything committed), else the ISR's
//     first member.
//   - Deletion does not wait for dead brokers. Kafka's TopicDeletionManager
//     marks a topic with a replica on a dead broker ineligible until the
//     broker returns, so a broker lost for good makes the topic undeletable
//     (and its name unusable). Here DeleteTopic is issued once every live
//     broker with a replica has acked (DeletionAcked) that it removed its
//     logs, and no write of the topic is in flight. A broker that was dead
//     then finds directories of a topic that no longer exists when it
//     returns, and sets them aside rather than deleting them (nothing
//     deletes data because something is missing: CLUSTER.md).
//   - Conflicts are re-read through the loop (Reread) rather than inside the
//     election (Kafka's electLeaderForPartitions re-reads and retries at
//     once); other failures wait for Tick.
//   - Not here (yet): preferred-leader election and auto.leader.rebalance,
//     controlled shutdown, reassignment, KIP-704's leader_recovery_state.
//
// # Topic creation
//
// Assign places a new topic's replicas as Kafka's rack-unaware
// assignReplicasToBrokers does (server-common/src/main/java/org/apache/kafka/
// admin/AdminUtils.java, assignReplicasToBrokersRackUnaware and replicaIndex;
// the brokers sorted by id as AdminZkClient.getBrokerMetadatas does), and
// ValidateAssignment checks an explicit one. Both are pure functions for
// whichever broker handles CreateTopics; the controller then creates the
// states.
package controller
