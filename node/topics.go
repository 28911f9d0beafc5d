package node

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/weir-broker/weir/core/topics"
)

// TopicInfo is what the node tells about a topic: a snapshot, owned by the
// caller.
type TopicInfo struct {
	Name string
	ID   [16]byte
	// Configs are the effective configs: those the topic set, plus the broker
	// defaults for the keys it did not.
	Configs    map[string]string
	Partitions []PartitionInfo
}

// PartitionInfo is one partition as Metadata reports it.
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

// Topics returns every topic, sorted by name.
func (n *Node) Topics() []TopicInfo {
	ts := n.registry.Topics()
	out := make([]TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = n.topicInfo(t)
	}
	return out
}

// Topic returns the named topic: ErrUnknownTopic when there is none.
func (n *Node) Topic(name string) (TopicInfo, error) {
	t, ok := n.registry.Topic(name)
	if !ok {
		return TopicInfo{}, unknownTopic(name)
	}
	return n.topicInfo(t), nil
}

// TopicByID returns the topic with the given id: ErrUnknownTopicID when there
// is none.
func (n *Node) TopicByID(id [16]byte) (TopicInfo, error) {
	for _, t := range n.registry.Topics() {
		if t.ID == id {
			return n.topicInfo(t), nil
		}
	}
	return TopicInfo{}, ErrUnknownTopicID
}

// MetadataTopic returns the named topic for a Metadata request, creating it
// first when the broker auto-creates topics and the client allows it.
func (n *Node) MetadataTopic(name string, clientAllowsCreate bool) (TopicInfo, error) {
	t, ok := n.registry.Topic(name)
	if ok {
		return n.topicInfo(t), nil
	}
	if !clientAllowsCreate || !n.cfg.AutoCreateTopics {
		return TopicInfo{}, unknownTopic(name)
	}
	t, err := n.autoCreate(name)
	if err != nil {
		return TopicInfo{}, err
	}
	return n.topicInfo(t), nil
}

func (n *Node) topicInfo(t *topics.Topic) TopicInfo {
	ti := TopicInfo{Name: t.Name, ID: t.ID, Configs: maps.Clone(t.Configs), Partitions: make([]PartitionInfo, len(t.Partitions))}
	self := []int32{n.cfg.NodeID}
	for i, p := range t.Partitions {
		ti.Partitions[i] = PartitionInfo{Index: p.Index, Leader: n.cfg.NodeID, LeaderEpoch: 0,
			Replicas: self, ISR: self, Offline: []int32{}}
	}
	return ti
}

// autoCreate creates topic with the default partition count and configs; a
// concurrent creation of the same topic counts as success.
func (n *Node) autoCreate(topic string) (*topics.Topic, error) {
	t, err := n.registry.Create(topic, -1, nil)
	if errors.Is(err, topics.ErrTopicExists) {
		if t, ok := n.registry.Topic(topic); ok {
			return t, nil
		}
	}
	if err == nil {
		n.logger.Info("auto-created topic", "topic", topic, "partitions", len(t.Partitions))
	}
	return t, err
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
}

// ReplicaAssignment names the replicas of one partition.
type ReplicaAssignment struct {
	Partition int32
	Replicas  []int32
}

// CreateTopic creates a topic, or with ValidateOnly checks that it could be
// created and returns what it would be (without an id). Errors:
// ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment,
// logs.ErrInvalidTopic, ErrInvalidPartitions, ErrInvalidConfig,
// ErrTopicExists, wrapped.
func (n *Node) CreateTopic(_ context.Context, req CreateTopic) (TopicInfo, error) {
	partitions := req.Partitions
	if len(req.Assignment) > 0 {
		if req.Partitions != -1 || req.ReplicationFactor != -1 {
			return TopicInfo{}, ErrInvalidReplicaAssignment
		}
		seen := make([]bool, len(req.Assignment))
		for _, ra := range req.Assignment {
			if ra.Partition < 0 || int(ra.Partition) >= len(seen) || seen[ra.Partition] {
				return TopicInfo{}, fmt.Errorf("%w: partitions must be numbered 0..%d, each once", ErrInvalidReplicaAssignment, len(seen)-1)
			}
			seen[ra.Partition] = true
			if len(ra.Replicas) != 1 || ra.Replicas[0] != n.cfg.NodeID {
				return TopicInfo{}, ErrInvalidReplicaAssignment
			}
		}
		partitions = int32(len(req.Assignment))
	} else if req.ReplicationFactor != -1 && req.ReplicationFactor != 1 {
		return TopicInfo{}, ErrInvalidReplicationFactor
	}
	if partitions == 0 || partitions < -1 {
		return TopicInfo{}, topics.ErrInvalidPartitions
	}
	if req.ValidateOnly {
		if err := n.registry.ValidateCreate(req.Name, partitions, req.Configs); err != nil {
			return TopicInfo{}, err
		}
		if partitions == -1 {
			partitions = n.cfg.DefaultPartitions
		}
		ti := TopicInfo{Name: req.Name, Partitions: make([]PartitionInfo, partitions)}
		self := []int32{n.cfg.NodeID}
		for i := range ti.Partitions {
			ti.Partitions[i] = PartitionInfo{Index: int32(i), Leader: n.cfg.NodeID, Replicas: self, ISR: self, Offline: []int32{}}
		}
		return ti, nil
	}
	t, err := n.registry.Create(req.Name, partitions, req.Configs)
	if err != nil {
		return TopicInfo{}, err
	}
	n.logger.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions))
	return n.topicInfo(t), nil
}

// DeleteTopic deletes a topic: its partitions' data and its committed
// offsets (so a topic created again under the name starts without them, as
// in Kafka). It returns the deleted topic's id.
func (n *Node) DeleteTopic(_ context.Context, name string) ([16]byte, error) {
	t, ok := n.registry.Topic(name)
	if !ok {
		return [16]byte{}, unknownTopic(name)
	}
	if err := n.registry.Delete(name); err != nil {
		return t.ID, err
	}
	if err := n.groups.RemoveTopic(name); err != nil {
		n.logger.Warn("dropping committed offsets of a deleted topic", "topic", name, "err", err)
	}
	n.logger.Info("deleted topic", "topic", name)
	return t.ID, nil
}
