package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/producers"
)

// Coordinator types of FindCoordinator.
const (
	CoordinatorGroup       = 0
	CoordinatorTransaction = 1
)

// OffsetsTopic is Kafka's internal topic of committed offsets: a group's
// coordinator is the leader of its partition javaHash(group) % partitions
// (Kafka's GroupMetadataManager.partitionFor), so every broker answers
// FindCoordinator alike and a client follows the coordinator as leaders move.
// It is created, as an internal topic, on the first group request (or a
// client's Metadata request for it). Committed offsets and group metadata
// are its records, in Kafka's formats (see core/groups): the leader of each partition loads it
// into the group coordinator (syncCoordinator), clients read it with Fetch
// (lag tools such as Burrow do) but cannot write to it, and it is compacted
// (offsetsTopicConfigs). It has min(3, live brokers) replicas by default
// (Config.OffsetsReplicationFactor), commits are appended with acks=all, and
// when a coordinator dies the new leader of its partitions loads them.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsPartitions is the partition count of OffsetsTopic (Kafka's
// offsets.topic.num.partitions).
const DefaultOffsetsPartitions = 50

// GroupCoordinator returns the coordinator that serves group on this broker:
// ErrNotCoordinator when another broker leads the group's partition of
// OffsetsTopic, ErrCoordinatorNotAvailable when none does (yet). Like
// FindCoordinator, it creates OffsetsTopic when there is none, so a group
// request needs no FindCoordinator first.
func (n *Node) GroupCoordinator(group string) (*groups.Coordinator, error) {
	b, err := n.coordinatorOf(context.Background(), group, true)
	if err != nil {
		return nil, err
	}
	if b.ID != n.cfg.NodeID {
		return nil, fmt.Errorf("%w: group %q is coordinated by broker %d", ErrNotCoordinator, group, b.ID)
	}
	return n.groups, nil
}

// FindCoordinator returns the broker that coordinates key (a group id, or a
// transactional id): ErrInvalidCoordinatorType for another key type,
// ErrCoordinatorNotAvailable while the key's partition has no leader.
// A transactional id's coordinator is the leader of its partition of
// TransactionStateTopic (txn.go).
func (n *Node) FindCoordinator(ctx context.Context, keyType int8, key string) (Broker, error) {
	switch keyType {
	case CoordinatorGroup:
	case CoordinatorTransaction:
		return n.txnCoordinatorOf(ctx, key, true)
	default:
		return Broker{ID: -1}, ErrInvalidCoordinatorType
	}
	return n.coordinatorOf(ctx, key, true)
}

// coordinatorOf returns the leader of key's partition of OffsetsTopic,
// creating the topic first when create is set and it does not exist.
func (n *Node) coordinatorOf(ctx context.Context, key string, create bool) (Broker, error) {
	im, _ := n.image.load()
	t := im.Topics[OffsetsTopic]
	if t == nil && create {
		if _, err := n.ensureOffsetsTopic(ctx); err != nil {
			return Broker{ID: -1}, fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
		}
		im, _ = n.image.load()
		t = im.Topics[OffsetsTopic]
	}
	if t == nil || len(t.Assignment) == 0 {
		return Broker{ID: -1}, fmt.Errorf("%w: %s does not exist yet", ErrCoordinatorNotAvailable, OffsetsTopic)
	}
	p := int(javaAbs(javaHash(key)) % int32(len(t.Assignment))) // offsetsPartitionFor, for this image
	v := im.View(t, p)
	b, ok := im.Brokers[v.Leader]
	if !ok {
		return Broker{ID: -1}, fmt.Errorf("%w: %s-%d has no leader", ErrCoordinatorNotAvailable, OffsetsTopic, p)
	}
	return brokerOf(b), nil
}

// ensureOffsetsTopic creates OffsetsTopic when it does not exist (a
// concurrent creation by another broker counts as success) and waits for its
// leaders.
func (n *Node) ensureOffsetsTopic(ctx context.Context) (TopicInfo, error) {
	im, _ := n.image.load()
	rf := int16(min(n.cfg.OffsetsReplicationFactor, int16(len(im.Brokers))))
	ti, err := n.CreateTopic(ctx, CreateTopic{Name: OffsetsTopic, Partitions: n.cfg.OffsetsPartitions,
		ReplicationFactor: max(rf, 1), Configs: n.offsetsTopicConfigs(), internal: true})
	if errors.Is(err, ErrTopicExists) {
		return settled(n.waitReady(ctx, OffsetsTopic))
	}
	return settled(ti, err)
}

// javaAbs is Kafka's Utils.abs: |n|, and 0 for MinInt32.
func javaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	}
	return n
}

// javaHash is Java's String.hashCode over the UTF-16 code units of s, which
// Kafka uses to map a group to its partition.
func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + r1
			h = 31*h + r2
			continue
		}
		h = 31*h + r
	}
	return h
}

// ListGroups lists the groups this broker coordinates.
func (n *Node) ListGroups() []groups.Listing { return n.groups.List() }

// CommitOffsets commits offsets for a group, as OffsetCommit does: offsets
// for partitions that do not exist are refused (their entry in the result is
// ErrUnknownTopic or ErrUnknownPartition, wrapped) and the others committed.
// perCommit has one entry per commit; err is an error finding the group's
// coordinator, which then applies to every valid commit.
func (n *Node) CommitOffsets(group, memberID string, instanceID *string, generation int32,
	commits []groups.OffsetCommit) (perCommit []error, err error) {
	perCommit = make([]error, len(commits))
	valid := make([]groups.OffsetCommit, 0, len(commits))
	idx := make([]int, 0, len(commits))
	for i, c := range commits {
		if err := n.HasPartition(c.Topic, c.Partition); err != nil {
			perCommit[i] = err
			continue
		}
		valid = append(valid, c)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return perCommit, nil
	}
	coord, err := n.GroupCoordinator(group)
	if err != nil {
		for _, i := range idx {
			perCommit[i] = err
		}
		return perCommit, err
	}
	// An error of the whole commit is in every entry of res too.
	res, _ := coord.Commit(group, memberID, instanceID, generation, valid)
	for k, i := range idx {
		if k < len(res) {
			perCommit[i] = res[k]
		}
	}
	return perCommit, nil
}

// TxnOffsetCommit commits offsets within a producer's transaction, as
// TxnOffsetCommit does: offsets for partitions that do not exist are
// refused (ErrUnknownTopic or ErrUnknownPartition, wrapped, as
// CommitOffsets) and the others written to the group's partition of
// OffsetsTopic, where they wait for the transaction's marker
// (groups.Coordinator.TxnCommit). perPartition has an entry for every
// partition of r.Offsets; err is an error finding the group's coordinator,
// or one of the whole request, which is then in every entry of the valid
// ones.
func (n *Node) TxnOffsetCommit(ctx context.Context, r groups.TxnCommitRequest) (perPartition map[groups.TopicPartition]error, err error) {
	perPartition = make(map[groups.TopicPartition]error, len(r.Offsets))
	valid := make([]groups.OffsetCommit, 0, len(r.Offsets))
	for _, c := range r.Offsets {
		if err := n.HasPartition(c.Topic, c.Partition); err != nil {
			perPartition[c.TopicPartition] = err
			continue
		}
		valid = append(valid, c)
	}
	if len(valid) == 0 {
		return perPartition, nil
	}
	all := func(err error) (map[groups.TopicPartition]error, error) {
		for _, c := range valid {
			perPartition[c.TopicPartition] = err
		}
		return perPartition, err
	}
	coord, err := n.GroupCoordinator(r.Group)
	if err != nil {
		return all(err)
	}
	g, err := n.verifyTxnOffsets(ctx, r)
	if err != nil {
		return all(err)
	}
	r.Offsets, r.Guard = valid, g
	res, err := coord.TxnCommit(ctx, r)
	for tp, e := range res {
		perPartition[tp] = e
	}
	return perPartition, err
}

// verifyTxnOffsets is KIP-890 part 1 (Kafka 3.6) for a transactional
// offset commit, as verifyTxnProduce is for a produce: the transaction
// coordinator confirms the group's partition of OffsetsTopic is in the
// producer's open transaction (AddOffsetsToTxn) before the offsets are
// written, and the guard returned, started on that partition before the
// question, goes with the append (groups.TxnCommitRequest.Guard): a
// transaction aborted after the answer (its marker in the partition first)
// is refused with INVALID_TXN_STATE rather than left open there, which
// would hold the partition's last stable offset and its cleaner. A
// transaction already ongoing in the partition at the producer's epoch
// needs no question. Without a verifier: producers.Unverified.
func (n *Node) verifyTxnOffsets(ctx context.Context, r groups.TxnCommitRequest) (producers.Guard, error) {
	verify := n.txnVerifier
	if verify == nil || r.ProducerID < 0 || r.ProducerEpoch < 0 {
		return producers.Unverified, nil // the coordinator refuses a bad producer
	}
	p := n.offsetsPartitionFor(r.Group)
	o := &n.offsets
	o.mu.Lock()
	part := o.parts[p]
	o.mu.Unlock()
	if part == nil {
		// Not (or no longer) handed to the group coordinator: the guard
		// must be on the partition it appends to (Kafka: NOT_COORDINATOR).
		return producers.Unverified, fmt.Errorf("%w: %s-%d is not loaded here", ErrNotCoordinator, OffsetsTopic, p)
	}
	g, err := part.StartTxnVerification(r.ProducerID, r.ProducerEpoch)
	if err != nil {
		// The partition's log failed: the coordinator's store with it.
		return producers.Unverified, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	}
	if g == producers.Ongoing {
		return g, nil
	}
	return g, verify(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, OffsetsTopic, p)
}
