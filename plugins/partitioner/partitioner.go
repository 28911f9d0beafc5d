package partitioner

import (
	"context"
	"errors"
	"fmt"
)

// Request asks for partitions for one batch of records bound for one topic.
type Request struct {
	// Topic is the topic the records go to.
	Topic string
	// Partitions is the topic's partition count, at least 1.
	Partitions int32
	// Keys holds one key per record, in order; a nil key is Kafka's null key,
	// distinct from a non-nil empty key. Clients disagree about the empty
	// key: Kafka's Java client and sarama hash it like any other key,
	// librdkafka's consistent_random treats it as keyless (see the package
	// doc). Keys belong to the caller: a partitioner must neither keep nor
	// modify them.
	Keys [][]byte
}

// Validate reports a request no partitioner can answer: fewer than one
// partition. The error wraps ErrBadRequest.
func (r Request) Validate() error {
	if r.Partitions < 1 {
		return fmt.Errorf("%w: topic %q has %d partitions, want at least 1", ErrBadRequest, r.Topic, r.Partitions)
	}
	return nil
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
// Errors: ctx's error when ctx ends first; an error wrapping ErrBadRequest
// when the request fails Validate (never a panic); external partitioners add
// errors wrapping ErrPluginFailed.
//
// Cancellation: a call whose ctx is already done either fails with an error
// wrapping ctx.Err() (context.Canceled or context.DeadlineExceeded) or
// succeeds with a valid Response; either way the partitioner stays usable
// for the next call. The built-ins fail, without touching their state.
//
// A Response whose length or partitions are out of range is the
// partitioner's bug; callers check it (see Check) and treat it as an error
// wrapping ErrBadResponse.
type Partitioner interface {
	Partition(ctx context.Context, req Request) (Response, error)
}

// KeyConsistent is implemented by partitioners that promise key affinity:
// when KeyConsistent returns true, every record with a non-empty key gets a
// partition that depends only on the key and Request.Partitions (not on the
// topic, the batch, earlier calls or the instance), the property that keeps
// one key's records in order on one partition. Records with nil or empty
// keys are not covered. The conformance suite (package partitionertest)
// checks the promise.
type KeyConsistent interface {
	KeyConsistent() bool
}

// Check verifies that resp answers req: one partition per key, each in
// [0, req.Partitions). It returns an error wrapping ErrBadResponse naming the
// first problem, or one wrapping ErrBadRequest when req itself is invalid
// (see Request.Validate).
func Check(req Request, resp Response) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if len(resp.Partitions) != len(req.Keys) {
		return fmt.Errorf("%w: %d partitions for %d records of topic %q", ErrBadResponse, len(resp.Partitions), len(req.Keys), req.Topic)
	}
	for i, p := range resp.Partitions {
		if p < 0 || p >= req.Partitions {
			return fmt.Errorf("%w: record %d of topic %q: partition %d out of range [0, %d)", ErrBadResponse, i, req.Topic, p, req.Partitions)
		}
	}
	return nil
}

// Errors of partitioners and of the registry.
var (
	// ErrBadRequest: a request no partitioner can answer (fewer than one
	// partition), or a caller's records that do not fit the request.
	ErrBadRequest = errors.New("partitioner: bad request")
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
