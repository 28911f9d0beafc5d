package controller

import "errors"

var (
	// ErrInvalidPartitions: a partition count below 1 (Kafka's
	// INVALID_PARTITIONS, 37).
	ErrInvalidPartitions = errors.New("controller: invalid number of partitions")
	// ErrInvalidReplicationFactor: a replication factor below 1 or above the
	// number of brokers (Kafka's INVALID_REPLICATION_FACTOR, 38).
	ErrInvalidReplicationFactor = errors.New("controller: invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit assignment that names a
	// partition twice or leaves one out, repeats or names an unknown broker,
	// or mixes replication factors (Kafka's INVALID_REPLICA_ASSIGNMENT, 39).
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
	// ErrInvalidConfig: a Config the controller cannot run with.
	ErrInvalidConfig = errors.New("controller: invalid config")
	// ErrInvalidInput: SetBrokers or SetTopic was given something no store
	// read can produce (a broker filed under another id, a topic without a
	// name or partitions, a state with an empty ISR or no version). The
	// input is ignored.
	ErrInvalidInput = errors.New("controller: invalid input")
	// ErrUnknownWrite: Applied or Failed named a write that is not in flight
	// (never handed out, or already settled). The outcome is ignored.
	ErrUnknownWrite = errors.New("controller: unknown write")
)
