package node

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/topics"
)

// The node's own reasons to refuse a request; the transport maps each to its
// Kafka error code.
var (
	ErrUnknownTopicID           = errors.New("node: unknown topic ID")
	ErrInvalidReplicationFactor = errors.New("node: replication factor must be 1: every partition has one replica")
	ErrInvalidReplicaAssignment = errors.New("node: replicas may only be assigned to this node, one per partition")
	ErrNotEnoughReplicas        = errors.New("node: acks=all needs more in-sync replicas (min.insync.replicas) than the partition has")
	ErrTransactionsNotSupported = errors.New("node: transactions are not supported")
	ErrInvalidAcks              = errors.New("node: acks must be 0, 1 or -1")
	ErrInvalidCoordinatorType   = errors.New("node: unknown coordinator type")
)

func unknownTopic(name string) error {
	return fmt.Errorf("%w: %q", topics.ErrUnknownTopic, name)
}
