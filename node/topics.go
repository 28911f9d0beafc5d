package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/weir-broker/weir/core/controller"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/topicconfig"
)

// MaxPartitions bounds one topic's partition count. Every partition holds
// open files and memory, so a CreateTopics request must not be able to ask for
// millions of them.
const MaxPartitions = 10000

// TopicInfo is what the node tells about a topic: a snapshot, owned by the
// caller.
type TopicInfo struct {
	Name string
	ID   [16]byte
	// Internal: a topic the broker keeps for itself (__consumer_offsets).
	Internal bool
	// Configs are the effective configs: those the topic set, plus the broker
	// defaults for the keys it did not.
	Configs    map[string]string
	Partitions []PartitionInfo
}

// PartitionInfo is one partition as Metadata reports it: dead brokers are
// filtered out of the ISR (and listed as offline replicas), and a partition
// whose leader is not live has none.
type PartitionInfo struct {
	Index       int32
	Leader      int32 // -1: no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
}

// ReplicationFactor is the number of replicas of the topic's partitions.
func (t TopicInfo) ReplicationFactor() int16 {
	if len(t.Partitions) == 0 {
		return 0
	}
	return int16(len(t.Partitions[0].Replicas))
}

// Brokers returns the live brokers, by id.
func (n *Node) Brokers() []Broker {
	im, _ := n.image.load()
	out := make([]Broker, 0, len(im.Brokers))
	for _, b := range im.SortedBrokers() {
		out = append(out, brokerOf(b))
	}
	return out
}

// ControllerID is the controller's broker id, -1 when there is none.
func (n *Node) ControllerID() int32 {
	im, _ := n.image.load()
	return im.Controller
}

// Topics returns every topic, sorted by name.
//
// The slice is computed once per cluster image and shared by every caller
// until the image changes (a Metadata request for all of 100,000
// partitions then costs their encoding only): callers must not modify it.
func (n *Node) Topics() []TopicInfo {
	im, _ := n.image.load()
	if c := n.topicsCache.Load(); c != nil && c.im == im {
		return c.topics
	}
	ts := im.SortedTopics()
	out := make([]TopicInfo, 0, len(ts))
	for _, t := range ts {
		if t.Deleting {
			continue
		}
		out = append(out, n.topicInfo(im, t))
	}
	n.topicsCache.Store(&topicsCache{im: im, topics: out})
	return out
}

// topicsCache is Topics' answer for one image.
type topicsCache struct {
	im     *meta.Image
	topics []TopicInfo
}

// Topic returns the named topic: ErrUnknownTopic when there is none.
func (n *Node) Topic(name string) (TopicInfo, error) {
	im, _ := n.image.load()
	t := im.Topics[name]
	if t == nil || t.Deleting {
		return TopicInfo{}, unknownTopic(name)
	}
	return n.topicInfo(im, t), nil
}

// TopicByID returns the topic with the given id: ErrUnknownTopicID when there
// is none.
func (n *Node) TopicByID(id [16]byte) (TopicInfo, error) {
	im, _ := n.image.load()
	t := im.TopicByID(id)
	if t == nil || t.Deleting {
		return TopicInfo{}, ErrUnknownTopicID
	}
	return n.topicInfo(im, t), nil
}

// MetadataTopic returns the named topic for a Metadata request, creating it
// first when the broker auto-creates topics and the client allows it (the
// offsets topic, __consumer_offsets, and the transaction log,
// __transaction_state, are created as the internal topics they are; other
// reserved names are never created: see IsReservedTopic).
func (n *Node) MetadataTopic(ctx context.Context, name string, clientAllowsCreate bool) (TopicInfo, error) {
	ti, err := n.Topic(name)
	if !errors.Is(err, ErrUnknownTopic) {
		return ti, err
	}
	switch {
	case name == OffsetsTopic && clientAllowsCreate:
		return n.ensureOffsetsTopic(ctx)
	case name == TransactionStateTopic && clientAllowsCreate: // helper txncoord
		return n.ensureTxnTopic(ctx)
	case IsReservedTopic(name) || !clientAllowsCreate || !n.cfg.AutoCreateTopics:
		return TopicInfo{}, err
	}
	return n.autoCreate(ctx, name)
}

func (n *Node) topicInfo(im *meta.Image, t *meta.Topic) TopicInfo {
	ti := TopicInfo{Name: t.Name, ID: t.ID, Internal: IsInternalTopic(t.Name),
		Configs: topicconfig.Resolve(t.Configs, n.topicDefaults(im)), Partitions: make([]PartitionInfo, len(t.Assignment))}
	for p := range t.Assignment {
		v := im.View(t, p)
		ti.Partitions[p] = PartitionInfo{Index: int32(p), Leader: v.Leader, LeaderEpoch: v.LeaderEpoch,
			Replicas: v.Replicas, ISR: v.ISR, Offline: v.Offline}
	}
	return ti
}

// autoCreate creates topic with the default partition count and configs; a
// concurrent creation of the same topic counts as success.
func (n *Node) autoCreate(ctx context.Context, topic string) (TopicInfo, error) {
	ti, err := n.CreateTopic(ctx, CreateTopic{Name: topic, Partitions: -1, ReplicationFactor: -1})
	if errors.Is(err, ErrTopicExists) {
		return settled(n.waitReady(ctx, topic))
	}
	if err == nil {
		n.logger.Info("auto-created topic", "topic", topic, "partitions", len(ti.Partitions))
	}
	return settled(ti, err)
}

// CreateTopic asks for a topic, as CreateTopics does.
type CreateTopic struct {
	Name string
	// Partitions is the partition count; -1 for the broker's default.
	Partitions int32
	// ReplicationFactor is the number of replicas; -1 for the default (1).
	ReplicationFactor int16
	// Assignment, when not empty, names each partition's replicas, every
	// partition 0..len-1 once; Partitions and ReplicationFactor must then be
	// -1.
	Assignment []ReplicaAssignment
	// Configs are topic configs (Kafka names).
	Configs map[string]string
	// ValidateOnly checks everything and creates nothing.
	ValidateOnly bool
	// NoWait returns once the topic is written, without waiting for its
	// leaders (Kafka's CreateTopics with timeout_ms <= 0).
	NoWait bool

	// internal: the broker creates one of its own topics, whose name is
	// reserved (IsReservedTopic) for clients.
	internal bool
}

// ReplicaAssignment names the replicas of one partition.
type ReplicaAssignment struct {
	Partition int32
	Replicas  []int32
}

// createWait bounds how long CreateTopic waits for the new topic's
// partitions to have leaders when ctx has no earlier deadline (Kafka's
// CreateTopics waits up to the request's timeout for the metadata to
// propagate).
const createWait = 30 * time.Second

// CreateTopic creates a topic: any broker may, as in Kafka's ZooKeeper mode.
// It assigns the partitions to live brokers (Kafka's round-robin from a
// random start), writes the assignment and configs to the coordination store
// and waits (within ctx and createWait) until every partition has a leader;
// the controller elects them. With ValidateOnly it checks that the topic could
// be created and returns what it would be (without an id). Errors:
// ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment,
// logs.ErrInvalidTopic, ErrInvalidPartitions, topicconfig.ErrInvalidConfig,
// ErrTopicExists (also while a deletion of the name is pending, in the
// image or in the store: Kafka's "marked for deletion"), wrapped
// (ErrInvalidTopic too for a reserved name:
// IsReservedTopic); and, when the topic was created but its leaders
// were not all elected before ctx's deadline (or createWait),
// context.DeadlineExceeded wrapped with the topic as it is (Kafka answers
// REQUEST_TIMED_OUT then; the topic stays).
func (n *Node) CreateTopic(ctx context.Context, req CreateTopic) (TopicInfo, error) {
	if err := logs.ValidateName(req.Name); err != nil {
		return TopicInfo{}, err
	}
	if IsReservedTopic(req.Name) && !req.internal {
		return TopicInfo{}, reservedTopic(req.Name)
	}
	configs, err := topicconfig.Normalize(req.Configs, n.plugins)
	if err != nil {
		return TopicInfo{}, fmt.Errorf("topic %q: %w", req.Name, err)
	}
	im, _ := n.image.load()
	if t := im.Topics[req.Name]; t != nil && t.Deleting {
		return TopicInfo{}, markedForDeletion(req.Name)
	} else if t != nil {
		return TopicInfo{}, fmt.Errorf("%w: %q", ErrTopicExists, req.Name)
	}
	assignment, err := n.assign(im, req)
	if err != nil {
		return TopicInfo{}, err
	}
	t := &meta.Topic{Name: req.Name, Assignment: assignment, Configs: configs, States: make([]*meta.PartitionState, len(assignment))}
	if req.ValidateOnly {
		return n.topicInfo(im, t), nil
	}
	if t.ID, err = newTopicID(); err != nil {
		return TopicInfo{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	err = layout.CreateTopic(sctx, n.store, t)
	cancel()
	if errors.Is(err, layout.ErrMarkedForDeletion) {
		return TopicInfo{}, markedForDeletion(req.Name)
	}
	if errors.Is(err, layout.ErrTopicExists) {
		return TopicInfo{}, fmt.Errorf("%w: %q", ErrTopicExists, req.Name)
	}
	if err != nil {
		return TopicInfo{}, fmt.Errorf("node: create topic %q: %w", req.Name, err)
	}
	n.logger.Info("created topic", "topic", t.Name, "partitions", len(assignment), "replication_factor", len(assignment[0]))
	if req.NoWait {
		im, _ := n.image.load()
		return n.topicInfo(im, t), nil
	}
	ti, err := n.waitReady(ctx, req.Name)
	if errors.Is(err, ErrPartitionStorage) {
		// Whole or nothing: a topic with a partition that cannot exist
		// here is deleted again, its other partitions with it.
		n.logger.Warn("created topic deleted again: a partition could not be opened", "topic", t.Name, "err", err)
		if _, derr := n.DeleteTopic(ctx, t.Name); derr != nil {
			n.logger.Error("deleting a topic whose partitions could not be opened", "topic", t.Name, "err", derr)
			err = errors.Join(err, derr)
		}
		return TopicInfo{}, err
	}
	return ti, err
}

// markedForDeletion is CreateTopic's refusal of a name whose deletion is
// still pending, with Kafka's message (TOPIC_ALREADY_EXISTS).
func markedForDeletion(name string) error {
	return fmt.Errorf("%w: Topic '%s' is marked for deletion.", ErrTopicExists, name)
}

// assign returns the replicas of each partition of a topic to create.
func (n *Node) assign(im *meta.Image, req CreateTopic) ([][]int32, error) {
	live := make([]int32, 0, len(im.Brokers))
	for _, b := range im.SortedBrokers() {
		live = append(live, b.ID)
	}
	if len(req.Assignment) > 0 {
		if req.Partitions != -1 || req.ReplicationFactor != -1 {
			return nil, fmt.Errorf("%w: with an assignment, the partition count and replication factor must be -1", ErrInvalidReplicaAssignment)
		}
		parts := make([]controller.PartitionReplicas, len(req.Assignment))
		for i, ra := range req.Assignment {
			parts[i] = controller.PartitionReplicas{Partition: ra.Partition, Replicas: ra.Replicas}
		}
		a, err := controller.ValidateAssignment(parts, live)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidReplicaAssignment, err)
		}
		if len(a) > MaxPartitions {
			return nil, fmt.Errorf("%w: %d for topic %q, want 1..%d", ErrInvalidPartitions, len(a), req.Name, MaxPartitions)
		}
		return a, nil
	}
	partitions, rf := req.Partitions, req.ReplicationFactor
	if partitions == -1 {
		partitions = n.cfg.DefaultPartitions
	}
	if rf == -1 {
		rf = 1
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d for topic %q, want 1..%d", ErrInvalidPartitions, partitions, req.Name, MaxPartitions)
	}
	a, err := controller.Assign(live, partitions, rf, mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())))
	if errors.Is(err, controller.ErrInvalidReplicationFactor) {
		return nil, fmt.Errorf("%w: %d with %d live brokers", ErrInvalidReplicationFactor, rf, len(live))
	}
	return a, err
}

// waitReady waits until the topic is in the image with a leader for every
// partition (and this broker's partitions open), then returns it. When ctx
// (or createWait) ends first it returns the topic as it is, and an error
// wrapping context.DeadlineExceeded.
func (n *Node) waitReady(ctx context.Context, name string) (TopicInfo, error) {
	wctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	var failed error
	im, err := n.image.waitFor(wctx, func(im *meta.Image) bool {
		t := im.Topics[name]
		if t == nil || t.Deleting {
			return false
		}
		if failed = n.openFailure(t.ID); failed != nil {
			return true
		}
		return n.leadersReady(im, t)
	})
	t := im.Topics[name]
	switch {
	case failed != nil:
		return TopicInfo{}, fmt.Errorf("%w: topic %q: %w", ErrPartitionStorage, name, failed)
	case err == nil:
		return n.topicInfo(im, t), nil
	case t != nil:
		return n.topicInfo(im, t), fmt.Errorf("node: topic %q created, but not every partition has a leader yet: %w",
			name, context.DeadlineExceeded)
	}
	return TopicInfo{}, fmt.Errorf("node: topic %q created but not seen yet: %w", name, context.DeadlineExceeded)
}

// settled turns waitReady's "created, leaders not elected yet" into success:
// auto-creation answers with the topic as it is (clients see
// LEADER_NOT_AVAILABLE and retry, as with Kafka).
func settled(ti TopicInfo, err error) (TopicInfo, error) {
	if err != nil && ti.Name != "" && errors.Is(err, context.DeadlineExceeded) {
		return ti, nil
	}
	return ti, err
}

// deleteWait bounds how long DeleteTopic waits for the deletion to finish.
const deleteWait = 30 * time.Second

// DeleteTopic deletes a topic: it records the deletion request in the
// coordination store (the explicit instruction: each replica broker removes
// its logs and committed offsets of the topic, then the controller removes the
// topic), and waits within ctx and deleteWait for the topic to be gone. It
// returns the deleted topic's id.
func (n *Node) DeleteTopic(ctx context.Context, name string) ([16]byte, error) {
	im, _ := n.image.load()
	t := im.Topics[name]
	if t == nil {
		return [16]byte{}, unknownTopic(name)
	}
	if IsInternalTopic(name) {
		return t.ID, fmt.Errorf("%w: %s is internal: the broker keeps its own state in it", ErrInvalidTopic, name)
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	err := layout.RequestDeletion(sctx, n.store, name)
	cancel()
	if err != nil {
		return t.ID, fmt.Errorf("node: delete topic %q: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, deleteWait)
	defer cancel()
	if _, err := n.image.waitFor(wctx, func(im *meta.Image) bool {
		nt := im.Topics[name]
		return nt == nil || nt.ID != t.ID
	}); err != nil {
		n.logger.Warn("topic deletion requested, not finished yet", "topic", name, "err", err)
	} else {
		n.logger.Info("deleted topic", "topic", name)
	}
	return t.ID, nil
}

func newTopicID() ([16]byte, error) {
	var id [16]byte
	for id == ([16]byte{}) { // the zero UUID means "no topic id" in Kafka
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("node: topic id: %w", err)
		}
	}
	return id, nil
}

// leadersReady says whether every partition of t has a leader in im, and
// those this broker leads are open here: what topic creation and
// CreatePartitions wait for before they answer.
func (n *Node) leadersReady(im *meta.Image, t *meta.Topic) bool {
	for p := range t.Assignment {
		v := im.View(t, p)
		if v.Leader == meta.NoLeader {
			return false
		}
		if v.Leader == n.cfg.NodeID {
			if _, ok := n.localPartition(t.Name, t.ID, int32(p)); !ok {
				return false
			}
		}
	}
	return true
}
