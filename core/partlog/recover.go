package partlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-broker/weir/core/segment"
)

// Failure and recovery in place; see "Failures and recovery" in the package
// doc for the design and its guarantees.

// ErrCut: records were appended, then cut before an fsync made them durable:
// by a recovery (after a failed fsync, the log goes back to what the last
// successful one covered) or by Truncate. FlushAppended returns it wrapped
// together with ErrFailed.
var ErrCut = errors.New("partlog: appended records were cut before they were durable")

// MaxRecoveryBackoff caps the wait between two recovery attempts, which
// doubles from Config.RecoveryBackoff after each failed one.
const MaxRecoveryBackoff = time.Minute

// maxCuts is how many cuts the log remembers for Survived; an append older
// than all of them counts as cut (the safe answer).
const maxCuts = 64

// cut records that a generation began by moving the log end back to `to`
// (-1: Reset removed every record).
type cut struct{ gen, to int64 }

// fail fails the log after a write (or create, truncate, rename, directory
// fsync) failed: the page cache still holds everything written before, so a
// recovery keeps every complete batch it finds.
func (l *Log) fail(err error) error { return l.failWith(err, false) }

// failSync fails the log after a file fsync failed. Linux may have dropped
// the dirty pages that fsync was writing (or marked them clean, so that a
// second fsync reports success without writing them): everything past the
// last successful fsync is suspect. Readers stop being served it at once, and
// the recovery cuts it. syncMu held, so FlushedOffset cannot move meanwhile.
func (l *Log) failSync(err error) error {
	l.markLostPages()
	return l.failWith(err, true)
}

// markLostPages records that a log-file fsync failed: readers are served only
// up to FlushedOffset from now on, and the next successful recovery cuts the
// log back to it. Every failed log-file fsync goes through here, those inside
// a recovery too: after one, a later fsync may "succeed" without writing the
// dropped pages, so nothing may count as durable that it did not cover.
// syncMu held.
func (l *Log) markLostPages() {
	l.lostPages.Store(true)
	for {
		lim, fl := l.readLimit.Load(), l.flushed.Load()
		if fl >= lim || l.readLimit.CompareAndSwap(lim, fl) {
			break
		}
	}
}

func (l *Log) failWith(err error, sync bool) error {
	wrapped := fmt.Errorf("%w: %w", ErrFailed, err)
	if l.failed.CompareAndSwap(nil, &wrapped) {
		l.retryAt.Store(l.cfg.Clock.Now().Add(l.cfg.RecoveryBackoff).UnixNano())
		l.cfg.Logger.Error("partition log failed; appends refused until it recovers", "dir", l.dir, "err", err,
			"fsync", sync, "flushed", l.flushed.Load(), "end", l.end.Load(), "retry_in", l.cfg.RecoveryBackoff)
	}
	return wrapped
}

// Recoveries counts the recoveries in place the log has made.
func (l *Log) Recoveries() int64 { return l.recoveries.Load() }

// Generation counts the times the log end moved backwards: a recovery that cut
// appended records (see ErrCut), or Truncate. Offsets below EndOffset may hold
// other records than an append of an earlier generation put there; Survived
// tells whether they do.
func (l *Log) Generation() int64 { return l.gen.Load() }

// Survived reports whether the records of an append (res from Append: its
// NextOffset and Generation) are still in the log: no cut since went below
// their end.
func (l *Log) Survived(res AppendResult) bool {
	if l.gen.Load() == res.Generation {
		return true
	}
	l.statMu.Lock()
	defer l.statMu.Unlock()
	if len(l.cuts) == 0 || l.cuts[0].gen > res.Generation+1 {
		return false // older than the cuts remembered
	}
	for _, c := range l.cuts {
		if c.gen > res.Generation && c.to < res.NextOffset {
			return false
		}
	}
	return true
}

// FlushAppended returns once the records of one append (res from Append) are
// durable, as FlushContext(ctx, res.NextOffset) does, except that it fails
// (ErrFailed wrapping ErrCut) when a recovery cut them first, where
// FlushContext would report success for whatever holds their offsets now.
// Durable acks wait with it.
func (l *Log) FlushAppended(ctx context.Context, res AppendResult) error {
	if err := l.FlushContext(ctx, res.NextOffset); err != nil {
		return err
	}
	return l.checkSurvived(res)
}

func (l *Log) checkSurvived(res AppendResult) error {
	if l.Survived(res) {
		return nil
	}
	return fmt.Errorf("%w: %w: offsets [%d, %d) of generation %d (now %d)", ErrFailed, ErrCut,
		res.BaseOffset, res.NextOffset, res.Generation, l.gen.Load())
}

// awaitRecovery returns when no recovery is running.
func (l *Log) awaitRecovery() {
	if p := l.recoverDone.Load(); p != nil {
		<-*p
	}
}

// recordCut starts a new generation whose log ends at to. Called before the
// lower end is published, so that a durable-ack waiter never sees the lower
// end without the cut.
func (l *Log) recordCut(to int64) {
	l.statMu.Lock()
	defer l.statMu.Unlock()
	g := l.gen.Add(1)
	if len(l.cuts) == maxCuts {
		l.cuts = append(l.cuts[:0], l.cuts[1:]...)
	}
	l.cuts = append(l.cuts, cut{gen: g, to: to})
}

// Recover recovers a failed log now, ignoring the backoff: what Append does by
// itself once Config.RecoveryBackoff has passed. On a healthy log it does
// nothing. The error wraps ErrFailed (the log stays failed) or is ErrClosed.
func (l *Log) Recover() (Report, error) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return Report{}, ErrClosed
	}
	return l.tryRecoverLocked()
}

// HoldRecovery turns automatic recovery off (hold) or back on. While held, a
// failed log stays failed: appends and RecoverIfDue return its error, and
// only Recover (or a reopen) recovers it. It is for a layer above that knows
// when cutting the log back is safe and when it is not: records past the last
// fsync may have been copied elsewhere (a replica leader's followers hold
// them), and a cut whose offsets then go to new records would make the copies
// differ. Releasing the hold lets the next append recover once the backoff
// has passed, as usual. The log knows nothing of why.
func (l *Log) HoldRecovery(hold bool) { l.held.Store(hold) }

// RecoveryHeld reports whether HoldRecovery holds automatic recovery.
func (l *Log) RecoveryHeld() bool { return l.held.Load() }

// RecoveryDue reports whether a failed log's backoff has passed: since the
// failure, or since the last recovery attempt that failed (the wait doubles
// after each). A caller that recovers the log itself (Recover) asks first,
// so that a disk that keeps failing is not tried more often than appends
// would try it. On a healthy log it reports false.
func (l *Log) RecoveryDue() bool {
	return l.Err() != nil && l.cfg.Clock.Now().UnixNano() >= l.retryAt.Load()
}

// RecoverIfDue is what Append does first: on a failed log it returns the
// log's error (ErrFailed) until Config.RecoveryBackoff has passed since the
// failure (or the last failed attempt), then tries to recover, returning nil
// if that worked. On a healthy log it returns nil at once. Callers that
// answer a produce without appending (an idempotent producer's duplicate)
// call it, so that a failed log recovers and refuses them alike.
func (l *Log) RecoverIfDue() error {
	if l.Err() == nil {
		return nil
	}
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.recoverIfDueLocked()
}

// recoverIfDue runs before every append: a failed log refuses it with its
// error until the backoff has passed, then tries to recover. appendMu held.
func (l *Log) recoverIfDue() error {
	if l.Err() == nil {
		return nil
	}
	// appendMu held: fileMu comes before it, so only try it. A swap holds
	// it for a few fsyncs; the next append tries again.
	if !l.fileMu.TryLock() {
		return l.Err()
	}
	defer l.fileMu.Unlock()
	return l.recoverIfDueLocked()
}

// recoverIfDueLocked is recoverIfDue with fileMu held.
func (l *Log) recoverIfDueLocked() error {
	err := l.Err()
	if err == nil || l.closed.Load() {
		return nil // appendLocked reports a closed log
	}
	if l.cfg.RecoveryBackoff < 0 || l.held.Load() || l.cfg.Clock.Now().UnixNano() < l.retryAt.Load() {
		return err
	}
	_, err = l.tryRecoverLocked()
	return err
}

// tryRecoverLocked recovers, or schedules the next attempt. appendMu held.
func (l *Log) tryRecoverLocked() (Report, error) {
	if l.Err() == nil {
		return Report{}, nil
	}
	start := l.cfg.Clock.Now()
	rep, before, err := func() (Report, int64, error) {
		l.syncMu.Lock()
		defer l.syncMu.Unlock() // even if recovery panics: never wedge the partition
		return l.recoverLocked()
	}()
	rep.Duration = l.cfg.Clock.Now().Sub(start)
	if err != nil {
		l.backoff = min(max(2*l.backoff, l.cfg.RecoveryBackoff), MaxRecoveryBackoff)
		l.retryAt.Store(l.cfg.Clock.Now().Add(l.backoff).UnixNano())
		l.cfg.Logger.Warn("partition log recovery failed", "dir", l.dir, "err", err, "retry_in", l.backoff)
		return rep, fmt.Errorf("%w: recovery failed: %w", ErrFailed, err)
	}
	l.backoff = l.cfg.RecoveryBackoff
	l.recoveries.Add(1)
	l.cfg.Logger.Warn("partition log recovered in place", "dir", l.dir, "end_before", before, "end", l.end.Load(),
		"truncated_bytes", rep.Truncated, "deleted_segments", len(rep.Deleted), "causes", errors.Join(rep.Causes...),
		"duration", rep.Duration)
	return rep, nil
}

// recoverLocked replaces the segments by what Open would find on disk now,
// cut back to the last successful fsync if one failed since. It returns the
// log end before. appendMu and syncMu held; nothing changes unless the files
// can be read, sealed and fsynced again.
func (l *Log) recoverLocked() (Report, int64, error) {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	done := make(chan struct{})
	l.recoverDone.Store(&done)
	l.recoverSeq.Add(1) // odd: files may change under readers
	defer func() {
		l.recoverSeq.Add(1)
		l.recoverDone.Store(nil)
		close(done)
	}()
	before := l.end.Load()
	old := l.segments()
	oldActive := old[len(old)-1]
	// Fsync first every log file that may hold unflushed data, on its own:
	// a failure here is a failed fsync (markLostPages), told apart from the
	// index writes of the seals below. Once it succeeded, every page of
	// those files is on disk (appendMu held: nothing is written since), so
	// a failing fsync later in the recovery (load's seals of re-read
	// segments, which are the same files) leaves no data in doubt, only a
	// truncation or an index that the next attempt redoes.
	flushed := l.flushed.Load()
	for _, s := range old {
		if s.NextOffset() > flushed || s.Active() {
			if err := s.Sync(); err != nil {
				l.markLostPages()
				return Report{}, before, fmt.Errorf("partlog: fsync before recovery: %w", err)
			}
		}
	}
	// The old segment objects keep serving readers until the new ones are
	// published; seal the active ones first, so that none of their index
	// file handles writes again over the indexes load rebuilds.
	for _, s := range old {
		if s.Active() {
			if err := s.Seal(); err != nil {
				return Report{}, before, fmt.Errorf("partlog: seal before recovery: %w", err)
			}
		}
	}
	ld, err := l.load(false)
	if err != nil {
		return ld.rep, before, err
	}
	active := ld.segs[len(ld.segs)-1]
	keep := active.NextOffset()
	if l.lostPages.Load() {
		// Never below the log start: retention deletes only durable
		// segments, but a log whose start moved past FlushedOffset
		// otherwise would have nothing left to cut into.
		keep = max(min(keep, l.flushed.Load()), ld.segs[0].Base())
	}
	switch {
	case ld.reset: // load finished a Reset: every record went
		l.recordCut(-1)
	case keep < before:
		l.recordCut(keep)
	}
	l.setSegments(ld.segs)
	l.end.Store(active.NextOffset())
	switch {
	case ld.cpOK && ld.cp.activeBase == active.Base() && ld.cp.activeBorn > 0:
		l.activeBorn.Store(ld.cp.activeBorn)
	case active.Base() != oldActive.Base():
		l.activeBorn.Store(l.cfg.Clock.Now().UnixMilli())
	}
	for _, s := range old {
		_ = s.Close() // sealed: drops the owner's reference; Slices keep their files
	}
	if err := l.loadCleanHistory(ld.cleaned, ld.cleanedDamage); err != nil {
		return ld.rep, before, err
	}
	if ld.rep.EpochsRebuilt, err = l.loadEpochs(ld.recoveredFrom, ld.mark); err != nil {
		return ld.rep, before, err
	}
	if active.NextOffset() > keep {
		if err := l.truncateLocked(keep, false); err != nil {
			return ld.rep, before, err
		}
		ld.rep.Causes = append(ld.rep.Causes, fmt.Errorf("an fsync failed: cut back to %d, what the last successful fsync covered", keep))
		if err := l.freshTail(); err != nil {
			return ld.rep, before, err
		}
	}
	if err := l.settle(); err != nil {
		return ld.rep, before, err
	}
	if l.pristine.Load() {
		// A touch failed before its change: the marker may still be there.
		if err := l.fs.Remove(l.path(cleanShutdownFile)); err != nil && !errors.Is(err, errNotExist) {
			return ld.rep, before, fmt.Errorf("partlog: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return ld.rep, before, fmt.Errorf("partlog: %w", err)
	}
	l.pristine.Store(false)
	if err := l.afterLoad(ld); err != nil {
		return ld.rep, before, err
	}

	l.statMu.Lock()
	l.unMsgs, l.unBytes = 0, 0
	if l.timer != nil {
		l.timer.Stop()
		l.timer, l.timerAt = nil, time.Time{}
	}
	l.statMu.Unlock()
	l.syncCount.Add(1)
	l.lostPages.Store(false)
	l.readLimit.Store(NoLimit)
	l.failed.Store(nil)
	l.wake() // long polls look again: the end may have moved back
	return ld.rep, before, nil
}

// freshTail makes the next append go to a new file after a cut, so that a
// reader still holding a Slice of cut bytes reads those bytes or comes up
// short (an error), never the bytes of the records that now hold their
// offsets: a non-empty active segment rolls; one the cut emptied is replaced
// by a new file of the same name (the old one stays readable through open
// handles). The log's only segment, emptied, is replaced by renaming a new
// one over it (replaceSole): deleting it first could, after a crash in
// between, leave no segment to say where offsets resume.
// appendMu and syncMu held.
func (l *Log) freshTail() error {
	segs := l.segments()
	a := segs[len(segs)-1]
	opts := segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes}
	switch {
	case a.Size() > 0:
		if err := a.Seal(); err != nil {
			return l.fail(err)
		}
	case len(segs) > 1:
		if err := a.Delete(); err != nil {
			return l.fail(err)
		}
		segs = segs[:len(segs)-1]
		l.setSegments(segs)
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("partlog: %w", err))
		}
	default:
		return l.replaceSole(a, opts)
	}
	s, err := segment.Create(l.fs, l.dir, a.NextOffset(), opts)
	if err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	l.setSegments(append(append([]*segment.Segment(nil), segs...), s))
	l.activeBorn.Store(l.cfg.Clock.Now().UnixMilli())
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	return nil
}

// replaceSole replaces the log's only segment a, which a cut emptied, by a
// new empty segment with the same base, in new files: Slices of a keep
// reading its old files (and cut bytes, or come up short), never what is
// appended next. The new files are created and fsynced in freshTailDir, then
// renamed over a's, so that at every step a crash leaves one segment file
// with a's base (old or new, both empty and durable). appendMu and syncMu
// held.
func (l *Log) replaceSole(a *segment.Segment, opts segment.Options) error {
	if err := a.Hold(); err != nil { // Slices of a read its old file
		return l.fail(err)
	}
	tmp := l.path(freshTailDir)
	if err := l.fs.RemoveAll(tmp); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	if err := l.fs.MkdirAll(tmp, 0o755); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	n, err := segment.Create(l.fs, tmp, a.Base(), opts)
	if err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	if err := n.Close(); err != nil { // seals: fsyncs the log and both indexes
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	// Indexes first, the log last: until the log is renamed, the old
	// (empty) segment is what a crash leaves, with indexes that Open
	// rebuilds for the last segment anyway.
	for _, suf := range []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.LogSuffix} {
		if err := l.fs.Rename(segment.Name(tmp, a.Base(), suf), segment.Name(l.dir, a.Base(), suf)); err != nil {
			return l.fail(fmt.Errorf("partlog: %w", err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	s, _, err := segment.Open(l.fs, l.dir, a.Base(), opts, segment.Recover, -1)
	if err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	l.setSegments([]*segment.Segment{s})
	_ = a.Close() // its files are unlinked: Slices of it keep them
	l.activeBorn.Store(l.cfg.Clock.Now().UnixMilli())
	if err := l.fs.RemoveAll(tmp); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	return nil
}
