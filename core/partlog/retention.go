package partlog

import (
	"fmt"

	"github.com/weir-broker/weir/core/segment"
)

// ApplyRetention deletes whole segments from the start of the log: those whose
// newest record is older than RetentionAge (the file's modification time
// stands in for segments without timestamps), and, by size, the oldest ones
// as long as the log stays at least RetentionBytes without them. The active
// segment is never deleted. Readers holding Slices of a deleted segment keep
// reading it until they release them. It returns the base offsets deleted.
// The epoch covering the new log start then starts there.
//
// Only durable segments go (those ending at or below FlushedOffset), and
// nothing while the log is failed: a recovery after a failed fsync cuts the
// log back to FlushedOffset, which must then still lie inside the log. A
// failed log reports nothing deleted and no error (it is not retention's
// failure; the next call after the recovery catches up).
func (l *Log) ApplyRetention() ([]int64, error) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if l.Err() != nil || l.lostPages.Load() {
		return nil, nil
	}
	now := l.cfg.Clock.Now()
	conf := l.conf()
	segs := l.segments()
	total := l.Size()
	flushed := l.flushed.Load()
	n := 0
	for ; n < len(segs)-1; n++ {
		s := segs[n]
		if s.NextOffset() > flushed {
			break // not durable yet: a recovery may have to cut back into it
		}
		// Wholly below the log start (DeleteRecordsBefore): gone already.
		belowStart := s.NextOffset() <= l.logStart.Load()
		bySize := conf.RetentionBytes >= 0 && total-s.Size() >= conf.RetentionBytes
		byAge := false
		if conf.RetentionAge > 0 {
			ts := s.MaxTimestamp()
			if ts == segment.NoTimestamp {
				fi, err := l.fs.Stat(segment.Name(l.dir, s.Base(), segment.LogSuffix))
				if err != nil {
					break // age unknown: keep it, and everything after it
				}
				ts = fi.ModTime().UnixMilli()
			}
			byAge = ts < now.Add(-conf.RetentionAge).UnixMilli()
		}
		if !bySize && !byAge && !belowStart {
			break
		}
		total -= s.Size()
	}
	if n == 0 {
		return nil, nil
	}
	if err := l.touchLocked(); err != nil {
		return nil, err
	}
	return l.deleteHeadLocked(segs, n)
}

// Truncate removes every record at an offset >= offset (a batch containing
// offset goes whole), so the log then ends at or below offset, and the
// epochs starting at or past the new end from the epoch cache (even when
// offset >= EndOffset and no record goes: an epoch assigned at the end).
// Replication uses it to cut a follower's divergent tail. offset below the
// log start is ErrOffsetOutOfRange.
//
// Bytes a reader holds a Slice of are never rewritten: the cut segment's
// file is cut in place (what it keeps stays where it was; a Slice of the
// cut bytes comes up short, an error), and the next append goes to a new
// segment file, so that no Slice can ever see the records that take the
// cut offsets. A cut that empties a segment replaces it by a new file.
func (l *Log) Truncate(offset int64) error {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	if offset >= l.end.Load() {
		// No record goes, but an epoch assigned at offset (which has no
		// records) does: a leader that became a follower drops its own.
		return l.trimEpochs(offset)
	}
	if err := l.touchLocked(); err != nil {
		return err
	}
	// A roll whose seal is still pending must be sealed before the recovery
	// point can name any segment after it.
	if err := l.sealPendingLocked(); err != nil {
		return err
	}
	if offset < l.segments()[0].Base() {
		return fmt.Errorf("%w: truncate to %d below log start %d", ErrOffsetOutOfRange, offset, l.segments()[0].Base())
	}
	if err := l.truncateLocked(offset, true); err != nil {
		return err
	}
	// What is appended next goes to a new file: a Slice of the cut bytes
	// reads them or comes up short, never the records that take their
	// offsets (see "Retention and truncation" in the package doc).
	if err := l.freshTail(); err != nil {
		return err
	}
	if err := l.afterCut(l.end.Load()); err != nil {
		return l.fail(err) // the recovery calls it again before any append
	}
	return nil
}

// truncateLocked cuts the log at offset (at least the log start; every
// segment but the last sealed), starting a new generation when record is set
// (Truncate; a recovery records its cut itself, before publishing anything).
// appendMu and syncMu held.
func (l *Log) truncateLocked(offset int64, record bool) error {
	segs := l.segments()
	if offset < segs[0].Base() {
		return l.fail(fmt.Errorf("%w: cut to %d below log start %d", ErrOffsetOutOfRange, offset, segs[0].Base()))
	}
	i := len(segs) - 1
	for segs[i].Base() > offset {
		i--
	}
	s := segs[i]
	// Move the recovery point below the segment first: from here on a crash
	// must make the next Open re-read it.
	if err := l.writeCheckpoint(s.Base()); err != nil {
		return l.fail(err)
	}
	l.setSegments(segs[:i+1])
	for j := len(segs) - 1; j > i; j-- { // newest first: a crash leaves a prefix
		if err := segs[j].Delete(); err != nil {
			return l.fail(err)
		}
	}
	if err := s.Unseal(); err != nil {
		return l.fail(err)
	}
	if err := s.TruncateTo(offset); err != nil {
		return l.fail(err)
	}
	if record && s.NextOffset() < l.end.Load() {
		l.recordCut(s.NextOffset())
	}
	if err := s.Sync(); err != nil {
		return l.failSync(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	l.statMu.Lock()
	l.end.Store(s.NextOffset())
	l.flushed.Store(s.NextOffset())
	l.unMsgs, l.unBytes = 0, 0
	l.statMu.Unlock()
	l.syncCount.Add(1)
	l.activeBorn.Store(l.cfg.Clock.Now().UnixMilli()) // its real creation time is not known
	// The epochs that started at or past the new end go, after the end
	// moved (see EndOffsetForEpoch). A crash before this is put right by
	// the next load: the recovery point is below the cut.
	if err := l.trimEpochs(s.NextOffset()); err != nil {
		return err
	}
	// Offsets from the new end on will hold records no cleaning pass has
	// seen: the cleaner point must not claim them.
	if err := l.clampCleanPoint(s.NextOffset()); err != nil {
		return l.fail(err)
	}
	return nil
}

// trimEpochs removes the epochs starting at or past end from the cache
// (Kafka's truncateFromEnd), file first. appendMu held.
func (l *Log) trimEpochs(end int64) error {
	es, changed := epochsBelow(l.epochList(), end)
	if !changed {
		return nil
	}
	if err := l.writeEpochCheckpoint(es); err != nil {
		return l.fail(err)
	}
	l.epochs.Store(&es)
	return nil
}
