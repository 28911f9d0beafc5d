package partlog

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/segment"
)

// The explicit log start offset (Kafka's logStartOffset, moved by
// DeleteRecords); see "Log start offset" in the package doc.

// logStartFile holds the explicit log start offset, one line:
//
//	v1 <offset> <crc32 of the offset>
//
// Absent (or damaged: it is written atomically, so only damage makes one),
// the log starts at its first segment's base.
const logStartFile = "log-start-offset"

// DeleteRecordsBefore moves the log start offset up to offset (Kafka's
// DeleteRecords, deleteRecordsOnLeader): records below it are no longer
// served (Read is ErrOffsetOutOfRange below StartOffset), ListOffsets'
// earliest answers it, and the segments wholly below it go at once (those
// already durable; retention takes the others later). It returns the log
// start after the call, which is offset or, when the log already starts at
// or past it, the start as it is (nothing changes).
//
// offset must lie in [0, log end]: otherwise ErrOffsetOutOfRange. The caller
// bounds it further (Kafka refuses an offset past the high watermark). The
// new start is durable (the log-start-offset file, written atomically)
// before it is published, so it survives a restart; a failure to write it
// changes nothing and returns the error, leaving the log healthy. A
// closed log is ErrClosed, a failed one returns its error.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	// fileMu first, as retention: a cleaner's swap must not rename or
	// delete the files of the segments this deletes.
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if err := l.Err(); err != nil {
		return 0, err
	}
	if end := l.end.Load(); offset < 0 || offset > end {
		return 0, fmt.Errorf("%w: delete records before %d: the log ends at %d", ErrOffsetOutOfRange, offset, end)
	}
	if start := l.StartOffset(); offset <= start {
		return start, nil
	}
	if err := l.touchLocked(); err != nil {
		return 0, err
	}
	if err := l.writeLogStart(offset); err != nil {
		return 0, err
	}
	l.logStart.Store(offset)
	segs := l.segments()
	flushed := l.flushed.Load()
	n := 0
	for n < len(segs)-1 && segs[n].NextOffset() <= offset && segs[n].NextOffset() <= flushed {
		n++
	}
	if _, err := l.deleteHeadLocked(segs, n); err != nil {
		return offset, err
	}
	return offset, nil
}

// deleteHeadLocked deletes the first n segments of segs (the published
// list; never the active one): readers stop finding them first, then their
// files go, and the epoch cache's first epoch moves to the new first
// segment's base. It returns the bases deleted. fileMu, appendMu and syncMu held,
// the log touched.
func (l *Log) deleteHeadLocked(segs []*segment.Segment, n int) ([]int64, error) {
	if n == 0 {
		return nil, nil
	}
	l.setSegments(segs[n:])
	deleted := make([]int64, 0, n)
	for _, s := range segs[:n] {
		if err := s.Delete(); err != nil {
			return deleted, l.fail(err)
		}
		deleted = append(deleted, s.Base())
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return deleted, l.fail(fmt.Errorf("partlog: %w", err))
	}
	// The epoch covering the new start now starts there. A crash before
	// this is put right by the next load, which trims the same way.
	if es, changed := epochsFrom(l.epochList(), segs[n].Base()); changed {
		if err := l.writeEpochCheckpoint(es); err != nil {
			return deleted, l.fail(err)
		}
		l.epochs.Store(&es)
	}
	return deleted, nil
}

// startIn is the log start given the published segments segs: the
// explicit log start offset when it lies past the first segment's base.
func (l *Log) startIn(segs []*segment.Segment) int64 {
	return max(segs[0].Base(), l.logStart.Load())
}

// loadLogStart reads the log-start-offset file into memory (0 when there
// is none, or it is damaged: the first segment's base is then the start).
func (l *Log) loadLogStart() {
	off, ok := l.readLogStart()
	if !ok {
		off = 0
	}
	l.logStart.Store(off)
}

// clampLogStart brings the explicit log start down to end when a cut left
// the log ending below it (Kafka's truncateTo: logStartOffset =
// min(logStartOffset, targetOffset)), file first, so that records appended
// at the cut offsets are served. appendMu held.
func (l *Log) clampLogStart(end int64) error {
	if end < 0 || l.logStart.Load() <= end {
		return nil
	}
	if err := l.writeLogStart(end); err != nil {
		return err
	}
	l.logStart.Store(end)
	return nil
}

// writeLogStart replaces the log-start-offset file atomically and durably.
func (l *Log) writeLogStart(offset int64) error {
	tmp := l.path(logStartFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partlog: log start offset: %w", err)
	}
	num := strconv.FormatInt(offset, 10)
	_, err = f.Write([]byte("v1 " + num + " " + checksum(num) + "\n"))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		_ = l.fs.Remove(tmp) // best effort: the next write replaces it
		return fmt.Errorf("partlog: log start offset: %w", err)
	}
	if err := l.fs.Rename(tmp, l.path(logStartFile)); err != nil {
		return fmt.Errorf("partlog: log start offset: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: log start offset: %w", err)
	}
	return nil
}

// readLogStart returns the offset the log-start-offset file holds, false
// when there is none or it does not parse (logged).
func (l *Log) readLogStart() (int64, bool) {
	f, err := l.fs.Open(l.path(logStartFile))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		l.cfg.Logger.Warn("partition log: log start offset unreadable, starting at the first segment", "path", l.path(logStartFile), "err", err)
		return 0, false
	}
	fields := strings.Fields(string(b[:n]))
	if len(fields) == 3 && fields[0] == "v1" && fields[2] == checksum(fields[1]) {
		if off, err := strconv.ParseInt(fields[1], 10, 64); err == nil && off >= 0 {
			return off, true
		}
	}
	l.cfg.Logger.Warn("partition log: damaged log start offset ignored", "path", l.path(logStartFile), "content", string(b[:n]))
	return 0, false
}
