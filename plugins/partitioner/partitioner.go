package partitioner

import (
	"context"
	"errors"
)

// Request asks for partitions for one batch of records bound for one topic.
type Request struct {
	// Topic is the topic the records go to.
	Topic string
	// Partitions is the topic's partition count, at least 1.
	Partitions int32
	// Keys holds one key per record, in order; a nil key is Kafka's null key
	// (distinct from a non-nil empty key, though Kafka's partitioners treat
	// both as keyless). Keys belong to the caller and must not be kept.
	Keys [][]byte
}

// Response assigns a partition to each record of the Request.
type Response struct {
	// Partitions has one entry per Request.Keys entry, each in
	// [0, Request.Partitions). It belongs to the caller.
	Partitions []int32
}

// Partitioner assigns partitions to a batch of records, one batch per call
// (never one record per call: an external partitioner costs a process round
// trip per call).
//
// A Partitioner may keep state between calls (round-robin position, sticky
// choice, random generator), so a producer builds one per producer and calls
// it from one goroutine at a time; implementations need no locking.
//
// Errors: ctx's error when ctx ends first; external partitioners add errors
// wrapping ErrPluginFailed. A Response whose length or partitions are out of
// range is the partitioner's bug; callers check it (see Check) and treat it
// as an error wrapping ErrBadResponse.
type Partitioner interface {
	Partition(ctx context.Context, req Request) (Response, error)
}

// Errors of partitioners and of the registry.
var (
	// ErrBadResponse: a partitioner answered with the wrong number of
	// partitions or a partition out of range.
	ErrBadResponse = errors.New("partitioner: bad response")
	// ErrUnknownPartitioner: a spec names no registered partitioner and no
	// plugin.
	ErrUnknownPartitioner = errors.New("partitioner: unknown partitioner")
	// ErrInvalidSpec: a spec is malformed or its parameters are rejected.
	ErrInvalidSpec = errors.New("partitioner: invalid spec")
	// ErrPluginFailed: an external partitioner's process failed (handshake,
	// crash, deadline, garbage); the error names the plugin.
	ErrPluginFailed = errors.New("partitioner: plugin failed")
)
