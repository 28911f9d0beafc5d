package node

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/replica"
)

// The node's own reasons to refuse a request; the transport maps each to its
// Kafka error code. They come back wrapped, with the topic or value at fault.
var (
	ErrUnknownTopic             = errors.New("node: unknown topic")
	ErrUnknownPartition         = errors.New("node: unknown partition")
	ErrUnknownTopicID           = errors.New("node: unknown topic ID")
	ErrTopicExists              = errors.New("node: topic already exists")
	ErrInvalidPartitions        = errors.New("node: invalid number of partitions")
	ErrInvalidTopic             = logs.ErrInvalidTopic
	ErrInvalidReplicationFactor = errors.New("node: replication factor must be between 1 and the number of live brokers")
	ErrInvalidReplicaAssignment = errors.New("node: invalid replica assignment")
	ErrNotEnoughReplicas        = replica.ErrNotEnoughReplicas
	// ErrNotEnoughReplicasAfterAppend: an acks=all produce was appended,
	// but the ISR shrank below min.insync.replicas before it was replicated.
	ErrNotEnoughReplicasAfterAppend = replica.ErrNotEnoughReplicasAfterAppend
	// ErrFencedLeaderEpoch and ErrUnknownLeaderEpoch: a request's
	// CurrentLeaderEpoch is older, or newer, than the partition's (KIP-320).
	// ErrReplicaOffline: the partition's log failed on this broker, which
	// resigned from its ISR; it serves the partition again once the
	// controller moved it and the log recovered (KAFKA_STORAGE_ERROR).
	ErrReplicaOffline     = replica.ErrLogFailed
	ErrFencedLeaderEpoch  = errors.New("node: fenced leader epoch")
	ErrUnknownLeaderEpoch = errors.New("node: unknown leader epoch")
	// ErrPartitionStorage: a partition of a topic being created could not
	// be opened on this broker (out of descriptors, space, ...), so the
	// topic was deleted again (KAFKA_STORAGE_ERROR; the cause is wrapped).
	ErrPartitionStorage        = errors.New("node: a partition's storage could not be created")
	ErrInvalidAcks             = errors.New("node: acks must be 0, 1 or -1")
	ErrInvalidCoordinatorType  = errors.New("node: unknown coordinator type")
	ErrNotLeader               = errors.New("node: this broker does not lead the partition")
	ErrLeaderNotAvailable      = errors.New("node: the partition has no leader")
	ErrNotCoordinator          = errors.New("node: this broker does not coordinate the group")
	ErrCoordinatorNotAvailable = errors.New("node: the group's coordinator is not available")
	ErrWriteToInternalTopic    = errors.New("node: clients cannot write to an internal topic")
	ErrCorruptMetadata         = errors.New("node: corrupt metadata")
	ErrClosed                  = errors.New("node: closed")
)

func unknownTopic(name string) error {
	return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
}
