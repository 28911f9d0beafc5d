package partlog

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// What a pass does with each batch, and how the cleaned segment keeps every
// offset covered; see "Compaction" in the package doc.

// cleanSegment hands every batch of s, cleaned, to w.
func (c *cleaner) cleanSegment(ctx context.Context, s *segment.Segment, w *cleanWriter) error {
	return c.eachBatch(ctx, s, func(b []byte, h record.Header, _ int64) error {
		return c.cleanBatch(s, b, h, w)
	})
}

func (c *cleaner) cleanBatch(s *segment.Segment, b []byte, h record.Header, w *cleanWriter) error {
	switch {
	case h.Control():
		return w.keep(b, h, false) // a transaction marker: as it is
	case h.Transactional():
		// Whether its transaction committed is not known here (no
		// transaction index yet), so nothing in it may supersede or be
		// superseded.
		return c.keepWhole(b, h, w)
	case h.RecordCount == 0:
		return c.cleanEmpty(s, b, h, w, true)
	}
	section, readable, rewritable, err := c.section(b, h)
	if err != nil {
		return err
	}
	if !readable {
		return c.keepWhole(b, h, w)
	}
	c.raw = c.raw[:0]
	var kept, tombs int32
	err = record.ForEach(h, section, func(r *record.Record, raw []byte) error {
		drop, tomb := c.drop(h.BaseOffset+int64(r.OffsetDelta), r)
		if !drop {
			c.raw = append(c.raw, raw...)
			kept++
		} else if tomb {
			tombs++
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case kept == h.RecordCount:
		c.res.RecordsKept += int64(kept)
		return c.keep(w, b, h, section, rewritable, false)
	case kept == 0:
		c.res.RecordsRemoved += int64(h.RecordCount)
		c.res.TombstonesRemoved += int64(tombs)
		return c.cleanEmpty(s, b, h, w, false)
	case !rewritable:
		return c.keepWhole(b, h, w)
	}
	nh := h
	nh.RecordCount = kept
	out, err := c.encode(c.out[:0], nh, c.raw)
	if err != nil {
		return err
	}
	c.out = out
	if len(out) >= len(b) {
		return c.keepWhole(b, h, w) // the codec does worse than the producer's did
	}
	c.res.RecordsKept += int64(kept)
	c.res.RecordsRemoved += int64(h.RecordCount - kept)
	c.res.TombstonesRemoved += int64(tombs)
	return c.keep(w, out, reparse(out), c.raw, true, true)
}

// encode appends to dst a batch with header h over the uncompressed records
// section raw, compressed under h's codec.
func (c *cleaner) encode(dst []byte, h record.Header, raw []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, record.HeaderSize)...)
	if codec := h.Codec(); codec != record.CodecNone {
		comp, err := c.o.Compress(codec, raw)
		if err != nil {
			return dst[:start], fmt.Errorf("partlog: clean: compress %s: %w", codec, err)
		}
		raw = comp
	}
	if int64(len(raw)) > math.MaxInt32-record.HeaderSize {
		return dst[:start], fmt.Errorf("partlog: clean: batch at %d of %d bytes", h.BaseOffset, len(raw))
	}
	dst = append(dst, raw...)
	record.PutHeader(dst[start:], h)
	return dst, nil
}

// keep hands w a batch the pass keeps, b with header h and uncompressed
// records section section (when rewritable: the section may be re-encoded),
// lowering its base offset over the gap before it when it can (see
// cleanWriter).
func (c *cleaner) keep(w *cleanWriter, b []byte, h record.Header, section []byte, rewritable, changed bool) error {
	if g := w.gap; g.open && rewritable && w.canLower(h) {
		lb, err := c.lower(h, section, g)
		if err != nil {
			return err
		}
		// Records' offset deltas grow with the shift, a few bytes each:
		// by no more than the batches of no records it saves, which the
		// writer's size counts (so the segment stays within its bound).
		if lb != nil && int64(len(lb)-len(b)) <= record.HeaderSize*g.fillers() {
			return w.keepLowered(lb, reparse(lb))
		}
	}
	return w.keep(b, h, changed)
}

// lower re-encodes batch h (its records section uncompressed in section) to
// start at g.start, covering gap g: every record's offset delta grows by
// the shift.
func (c *cleaner) lower(h record.Header, section []byte, g cleanGap) ([]byte, error) {
	shift := h.BaseOffset - g.start
	c.shifted = c.shifted[:0]
	err := record.ForEach(h, section, func(r *record.Record, raw []byte) error {
		var err error
		c.shifted, err = record.AppendWithOffsetDelta(c.shifted, raw, r.OffsetDelta+int32(shift))
		return err
	})
	if err != nil {
		return nil, err
	}
	nh := h
	nh.BaseOffset, nh.LastOffsetDelta = g.start, h.LastOffsetDelta+int32(shift)
	if h.TimestampType() == record.CreateTime {
		nh.MaxTimestamp = max(h.MaxTimestamp, g.maxTs) // the segment keeps its largest timestamp
	}
	out, err := c.encode(c.lowered[:0], nh, c.shifted)
	if err != nil {
		return nil, err
	}
	c.lowered = out
	return out, nil
}

// drop decides a record's fate: it goes if the map holds a later offset for
// its key (superseded), or if it is a tombstone whose time is up.
func (c *cleaner) drop(off int64, r *record.Record) (drop, tombstone bool) {
	if r.Key == nil {
		return false, false
	}
	if latest, ok := c.keys.latest(r.Key); ok && latest > off {
		return true, false
	}
	if r.Value != nil || c.opaque || off >= c.dirtyStart {
		return false, false
	}
	at, ok := c.plan.hist.firstCleaned(off)
	if !ok || at > c.now.Add(-c.o.DeleteRetention).UnixMilli() {
		return false, false
	}
	return true, true
}

// keepWhole keeps a batch byte for byte although the pass could not (or
// would not) drop what it should from it: from here on no tombstone is
// removed, since one could hide a value in it.
func (c *cleaner) keepWhole(b []byte, h record.Header, w *cleanWriter) error {
	c.opaque = true
	c.res.RecordsKept += int64(h.RecordCount)
	return w.keep(b, h, false)
}

// cleanEmpty handles a batch with no records left (or none to begin with,
// wasEmpty: one an earlier pass left). An idempotent producer's last batch
// in the segment stays, as a batch of no records with its offsets and
// sequence numbers, so that the producer's state can still be read from
// the log (as Kafka keeps it); any other goes, its offsets covered as
// cleanWriter says.
func (c *cleaner) cleanEmpty(s *segment.Segment, b []byte, h record.Header, w *cleanWriter, wasEmpty bool) error {
	if h.ProducerID < 0 {
		return w.drop(b, h, wasEmpty)
	}
	last, err := c.lastOfProducer(s, h.ProducerID)
	if err != nil {
		return err
	}
	if last != h.BaseOffset {
		return w.drop(b, h, wasEmpty)
	}
	if wasEmpty && h.Codec() == record.CodecNone && h.Size() == record.HeaderSize {
		return w.keep(b, h, false)
	}
	eh := h
	eh.RecordCount, eh.Attributes = 0, record.WithCodec(h.Attributes, record.CodecNone)
	var out [record.HeaderSize]byte
	record.PutHeader(out[:], eh)
	return w.keep(out[:], reparse(out[:]), true)
}

// lastOfProducer returns the base offset of producer pid's last batch in s.
func (c *cleaner) lastOfProducer(s *segment.Segment, pid int64) (int64, error) {
	if c.lastSeg != s {
		c.lastOf = map[int64]int64{}
		err := s.Headers(func(_ int64, h record.Header) bool {
			if h.ProducerID >= 0 {
				c.lastOf[h.ProducerID] = h.BaseOffset
			}
			return true
		})
		if err != nil {
			c.lastSeg = nil
			return 0, fmt.Errorf("partlog: clean: %w", err)
		}
		c.lastSeg = s
	}
	return c.lastOf[pid], nil
}

func reparse(b []byte) record.Header {
	h, err := record.ParseHeader(b)
	if err != nil {
		panic(fmt.Sprintf("partlog: clean: wrote a bad header: %v", err)) // PutHeader's output always parses
	}
	return h
}

// cleanWriteChunk is how many bytes of batches the writer gathers before it
// appends them to the new segment.
const cleanWriteChunk = 1 << 20

// cleanWriter writes one cleaned segment. Batches come in offset order, each
// kept or dropped; the offsets of the batches dropped form a gap, which must
// be covered, because every batch must start where the previous one ended
// (segment.Open and recovery rely on it, as do readers):
//
//   - by the batch after the gap, whose base offset is lowered to the gap's
//     start (its records' offset deltas raised by as much), when it has no
//     producer id (an idempotent batch's offsets are tied to its sequence
//     numbers) and no control bit, the gap's leader epoch, and, under
//     LogAppendTime, a timestamp the gap does not exceed; then a read at an
//     offset of the gap is served the batch holding the next record kept,
//     and Truncate at one (which drops the batch covering it) drops only
//     records at or past it;
//   - otherwise, and at the end of the segment, by batches of no records
//     (producer id -1) spanning the gap, with its epoch and largest
//     timestamp.
//
// A gap breaks where the leader epoch changes, so that every offset keeps
// the epoch it was written in. Raising the lastOffsetDelta of the batch
// before the gap would cover it too, but would put records below an offset
// into the batch covering it: Truncate there would drop them, and a read
// there would be served nothing at or past it.
type cleanWriter struct {
	seg     *segment.Segment
	next    int64 // the offset the next batch handed in starts at
	outNext int64 // the offset the next batch written must start at
	buf     []byte
	hs      []record.Header
	gap     cleanGap
	changed bool // the output differs from the input
	// throttle, when set, is called before each write (CleanOptions.Throttle).
	throttle func(n int) error
}

type cleanGap struct {
	open       bool
	start, end int64
	epoch      int32
	maxTs      int64
	filler     []byte // its only batch, when that was an empty batch (it may come out the same)
}

// fillers is how many batches of no records cover the gap: one per 2^31
// offsets, no more than the batches dropped into it.
func (g cleanGap) fillers() int64 {
	if !g.open {
		return 0
	}
	return (g.end - g.start + math.MaxInt32) / (math.MaxInt32 + 1)
}

// size bounds the bytes the segment will hold for what w was given so far:
// what it holds and the fillers the open gap needs. Handing w a batch adds
// no more to it than the batch's size (a batch dropped: one batch of no
// records), which is how fits bounds a segment.
func (w *cleanWriter) size() int64 {
	return w.seg.Size() + int64(len(w.buf)) + record.HeaderSize*w.gap.fillers()
}

// keep writes batch b (copied) after covering the gap before it.
func (w *cleanWriter) keep(b []byte, h record.Header, changed bool) error {
	if err := w.closeGap(); err != nil {
		return err
	}
	w.changed = w.changed || changed
	w.next = h.NextOffset()
	return w.write(b, h)
}

// keepLowered writes batch b, lowered to cover the open gap.
func (w *cleanWriter) keepLowered(b []byte, h record.Header) error {
	if !w.gap.open || h.BaseOffset != w.gap.start {
		return fmt.Errorf("lowered batch at %d does not cover the gap at %d", h.BaseOffset, w.gap.start)
	}
	w.gap = cleanGap{}
	w.changed = true
	w.next = h.NextOffset()
	return w.write(b, h)
}

// canLower tells whether batch h may be lowered over the open gap.
func (w *cleanWriter) canLower(h record.Header) bool {
	g := w.gap
	return g.open && h.ProducerID < 0 && !h.Control() && !h.Transactional() && h.PartitionLeaderEpoch == g.epoch &&
		h.BaseOffset == g.end && h.NextOffset()-1-g.start <= math.MaxInt32 &&
		(h.TimestampType() == record.CreateTime || g.maxTs <= h.MaxTimestamp)
}

// drop records that batch b (header h) goes; wasEmpty: it had no records.
func (w *cleanWriter) drop(b []byte, h record.Header, wasEmpty bool) error {
	if w.gap.open && h.PartitionLeaderEpoch != w.gap.epoch {
		if err := w.closeGap(); err != nil {
			return err
		}
	}
	if !w.gap.open {
		w.gap = cleanGap{open: true, start: h.BaseOffset, epoch: h.PartitionLeaderEpoch, maxTs: h.MaxTimestamp}
		if wasEmpty {
			w.gap.filler = append(w.gap.filler[:0], b...)
		}
	} else {
		w.gap.filler = nil
	}
	w.gap.end = h.NextOffset()
	w.gap.maxTs = max(w.gap.maxTs, h.MaxTimestamp)
	w.changed = w.changed || !wasEmpty
	w.next = h.NextOffset()
	return nil
}

// closeGap covers the open gap with batches of no records.
func (w *cleanWriter) closeGap() error {
	g := w.gap
	if !g.open {
		return nil
	}
	w.gap = cleanGap{}
	for s := g.start; s < g.end; {
		n := min(g.end-s, math.MaxInt32+1)
		var b [record.HeaderSize]byte
		record.PutHeader(b[:], record.Header{BaseOffset: s, LastOffsetDelta: int32(n - 1), PartitionLeaderEpoch: g.epoch,
			BaseTimestamp: g.maxTs, MaxTimestamp: g.maxTs,
			ProducerID: record.NoProducer, ProducerEpoch: record.NoProducer, BaseSequence: record.NoProducer})
		if !bytes.Equal(b[:], g.filler) {
			w.changed = true
		}
		if err := w.write(b[:], reparse(b[:])); err != nil {
			return err
		}
		s += n
	}
	return nil
}

// write appends batch b to the output.
func (w *cleanWriter) write(b []byte, h record.Header) error {
	if h.BaseOffset != w.outNext {
		return fmt.Errorf("cleaned batch at %d written where %d was due", h.BaseOffset, w.outNext)
	}
	if len(w.buf) >= cleanWriteChunk {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, b...)
	w.hs = append(w.hs, h)
	w.outNext = h.NextOffset()
	return nil
}

// flush appends the batches gathered to the segment.
func (w *cleanWriter) flush() error {
	if len(w.hs) == 0 {
		return nil
	}
	if w.throttle != nil {
		if err := w.throttle(len(w.buf)); err != nil {
			return fmt.Errorf("throttle: %w", err)
		}
	}
	if err := w.seg.Append(w.buf, w.hs); err != nil {
		return err
	}
	w.buf, w.hs = w.buf[:0], w.hs[:0]
	return nil
}

// finish covers the last gap and writes everything (not fsynced yet) to the
// segment, which must end at end, where the segments it replaces ended.
func (w *cleanWriter) finish(end int64) error {
	if err := w.closeGap(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	if w.next != end || w.seg.NextOffset() != end {
		return fmt.Errorf("cleaned segment %d ends at %d (input at %d), not at %d", w.seg.Base(), w.seg.NextOffset(), w.next, end)
	}
	return nil
}
