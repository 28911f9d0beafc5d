package flushpolicy

import (
	"context"
	"time"
)

// AppendInfo describes a partition log right after one append (one produce
// request's batches for one partition), before the append returns.
//
// Counts are non-negative. The Unflushed fields include this append, so
// UnflushedMessages >= Messages and UnflushedBytes >= Bytes.
type AppendInfo struct {
	Messages          int64     // records in this append
	Bytes             int64     // bytes in this append, batch headers included
	UnflushedMessages int64     // records appended since the last fsync, including this append
	UnflushedBytes    int64     // bytes appended since the last fsync, including this append
	OldestUnflushed   time.Time // when the oldest not-yet-fsynced append happened (== Now for the first one)
	Now               time.Time // when this append happened
}

// Decision is a policy's answer to one append.
//
// The zero Decision leaves the fsync to the operating system (and to the
// log's own fsyncs when a segment rolls or the log closes).
type Decision struct {
	// Flush asks for an fsync now, before the append returns. When Flush is
	// set, FlushBy is ignored.
	Flush bool
	// FlushBy, when Flush is false and FlushBy is non-zero, asks for an fsync
	// no later than this time even if no further append comes. A later append
	// replaces the deadline with its own answer. A deadline at or before the
	// append's Now means "as soon as possible".
	FlushBy time.Time
}

// FlushInfo tells a policy that an fsync of the partition log finished,
// whoever asked for it (the policy, a deadline, a segment roll, a close, or a
// durable ack).
type FlushInfo struct {
	Messages int64         // records the fsync covered (unflushed when it started)
	Bytes    int64         // bytes the fsync covered
	Duration time.Duration // how long the fsync took
	Now      time.Time     // when it finished
	// Failed reports that the fsync returned an error: the covered data is not
	// known to be durable (on Linux the kernel may even have dropped the dirty
	// pages), so the log reports the error rather than retrying silently.
	Failed bool
}

// Policy decides when one partition log fsyncs. The log creates one Policy per
// partition (a policy may keep state) and calls it from one goroutine at a
// time, so implementations need no locking for their own state. Calls come
// in log order, and the log holds none of its locks during them: a slow
// policy delays the appends that wait for its answers, not the log's readers
// or fsyncs (package core/partlog, "Flushing and durability").
//
// Errors: a non-nil error means the policy could not decide (an external
// plugin crashed or timed out, ctx ended). The log should then fsync as if
// Flush were true, so a broken policy costs throughput rather than data, and
// surface the error. The built-ins never fail.
type Policy interface {
	// Appended is called once per append, after the bytes reached the page
	// cache and before the append returns.
	Appended(ctx context.Context, a AppendInfo) (Decision, error)
	// Flushed is called after every fsync of the log, successful or not:
	// before the next Appended call, but not necessarily before the fsync's
	// caller goes on (it does not wait for the policy).
	Flushed(ctx context.Context, f FlushInfo) error
}
