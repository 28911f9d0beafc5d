// Package consumer is the state machine of one KIP-848 ("next generation")
// consumer group: members heartbeat (ConsumerGroupHeartbeat) with their
// subscription and the partitions they own, and the coordinator assigns the
// partitions (package assignor) and hands them out so that no partition is
// ever owned by two members at once. Like the classic group (package
// groups), it does no I/O: requests are method calls carrying the time and
// the topic metadata, time passes as Tick(now), and the caller (the
// coordinator) keeps a timer for NextDeadline.
//
// # Epochs
//
// The group epoch counts changes of what the assignment depends on: a member
// joining, leaving or being fenced, a member changing its subscription or
// assignor, a subscribed topic appearing, disappearing or gaining
// partitions. When the group epoch passes the target assignment epoch, the
// next heartbeat computes a new target assignment (one assignor run, sticky
// to the previous target) and the target epoch catches up. Each member has a
// member epoch: the target epoch it has reconciled to.
//
// # Reconciliation (Kafka's CurrentAssignmentBuilder)
//
// A member moves towards its target one heartbeat at a time:
//
//	           target changed,                      the member's heartbeat no
//	           partitions to give up                longer lists them (revoked)
//	Stable ─────────────────────────▶ Unrevoked ──────────────────────────▶ next step
//	  ▲  ▲                            (keeps its epoch; the answer lists     (epoch + 1,
//	  │  │                             only the partitions it keeps)          then as below)
//	  │  │ all target partitions free
//	  │  └────────────────────────── Unreleased (epoch = target epoch; waits
//	  │                              for others to release partitions)
//	  └── nothing to give up: epoch = target epoch, gains the free partitions
//
// A partition the target gives a member is handed out only once no other
// member holds it, either as assigned or as pending revocation: that is the
// invariant the randomized tests check after every step. A member that does
// not revoke within its rebalance timeout is fenced (removed).
//
// # Errors and fencing
//
// Kafka's rules: a heartbeat with epoch 0 joins (with the member id the
// client made up, v1); -1 leaves; -2 leaves a static member (group.instance.id)
// for now, keeping its partitions for its session timeout so that the same
// instance rejoins to the same assignment. An epoch above the member's, or
// below it (except the previous epoch with a subset of its partitions: the
// answer was lost), is ErrFencedMemberEpoch, and the client rejoins with
// epoch 0. A member whose session timeout passes without a heartbeat is
// removed; its next heartbeat gets ErrUnknownMemberID and it rejoins under a
// new id. One departure from Kafka: epoch 0 from an id that is already a
// member (a fenced client rejoining under the same id, as franz-go and the
// Java client do) replaces that member at once, its partitions released,
// rather than being fenced until its session times out: a join must list no
// owned partitions, so nothing is owned twice. Another: -2 without the
// instance id (Kafka refuses it; franz-go sends it so) is accepted from a
// static member, found by its member id.
//
// Offsets: OffsetCommit from a member carries its member epoch
// (CheckCommit). As in Kafka 4.3 (KIP-1251), a commit with an older epoch is
// accepted for partitions the member has held since at or before that epoch,
// so a commit racing a heartbeat that bumps the epoch does not fail.
//
// Subscriptions are topic names or a regular expression (Go's RE2 syntax,
// matched against whole topic names, internal ones included, as Kafka does);
// the regex is resolved again at every heartbeat of the group, so new
// matching topics join the assignment at the next heartbeat.
package consumer
