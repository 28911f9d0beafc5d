package partlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// AppendResult says where an append went.
type AppendResult struct {
	BaseOffset int64 // offset of the first record
	NextOffset int64 // the log end offset after the append
	Records    int64
	// Flushed reports that the append returned after an fsync that covers it
	// (the flush policy asked for one) and that no cut came first.
	Flushed bool
	// Generation is the log's Generation when the records were appended
	// (see Survived and FlushAppended).
	Generation int64
}

// Append validates the record batches in buf (one or more whole Kafka v2
// batches, as one produce request carries them for one partition), assigns
// them the next offsets and the leader epoch by rewriting their first 8 and
// bytes 12-15 in place (not covered by the CRC), and writes them to the active
// segment with one write. The log keeps no reference to buf after returning.
//
// A leaderEpoch above the log's latest starts that epoch in the epoch cache
// at the first offset appended; one below it, or below the floor Fence set,
// is ErrStaleEpoch (see "Leader epochs" in the package doc); a negative one
// is stamped but starts none.
//
// Invalid input changes nothing: a corrupt batch (errors.Is(err,
// record.ErrCorrupt)) or one over MaxBatchBytes (ErrBatchTooLarge) rejects the
// whole append. The flush policy is consulted once per call, after the
// records are published and with none of the log's locks held, and the
// append returns after the fsync it asks for (see the package doc).
//
// An I/O error fails the log (ErrFailed, wrapping the cause): this append
// and the next ones get it, until one made after Config.RecoveryBackoff
// recovers the log in place and goes ahead (see the package doc). An error
// from a step after the records were published (sealing a rolled segment, the
// flush the policy asked for) comes with a result whose NextOffset >
// BaseOffset: the records are in the log unless a recovery cuts them
// (Survived tells).
func (l *Log) Append(ctx context.Context, buf []byte, leaderEpoch int32) (AppendResult, error) {
	return l.append(ctx, buf, leaderEpoch, -1, false)
}

// ErrGenerationChanged: AppendInGeneration found the log in another
// generation than the caller expected. It comes wrapped together with
// ErrFailed, so that a client retries (and the caller re-checks first).
var ErrGenerationChanged = errors.New("partlog: log generation changed")

// AppendInGeneration is Append, made only if the log is still in generation
// gen when the records would go in (after any recovery the append makes
// first); otherwise nothing is appended and the error wraps ErrFailed and
// ErrGenerationChanged. Callers that decided what to append from state of
// that generation (an idempotent producer's sequence checks) use it, so that
// a cut in between cannot make them append on stale decisions.
func (l *Log) AppendInGeneration(ctx context.Context, buf []byte, leaderEpoch int32, gen int64) (AppendResult, error) {
	if gen < 0 {
		return AppendResult{}, fmt.Errorf("partlog: negative generation %d", gen)
	}
	return l.append(ctx, buf, leaderEpoch, gen, false)
}

// ErrNotContiguous: a replicated append does not continue the log: its
// first batch does not start at the log end, or a batch does not start
// right after the one before (a gap or an overlap). Nothing is appended.
var ErrNotContiguous = errors.New("partlog: replicated batches do not continue the log")

// AppendReplicated appends batches exactly as a leader's log stores them (a
// follower's fetch): their offsets and leader epochs are kept, never
// assigned nor rewritten, and they may have the shapes the log cleaner
// writes (record offset deltas that skip, batches lowered over a gap,
// batches of no records). Every batch is checked (length, magic, CRC-32C,
// header sanity: record.ValidateStored, not the producer checks) and must
// continue the log: the first starts at the log end (Kafka's follower
// append likewise refuses another offset), each next one right after the
// one before; otherwise nothing is appended and the error wraps
// record.ErrCorrupt, ErrBatchTooLarge (over MaxBatchBytes, as for Append) or
// ErrNotContiguous. A batch whose epoch is above the log's latest starts it
// in the epoch cache; one below is ErrStaleEpoch (the follower should have
// truncated first). The write path is Append's: rolls, the flush policy,
// failures and recoveries, Wait's wake-up, AppendResult's generation.
func (l *Log) AppendReplicated(ctx context.Context, buf []byte) (AppendResult, error) {
	return l.append(ctx, buf, 0, -1, true)
}

// append is Append, in generation gen only unless gen < 0; or, replicated,
// AppendReplicated (leaderEpoch unused).
//
// The flush policy is called after appendMu is released (policy.go), and
// its answer acted on here: Flush makes the append wait for an fsync that
// covers it (Flush, so concurrent appends share fsyncs), FlushBy arms the
// deadline timer, unless an fsync covered the append meanwhile.
func (l *Log) append(ctx context.Context, buf []byte, leaderEpoch int32, gen int64, replicated bool) (AppendResult, error) {
	res, rolled, pa, err := func() (AppendResult, bool, pendingAppended, error) {
		l.appendMu.Lock()
		defer l.appendMu.Unlock() // even if a recovery panics: never wedge the partition
		if err := l.recoverIfDue(); err != nil {
			return AppendResult{}, false, pendingAppended{}, err
		}
		if now := l.gen.Load(); gen >= 0 && now != gen {
			return AppendResult{}, false, pendingAppended{}, fmt.Errorf("%w: %w: expected generation %d, now %d",
				ErrFailed, ErrGenerationChanged, gen, now)
		}
		return l.appendLocked(buf, leaderEpoch, replicated)
	}()
	if err != nil {
		// Nothing appended, so no call of its own; a failed log may
		// have fsyncs (the failed one) to tell.
		l.tellQueuedFlushes()
		return res, err
	}
	// The records are published; the policy call is owed whatever happens
	// next (the queue waits for it).
	dec, perr := l.appended(ctx, pa.turn, pa.info)
	if perr != nil {
		// A policy that cannot decide costs throughput, not data.
		l.cfg.Logger.Warn("flush policy failed; flushing", "dir", l.dir, "err", perr)
		dec = flushpolicy.Decision{Flush: true}
	}
	if rolled {
		if err := l.sealRolled(); err != nil {
			return res, err
		}
	}
	if dec.Flush {
		if err := l.Flush(res.NextOffset); err != nil {
			return res, err
		}
		// Records cut meanwhile (a recovery, Truncate) were appended but
		// are not covered: FlushAppended tells a durable ack so.
		res.Flushed = l.Survived(res)
	} else if !dec.FlushBy.IsZero() && l.flushed.Load() < res.NextOffset {
		l.armTimer(dec.FlushBy)
	}
	return res, nil
}

// pendingAppended is the policy call an append owes once it leaves appendMu:
// its turn (0: it holds the policy already) and what it tells.
type pendingAppended struct {
	turn int64
	info flushpolicy.AppendInfo
}

// appendLocked validates buf and writes it. A leader's append (replicated
// false) gets the next offsets and epoch stamped; a replicated one must
// continue the log as it is, its offsets and epochs kept.
func (l *Log) appendLocked(buf []byte, epoch int32, replicated bool) (AppendResult, bool, pendingAppended, error) {
	var pa pendingAppended
	if l.closed.Load() {
		return AppendResult{}, false, pa, ErrClosed
	}
	if err := l.Err(); err != nil {
		return AppendResult{}, false, pa, err
	}
	// Validate every batch before touching anything.
	hs := l.hdrs[:0]
	var records int64
	what := "batch"
	if replicated {
		what = "replicated batch"
	}
	maxBatch := l.conf().MaxBatchBytes
	for b := buf; len(b) > 0; {
		h, n, err := record.Next(b, maxBatch)
		if err != nil {
			if h, perr := record.ParseHeader(b); perr == nil && h.Size() > maxBatch {
				err = fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, h.Size(), maxBatch)
			}
			return AppendResult{}, false, pa, fmt.Errorf("partlog: %s %d: %w", what, len(hs), err)
		}
		if replicated {
			err = record.ValidateStored(h)
		} else {
			err = record.ValidateProduced(h)
		}
		if err != nil {
			return AppendResult{}, false, pa, fmt.Errorf("partlog: %s %d: %w", what, len(hs), err)
		}
		hs = append(hs, h)
		records += int64(h.RecordCount)
		b = b[n:]
	}
	l.hdrs = hs
	if len(hs) == 0 {
		return AppendResult{}, false, pa, fmt.Errorf("partlog: empty append: %w", record.ErrShort)
	}
	// Every segment's offsets must stay within 2^32 of its base, so one append
	// cannot span more (a 100-byte batch may claim 2^31 records).
	var span int64
	for _, h := range hs {
		span += int64(h.LastOffsetDelta) + 1
	}
	if span >= math.MaxUint32 {
		return AppendResult{}, false, pa, fmt.Errorf("partlog: append of %d offsets: %w", span, record.ErrBadRecords)
	}
	base := l.end.Load()
	next := base
	if replicated {
		// Exactly where the log ends, each batch right after the one
		// before: a follower copies its leader's offsets, gaps and all
		// (those the cleaner left lie inside batches, never between).
		for i, h := range hs {
			if h.BaseOffset != next {
				return AppendResult{}, false, pa, fmt.Errorf("%w: replicated batch %d starts at %d, expected %d (log end %d)",
					ErrNotContiguous, i, h.BaseOffset, next, base)
			}
			next = h.NextOffset()
		}
	} else {
		if floor := l.appendFloor.Load(); epoch >= 0 && epoch < floor {
			return AppendResult{}, false, pa, fmt.Errorf("%w: append at epoch %d, the log is fenced at %d", ErrStaleEpoch, epoch, floor)
		}
		for i := range hs {
			hs[i].BaseOffset, hs[i].PartitionLeaderEpoch = next, epoch
			next = hs[i].NextOffset()
		}
	}
	// The epoch cache after the append: an epoch above the latest starts at
	// its first batch; one below it is refused.
	epochs, newEpoch, err := nextEpochs(l.epochList(), hs)
	if err != nil {
		return AppendResult{}, false, pa, err
	}
	if !replicated {
		// Assign offsets (hs holds them already).
		for i, pos := 0, 0; i < len(hs); i++ {
			record.SetBaseOffset(buf[pos:], hs[i].BaseOffset)
			record.SetPartitionLeaderEpoch(buf[pos:], epoch)
			pos += hs[i].Size()
		}
	}
	if err := l.touch(); err != nil {
		return AppendResult{}, false, pa, err
	}
	now := l.cfg.Clock.Now()
	rolled := false
	active := l.active()
	if l.tooOld(active, now) || !active.Fits(int64(len(buf)), next-1, l.conf().SegmentBytes) {
		if active.Size() == 0 {
			// Cannot happen after the span check: an empty segment takes
			// anything that fits a segment at all.
			return AppendResult{}, false, pa, fmt.Errorf("partlog: append of %d bytes fits no segment: %w", len(buf), ErrBatchTooLarge)
		}
		s, err := segment.Create(l.fs, l.dir, base, segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.conf().IndexIntervalBytes})
		if err != nil {
			return AppendResult{}, false, pa, l.fail(err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			_ = s.Close()
			return AppendResult{}, false, pa, l.fail(err)
		}
		rolled, active = true, s
		l.activeBorn.Store(now.UnixMilli())
		segs := append(append([]*segment.Segment(nil), l.segments()...), s)
		l.setSegments(segs)
	}
	if newEpoch {
		// The checkpoint first: until the records are written it holds an
		// epoch starting at the log end, as AssignEpoch would have left it.
		if err := l.writeEpochCheckpoint(epochs); err != nil {
			return AppendResult{}, rolled, pa, l.fail(err)
		}
	}
	if err := active.Append(buf, hs); err != nil {
		return AppendResult{}, rolled, pa, l.fail(err)
	}
	res := AppendResult{BaseOffset: base, NextOffset: next, Records: records, Generation: l.gen.Load()}
	if newEpoch {
		l.epochs.Store(&epochs) // before the end: see EndOffsetForEpoch
	}

	l.statMu.Lock()
	l.end.Store(next)
	if l.unMsgs == 0 && l.unBytes == 0 {
		l.unOldest = now
	}
	l.unMsgs += records
	l.unBytes += int64(len(buf))
	pa.info = flushpolicy.AppendInfo{Messages: records, Bytes: int64(len(buf)), UnflushedMessages: l.unMsgs,
		UnflushedBytes: l.unBytes, OldestUnflushed: l.unOldest, Now: now}
	pa.turn = l.queueAppendedLocked()
	l.statMu.Unlock()
	l.wake()
	return res, rolled, pa, nil
}

// tooOld reports whether the active segment should roll by age: it is not
// empty and was created SegmentAge ago. The creation time survives restarts (in
// the recovery-point file). Kafka dates a segment by its first batch's
// timestamp instead, which makes producers with old timestamps (replays) roll
// a segment per append; wall time does not.
func (l *Log) tooOld(active *segment.Segment, now time.Time) bool {
	age := l.conf().SegmentAge
	if age <= 0 || active.Size() == 0 {
		return false
	}
	return now.Sub(time.UnixMilli(l.activeBorn.Load())) >= age
}

// Wait returns a channel that is closed by the next append (for long-polling
// fetches), or at once by a closed log. Call EndOffset after taking the
// channel to avoid missing an append. It takes no lock, so a long poll never
// waits for an append in progress (nor for the flush policy).
func (l *Log) Wait() <-chan struct{} {
	for {
		p := l.notify.Load()
		if p == nil {
			c := make(chan struct{})
			if !l.notify.CompareAndSwap(nil, &c) {
				continue
			}
			p = &c
		}
		// Close sets closed before it wakes: a channel installed after
		// that wake is never closed, so the check comes after installing.
		if l.closed.Load() {
			return closedChan
		}
		return *p
	}
}

// wake closes the channel Wait handed out, if any, and fires the waiters
// registered by Watch. Appends call it after publishing their new end: a
// waiter that took the channel (or registered) before reading EndOffset
// either sees the new end or is woken.
func (l *Log) wake() {
	l.watchers.Fire()
	if l.notify.Load() == nil {
		return
	}
	if p := l.notify.Swap(nil); p != nil {
		close(*p)
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
