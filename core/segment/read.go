package segment

import (
	"fmt"
	"io"
	"sync"

	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/index"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// Slice is a byte range of whole batches in a segment's log file, for the
// network layer to send (with sendfile when File is a vfs.OSFiler) or copy.
// It holds a reference on the segment and keeps the file open (a
// filecache pin): call Release when done with it.
type Slice struct {
	File        vfs.File // the segment's log file, open; read [Pos, Pos+Size)
	Pos         int64
	Size        int64
	FirstOffset int64 // base offset of the first batch
	NextOffset  int64 // offset after the last batch
	seg         *Segment
}

// Release drops the Slice's reference on its segment and its pin on the
// file. Safe on a zero Slice and idempotent on one Slice value; a copy of a
// Slice shares the same reference, so release only one of them.
func (sl *Slice) Release() {
	if sl.seg != nil {
		sl.seg.log.Unpin()
		sl.seg.release()
		sl.seg = nil
	}
}

// Bytes copies the slice's bytes out of the file (the copy path, for file
// systems that cannot sendfile, and for tests).
func (sl *Slice) Bytes() ([]byte, error) {
	b := make([]byte, sl.Size)
	if n, err := sl.File.ReadAt(b, sl.Pos); n != len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("segment: read %s: %w", sl.File.Name(), err)
	}
	return b, nil
}

// A header scan reads through a window: up to headerWindow bytes at once while
// batches are small, so many headers come with one pread, but only the header
// itself once batches are large, so finding the boundaries of big batches does
// not copy their bodies. The first read of a scan covers about one index
// interval, which is where a lookup's answer lies.
const (
	headerWindow = 32 << 10
	bigBatch     = 4 << 10
)

var windowPool = sync.Pool{New: func() any { b := make([]byte, headerWindow); return &b }}

// headers reads batch headers from a log file through a window.
type headers struct {
	f     vfs.File
	limit int64 // bytes of the file that may be read
	buf   *[]byte
	win   []byte // valid bytes of buf
	off   int64  // file position of win[0]
	chunk int64  // how much the next refill reads
}

func newHeaders(f vfs.File, limit int64, first int64) *headers {
	return &headers{f: f, limit: limit, buf: windowPool.Get().(*[]byte), chunk: min(max(first, record.HeaderSize), headerWindow)}
}

func (h *headers) close() { windowPool.Put(h.buf); h.buf = nil }

// at parses the header of the batch at pos. A header that does not fit before
// limit is record.ErrShort.
func (h *headers) at(pos int64) (record.Header, error) {
	if pos+record.HeaderSize > h.limit {
		return record.Header{}, fmt.Errorf("segment: header at %d past %d: %w", pos, h.limit, record.ErrShort)
	}
	if pos < h.off || pos+record.HeaderSize > h.off+int64(len(h.win)) {
		n := min(h.chunk, h.limit-pos)
		b := (*h.buf)[:n]
		if m, err := h.f.ReadAt(b, pos); int64(m) != n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			h.win = nil
			return record.Header{}, fmt.Errorf("segment: read %s at %d: %w", h.f.Name(), pos, err)
		}
		h.win, h.off = b, pos
	}
	hd, err := record.ParseHeader(h.win[pos-h.off:])
	if err == nil {
		if hd.Size() >= bigBatch {
			h.chunk = record.HeaderSize
		} else {
			h.chunk = headerWindow
		}
	}
	return hd, err
}

// locate finds the batch containing offset, scanning from the greatest index
// entry at or below it. size bounds the scan.
func (s *Segment) locate(hr *headers, offset int64) (int64, record.Header, error) {
	var pos int64
	if e, ok := s.offsets.Lookup(uint32(offset - s.base)); ok {
		pos = int64(e.Position)
	}
	for pos < hr.limit {
		h, err := hr.at(pos)
		if err != nil {
			return 0, record.Header{}, err
		}
		if h.NextOffset() > offset {
			return pos, h, nil
		}
		pos += int64(h.Size())
	}
	return 0, record.Header{}, ErrNotFound
}

// Read returns the batches starting with the one that contains offset, as many
// whole batches as fit in maxBytes, but always at least one, and none that
// reaches past maxOffset (the high watermark). ErrNotFound when offset is not
// below both the segment's end and maxOffset, or when the batch holding it
// reaches past maxOffset. Call Release on the Slice exactly once: copies of a
// Slice share its one reference.
func (s *Segment) Read(offset int64, maxBytes int64, maxOffset int64) (Slice, error) {
	return s.read(offset, maxBytes, maxOffset, true)
}

// TryRead is Read, except that it fails with filecache.ErrBudget rather
// than open the log file past the descriptor budget of Options.Files when
// every file open there is held by a reader: for a reader that can answer
// with less (a fetch of many partitions).
func (s *Segment) TryRead(offset int64, maxBytes int64, maxOffset int64) (Slice, error) {
	return s.read(offset, maxBytes, maxOffset, false)
}

func (s *Segment) read(offset int64, maxBytes int64, maxOffset int64, must bool) (Slice, error) {
	if err := s.ensure(); err != nil {
		return Slice{}, err
	}
	next := s.next.Load()
	size := s.size.Load()
	if offset >= next || offset >= maxOffset {
		return Slice{}, ErrNotFound
	}
	if offset < s.base {
		offset = s.base
	}
	if !s.acquire() {
		return Slice{}, ErrClosed
	}
	f, err := s.log.Pin(must)
	if err != nil {
		s.release()
		if filecache.IsClosed(err) || s.retired.Load() {
			// Closed or deleted since acquire: its owner's list moved on.
			err = ErrClosed
		}
		return Slice{}, fmt.Errorf("segment %d: %w", s.base, err)
	}
	hr := newHeaders(f, size, 2*s.opts.IndexIntervalBytes)
	defer hr.close()
	pos, h, err := s.locate(hr, offset)
	if err != nil {
		s.log.Unpin()
		s.release()
		return Slice{}, err
	}
	if h.NextOffset() > maxOffset {
		s.log.Unpin()
		s.release()
		return Slice{}, ErrNotFound
	}
	sl := Slice{File: f, Pos: pos, Size: int64(h.Size()), FirstOffset: h.BaseOffset, NextOffset: h.NextOffset(), seg: s}
	for end := pos + sl.Size; end < size; {
		h, err := hr.at(end)
		if err != nil {
			break // the published size only covers whole batches; be conservative anyway
		}
		n := int64(h.Size())
		if sl.Size+n > maxBytes || h.NextOffset() > maxOffset {
			break
		}
		sl.Size += n
		sl.NextOffset = h.NextOffset()
		end += n
	}
	return sl, nil
}

// OffsetForTimestamp returns the base offset of the first batch whose max
// timestamp is >= ts, or ErrNotFound. Batch granularity: the batch may hold
// earlier records too, as Kafka's answer for compressed batches does.
func (s *Segment) OffsetForTimestamp(ts int64) (int64, error) {
	if err := s.ensure(); err != nil {
		return 0, err
	}
	next := s.next.Load()
	size := s.size.Load()
	if s.maxTs.Load() < ts || next == s.base {
		return 0, ErrNotFound
	}
	if !s.acquire() {
		return 0, ErrClosed
	}
	defer s.release()
	var pos int64
	if e, ok := s.times.Lookup(ts); ok {
		if int64(e.RelOffset) >= next-s.base {
			return 0, ErrNotFound
		}
		if oe, ok := s.offsets.Lookup(e.RelOffset); ok {
			pos = int64(oe.Position)
		}
	}
	hr := newHeaders(s.log, size, 2*s.opts.IndexIntervalBytes)
	defer hr.close()
	for pos < size {
		h, err := hr.at(pos)
		if err != nil {
			return 0, err
		}
		if h.MaxTimestamp >= ts {
			return h.BaseOffset, nil
		}
		pos += int64(h.Size())
	}
	return 0, ErrNotFound
}

// Indexes exposes the segment's indexes (read-only use: tests, tools).
func (s *Segment) Indexes() (*index.Offsets, *index.Times) {
	_ = s.ensure()
	return s.offsets, s.times
}

// Headers calls fn with the position and header of every batch of the
// segment up to its published end, in order, until fn returns false. It
// reads through the same window as Read, so where batches are large it
// reads little more than their headers; it checks neither CRCs nor records.
// A header that does not parse ends the walk with its error (record.ErrCorrupt).
// ErrClosed once the segment is closed or deleted.
func (s *Segment) Headers(fn func(pos int64, h record.Header) bool) error {
	if err := s.ensure(); err != nil {
		return err
	}
	size := s.size.Load()
	if !s.acquire() {
		return ErrClosed
	}
	defer s.release()
	hr := newHeaders(s.log, size, headerWindow)
	defer hr.close()
	for pos := int64(0); pos < size; {
		h, err := hr.at(pos)
		if err != nil {
			return fmt.Errorf("segment %d: batch at %d: %w", s.base, pos, err)
		}
		if !fn(pos, h) {
			return nil
		}
		pos += int64(h.Size())
	}
	return nil
}
