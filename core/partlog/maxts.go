package partlog

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// MaxTimestamp finds the batch holding the log's largest record timestamp
// at or past the log start (Kafka's ListOffsets MAX_TIMESTAMP, KIP-734):
// the first such batch in log order, its header, and ok false when no
// record has a timestamp (an empty log). Each segment knows its largest
// timestamp, so one segment's batch headers are read. Like OffsetForTimestamp
// it looks again when a recovery or retention closed a segment under it.
func (l *Log) MaxTimestamp() (h record.Header, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		if l.closed.Load() {
			return record.Header{}, false, ErrClosed
		}
		seq := l.recoverSeq.Load()
		h, ok, err = l.maxTimestamp()
		raced := seq%2 == 1 || l.recoverSeq.Load() != seq
		switch {
		case (raced || errors.Is(err, segment.ErrClosed)) && attempt < 5:
			l.awaitRecovery()
			continue
		case err != nil:
			return record.Header{}, false, fmt.Errorf("partlog: max timestamp: %w", err)
		}
		return h, ok, nil
	}
}

func (l *Log) maxTimestamp() (record.Header, bool, error) {
	segs := l.segments()
	start, end := l.startIn(segs), l.EndOffset()
	var best *segment.Segment
	bestTs := int64(segment.NoTimestamp)
	for _, s := range segs {
		if s.NextOffset() <= start {
			continue
		}
		if ts := s.MaxTimestamp(); ts != segment.NoTimestamp && (best == nil || ts > bestTs) {
			best, bestTs = s, ts
		}
	}
	if best == nil {
		return record.Header{}, false, nil
	}
	var found record.Header
	ok := false
	err := best.Headers(func(_ int64, h record.Header) bool {
		if h.BaseOffset >= end {
			return false
		}
		if h.LastOffset() >= start && h.MaxTimestamp == bestTs {
			found, ok = h, true
			return false
		}
		return true
	})
	return found, ok, err
}
