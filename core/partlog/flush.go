package partlog

import (
	"context"
	"time"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Flush makes every offset below upTo (at most the log end) durable and
// returns when it is (or when it fails). Concurrent callers share fsyncs: whoever gets to sync covers
// everything appended so far, and the others find their offsets covered (group
// commit). Use EndOffset() as upTo to flush everything. A failed fsync fails
// the log (ErrFailed): after a failed fsync the kernel may have dropped the
// dirty pages, so retrying could report success for lost data. A failed log
// fails every Flush until it has recovered, even of offsets flushed before:
// a recovery may move the end back, and FlushAppended, which durable acks
// use, tells whether an append's records survived it.
func (l *Log) Flush(upTo int64) error {
	if err := l.Err(); err != nil {
		return err
	}
	upTo = min(upTo, l.end.Load())
	if l.flushed.Load() >= upTo {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.flushed.Load() >= upTo {
		return nil
	}
	if err := l.Err(); err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return l.syncLocked()
}

// FlushContext is Flush that stops waiting when ctx ends, returning ctx's
// error: the fsync itself goes on, and its outcome still counts.
func (l *Log) FlushContext(ctx context.Context, upTo int64) error {
	if l.flushed.Load() >= min(upTo, l.end.Load()) || ctx.Done() == nil {
		return l.Flush(upTo)
	}
	done := make(chan error, 1)
	go func() { done <- l.Flush(upTo) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// syncLocked fsyncs every segment that may hold unflushed data. syncMu held.
func (l *Log) syncLocked() error {
	l.statMu.Lock()
	target := l.end.Load()
	msgs, bytes := l.unMsgs, l.unBytes
	l.statMu.Unlock()
	flushed := l.flushed.Load()

	start := l.cfg.Clock.Now()
	var err error
	for _, s := range l.segments() {
		if s.NextOffset() > flushed || s.Active() {
			if err = s.Sync(); err != nil {
				break
			}
		}
	}
	now := l.cfg.Clock.Now()
	l.syncCount.Add(1)
	if err != nil {
		// Readers stop at FlushedOffset before anything else runs (the
		// policy, told later, may be a plugin behind an RPC).
		err = l.failSync(err)
	}

	l.statMu.Lock()
	defer l.statMu.Unlock()
	// The policy hears of it later, outside the locks (policy.go).
	l.queueFlushedLocked(flushpolicy.FlushInfo{
		Messages: msgs, Bytes: bytes, Duration: now.Sub(start), Now: now, Failed: err != nil})
	if err == nil {
		l.flushed.Store(max(target, l.flushed.Load()))
		l.unMsgs -= msgs
		l.unBytes -= bytes
		if l.unMsgs > 0 || l.unBytes > 0 {
			// Appends that raced with this fsync may not be covered; count
			// them as pending since it started.
			l.unOldest = start
		} else if l.timer != nil {
			l.timer.Stop()
			l.timer, l.timerAt = nil, time.Time{}
		}
	}
	return err
}

// sealRolled finishes rolls outside the append lock: every segment that is no
// longer the last is fsynced and sealed, oldest first, then the recovery point
// moves past them. The appender that caused the roll pays for this fsync; other
// appenders are not held up. After Close there is nothing left to do: Close
// sealed everything.
func (l *Log) sealRolled() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.closed.Load() {
		return nil
	}
	return l.sealPendingLocked()
}

// sealPendingLocked seals the segments a roll left active and moves the
// recovery point past them. Nothing moves once the log has failed: a failed
// fsync may have dropped pages that a second fsync would claim are durable.
// syncMu held.
func (l *Log) sealPendingLocked() error {
	if err := l.Err(); err != nil {
		return err
	}
	segs := l.segments()
	var end int64 = -1
	for _, s := range segs[:len(segs)-1] {
		if s.Active() {
			// The log's fsync first, so that its failure is told apart
			// from one of the index writes Seal makes next (after which
			// nothing of the log's pages is in doubt).
			if err := s.Sync(); err != nil {
				return l.failSync(err)
			}
			if err := s.Seal(); err != nil {
				return l.fail(err)
			}
			l.syncCount.Add(1)
			end = s.NextOffset()
		}
	}
	if end < 0 {
		return nil // another appender sealed them
	}
	l.statMu.Lock()
	if end > l.flushed.Load() {
		l.flushed.Store(end)
	}
	l.statMu.Unlock()
	if err := l.writeCheckpoint(end); err != nil {
		return l.fail(err)
	}
	return nil
}

// armTimer makes sure a flush happens by at.
func (l *Log) armTimer(at time.Time) {
	l.statMu.Lock()
	defer l.statMu.Unlock()
	if l.closed.Load() || l.timer != nil && !l.timerAt.After(at) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	d := at.Sub(l.cfg.Clock.Now())
	l.timerAt = at
	l.timer = l.cfg.Clock.AfterFunc(d, l.deadline)
}

// deadline runs when a flush deadline passes.
func (l *Log) deadline() {
	l.statMu.Lock()
	l.timer, l.timerAt = nil, time.Time{}
	l.statMu.Unlock()
	if err := l.Flush(l.end.Load()); err != nil {
		l.cfg.Logger.Error("deadline flush failed", "dir", l.dir, "err", err)
	}
}
