package partlog

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/segment"
)

// Reset (Kafka's truncateFullyAndStartAt); see "Reset" in the package doc.

// resetFile is the commit point of a Reset: while it exists the log is
// being restarted empty at the offset it names, which Open (and a recovery
// in place) finish. One line:
//
//	v1 <offset> <crc32 of the offset>
const resetFile = "reset"

// Reset removes every record and restarts the log empty at offset: log
// start and end are offset, which may lie anywhere, below the log start,
// inside the log or past its end (a follower whose leader's log starts past
// its own end; Kafka's truncateFullyAndStartAt). The epoch cache is
// cleared, the cleaner point forgets everything, the recovery point is
// offset; a new generation starts, so that every earlier append counts as
// cut (Survived, FlushAppended: ErrCut). Readers holding Slices keep
// reading the old files; the next Read sees the empty log. It returns once
// the new log is durable.
//
// Crash safe: the reset file, written atomically, is its commit point. A
// crash before it leaves the old log; after it, Open finishes the reset.
// An error before the commit point changes nothing and leaves the log
// healthy; one after it fails the log, and the recovery finishes the reset.
// offset < 0 is ErrOffsetOutOfRange; a closed log is ErrClosed and a failed
// one returns its error (it recovers first).
func (l *Log) Reset(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: reset to %d", ErrOffsetOutOfRange, offset)
	}
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
	if err := l.touchLocked(); err != nil {
		return err
	}
	if committed, err := l.writeResetFile(offset); err != nil {
		if committed {
			return l.fail(err)
		}
		return err
	}
	return l.resetLocked(offset)
}

// resetLocked restarts the log empty at offset once the reset file is
// durable. The old segments stay published until the new one is: their
// files go by name, their open handles keep serving readers, and a failure
// on the way leaves them to the recovery (which finishes the reset) as any
// failure does. appendMu and syncMu held.
func (l *Log) resetLocked(offset int64) error {
	old := l.segments()
	for _, o := range old {
		if err := o.Hold(); err != nil { // Slices of it read its old files
			return l.fail(err)
		}
	}
	born := l.cfg.Clock.Now().UnixMilli()
	if err := l.finishReset(offset, born); err != nil {
		return l.fail(err)
	}
	s, _, err := segment.Open(l.fs, l.dir, offset, segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes}, segment.Recover, -1)
	if err != nil {
		return l.fail(fmt.Errorf("partlog: reset: %w", err))
	}
	l.recordCut(-1) // before the new end is published: every record went
	l.logStart.Store(offset)
	l.setSegments([]*segment.Segment{s})
	for _, o := range old {
		o.Drop() // its files are gone: Slices of it keep them
	}
	l.activeBorn.Store(born)
	var none []EpochEntry
	l.epochs.Store(&none)
	l.cleaned.Store(&cleanHistory{})
	l.cleanUnsaved.Store(false)
	l.statMu.Lock()
	l.end.Store(offset)
	l.flushed.Store(offset)
	l.unMsgs, l.unBytes = 0, 0
	if l.timer != nil {
		l.timer.Stop()
		l.timer, l.timerAt = nil, time.Time{}
	}
	l.statMu.Unlock()
	l.syncCount.Add(1)
	l.wake() // long polls look again: the log moved
	// The reset file goes last, once the layer above dropped its state
	// about the old log: until then a crash (or a failure here) makes the
	// next load finish the reset and call AfterCut again.
	if err := l.afterCut(-1); err != nil {
		return l.fail(err)
	}
	if err := l.removeResetFile(); err != nil {
		return l.fail(err)
	}
	return nil
}

// finishReset makes the files of the log restarted empty at offset, the
// reset file in place: every segment file and what the cleaner or a
// recovery left goes, then a new empty segment at offset is created and
// fsynced, and the epoch checkpoint (empty), the cleaner point (never
// cleaned) and the recovery point (offset, active segment offset created at
// born) are written, each durably. Every step may be repeated: a crash in
// between is finished by the next load. Nothing is published.
func (l *Log) finishReset(offset, born int64) error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	for _, n := range names {
		_, _, seg := segment.ParseName(strings.TrimSuffix(n, cleanerTag(n)))
		switch {
		case n == freshTailDir:
			err = l.fs.RemoveAll(l.path(n))
		case seg:
			err = l.fs.Remove(l.path(n))
		default:
			continue
		}
		if err != nil && !errors.Is(err, errNotExist) {
			return fmt.Errorf("partlog: reset: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	s, err := segment.Create(l.fs, l.dir, offset, segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes})
	if err != nil {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	if err := s.Close(); err != nil { // seals: fsyncs the log and both indexes
		return fmt.Errorf("partlog: reset: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	if err := l.writeEpochCheckpoint(nil); err != nil {
		return err
	}
	if err := l.writeCleanHistory(&cleanHistory{}); err != nil {
		return err
	}
	if err := l.writeLogStart(offset); err != nil {
		return err
	}
	return l.writeRecoveryPoint(offset, offset, born)
}

// writeResetFile writes the reset file durably. committed reports that it
// may be there even though an error came back (the rename happened): the
// reset must then be finished.
func (l *Log) writeResetFile(offset int64) (committed bool, err error) {
	tmp := l.path(resetFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return false, fmt.Errorf("partlog: reset: %w", err)
	}
	num := strconv.FormatInt(offset, 10)
	_, err = f.Write([]byte("v1 " + num + " " + checksum(num) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		if err = l.fs.Rename(tmp, l.path(resetFile)); err != nil {
			if _, serr := l.fs.Stat(l.path(resetFile)); serr == nil {
				return true, fmt.Errorf("partlog: reset: %w", err)
			}
		}
	}
	if err != nil {
		_ = l.fs.Remove(tmp) // best effort: the next write replaces it
		return false, fmt.Errorf("partlog: reset: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return true, fmt.Errorf("partlog: reset: %w", err)
	}
	return true, nil
}

// readResetFile returns the offset of a Reset past its commit point, ok
// false when there is none. A file that does not parse (it is written
// atomically, so only damage makes one) is logged and counts as none: the
// segments as they are are the log.
func (l *Log) readResetFile() (offset int64, ok bool, err error) {
	f, err := l.fs.Open(l.path(resetFile))
	if errors.Is(err, errNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("partlog: reset: %w", err)
	}
	defer f.Close()
	b := make([]byte, 64)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("partlog: reset: %w", err)
	}
	fields := strings.Fields(string(b[:n]))
	if len(fields) == 3 && fields[0] == "v1" && fields[2] == checksum(fields[1]) {
		if offset, err := strconv.ParseInt(fields[1], 10, 64); err == nil && offset >= 0 {
			return offset, true, nil
		}
	}
	l.cfg.Logger.Warn("partition log: damaged reset file ignored", "path", l.path(resetFile), "content", string(b[:n]))
	if err := l.removeResetFile(); err != nil {
		return 0, false, err
	}
	return 0, false, nil
}

// removeResetFile removes the reset file, durably: the reset is done.
func (l *Log) removeResetFile() error {
	if err := l.fs.Remove(l.path(resetFile)); err != nil && !errors.Is(err, errNotExist) {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: reset: %w", err)
	}
	return nil
}

// afterCut tells Config.CutHook, if set, of the log's new end (-1: no
// record of the old log remains).
func (l *Log) afterCut(end int64) error {
	if err := l.clampLogStart(end); err != nil {
		return err
	}
	if l.cfg.CutHook == nil {
		return nil
	}
	if err := l.cfg.CutHook.AfterCut(end); err != nil {
		return fmt.Errorf("partlog: after a cut to %d: %w", end, err)
	}
	return nil
}
