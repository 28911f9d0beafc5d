package partlog

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/weir-broker/weir/core/segment"
)

// NoLimit as Read's maxOffset reads up to the log end.
const NoLimit = math.MaxInt64

// Slice is a range of whole batches in one segment file; see segment.Slice.
// Release it when done.
type Slice = segment.Slice

// Read returns whole batches starting with the one that contains offset: as
// many as fit in maxBytes but at least one, all from one segment, and none
// reaching maxOffset (the high watermark; NoLimit for the log end). Reading at
// the log end (or at maxOffset) returns an empty Slice and no error; below the
// log start or past the end is ErrOffsetOutOfRange; a closed log is ErrClosed.
// It never blocks appends.
//
// The batches' first offset may be below offset (a batch is never split), as
// Kafka's fetch does; consumers skip the records they did not ask for.
func (l *Log) Read(offset, maxBytes, maxOffset int64) (Slice, error) {
	return l.read(offset, maxBytes, maxOffset, (*segment.Segment).Read)
}

// TryRead is Read, except that it fails with filecache.ErrBudget rather
// than open a segment file past the descriptor budget (Config.Files) when
// every file open there is held by a reader: for a reader that can answer
// with less (a fetch of many partitions stops there).
func (l *Log) TryRead(offset, maxBytes, maxOffset int64) (Slice, error) {
	return l.read(offset, maxBytes, maxOffset, (*segment.Segment).TryRead)
}

func (l *Log) read(offset, maxBytes, maxOffset int64, readSeg func(*segment.Segment, int64, int64, int64) (segment.Slice, error)) (Slice, error) {
	seq := l.recoverSeq.Load()
	for attempt := 0; ; attempt++ {
		if l.closed.Load() {
			return Slice{}, ErrClosed
		}
		end := l.EndOffset()
		list := l.segs.Load()
		segs := *list
		if start := l.startIn(segs); offset < start || offset > end {
			return Slice{}, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, start, end)
		}
		limit := min(maxOffset, end)
		if offset >= limit {
			return Slice{}, nil
		}
		i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() > offset }) - 1
		for ; i < len(segs); i++ {
			sl, err := readSeg(segs[i], offset, maxBytes, limit)
			switch {
			case err == nil:
				return sl, nil
			case errors.Is(err, segment.ErrNotFound):
				if segs[i].NextOffset() >= limit {
					return Slice{}, nil // the next batch reaches past maxOffset
				}
				continue // offset is at this segment's end: try the next one
			case errors.Is(err, segment.ErrNotAsVouched) && attempt < 3:
				// A lazily opened segment is not what the clean
				// shutdown said: recover the log from its files, as
				// after a crash, and look again.
				_ = l.fail(err)
				if _, rerr := l.Recover(); rerr != nil {
					return Slice{}, fmt.Errorf("partlog: read %d: %w", offset, errors.Join(err, rerr))
				}
			case (seq%2 == 1 || l.recoverSeq.Load() != seq || l.segs.Load() != list) && attempt < 5:
				// A recovery ran (or runs) and may have cut the file
				// under this segment's reader: once it is done, look
				// again.
				l.awaitRecovery()
				seq = l.recoverSeq.Load()
			default:
				return Slice{}, fmt.Errorf("partlog: read %d: %w", offset, err)
			}
			break // retention or a recovery replaced the segment under us: look again
		}
		if i == len(segs) {
			return Slice{}, nil
		}
	}
}

// OffsetForTimestamp returns the offset of the first batch holding a record
// with timestamp >= ts, and false when there is none (Kafka then answers with
// the log end). Like Read, it looks again when a recovery (or retention)
// closed a segment under it, instead of skipping that segment.
func (l *Log) OffsetForTimestamp(ts int64) (int64, bool, error) {
	for attempt := 0; ; attempt++ {
		if l.closed.Load() {
			return 0, false, ErrClosed
		}
		seq := l.recoverSeq.Load()
		off, found, err := l.offsetForTimestamp(ts)
		raced := seq%2 == 1 || l.recoverSeq.Load() != seq
		switch {
		case (raced || errors.Is(err, segment.ErrClosed)) && attempt < 5:
			l.awaitRecovery()
			continue
		case errors.Is(err, segment.ErrClosed) && l.closed.Load():
			return 0, false, ErrClosed
		case err != nil:
			return 0, false, fmt.Errorf("partlog: %w", err)
		}
		return off, found, nil
	}
}

// offsetForTimestamp is one look through the current segments.
func (l *Log) offsetForTimestamp(ts int64) (int64, bool, error) {
	for _, s := range l.segments() {
		if s.MaxTimestamp() < ts {
			continue
		}
		off, err := s.OffsetForTimestamp(ts)
		if errors.Is(err, segment.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		return off, true, nil
	}
	return 0, false, nil
}
