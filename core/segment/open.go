package segment

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"

	"github.com/weir-broker/weir/core/index"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

var errNotExist = fs.ErrNotExist

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Mode says how much Open believes the files it finds.
type Mode int

const (
	// Trust believes the files: a segment the recovery point covers (fsynced
	// and sealed before the crash) or any segment after a clean shutdown. Its
	// indexes are loaded and checked, and rebuilt from the log if they fail;
	// a last segment's tail after its final index entry is still re-checked.
	Trust Mode = iota
	// Recover re-reads every batch (header, offset continuity, CRC-32C),
	// truncates the log at the first bad byte and rebuilds both indexes.
	Recover
)

// Recovery reports what opening a segment found and did.
type Recovery struct {
	Batches      int   // batches checked
	Truncated    int64 // bytes cut from the end of the log file
	Cause        error // why they were cut (nil when nothing was)
	IndexRebuilt bool  // the indexes were rebuilt from the log
}

// Open opens an existing segment. end is the segment's end offset when the
// caller knows it (the base of the next segment) and -1 for the last segment of
// a log. The last segment comes back active (index files open for appends);
// the others come back sealed. A truncation is reported in Recovery, not as an
// error: errors are I/O failures, after which the segment is not usable.
func Open(fsys vfs.FS, dir string, base int64, opts Options, mode Mode, end int64) (*Segment, Recovery, error) {
	opts = opts.withDefaults()
	log, err := opts.Files.OpenNow(fsys, Name(dir, base, LogSuffix)+opts.Tag)
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("segment: %w", err)
	}
	s := newSegment(fsys, dir, base, opts, log)
	rec, err := s.open(mode, end)
	if err != nil {
		s.closeFiles()
		return nil, rec, err
	}
	return s, rec, nil
}

// ErrNotAsVouched: a lazy segment, loaded at its first use, was not what
// its owner said (its end offset or size differ, or its tail was torn):
// the owner's description of its files was wrong, and it should recover
// them as after a crash.
var ErrNotAsVouched = errors.New("segment: not as its owner described it")

// OpenLazy returns a segment its owner knows to be intact and sealed as
// it is (a clean shutdown left it so, and the owner's checkpoint says
// where it ends: next is its end offset, size its log file's size), without
// opening or reading anything: the files are opened and the indexes loaded
// (in Trust mode) at the first use that needs them (a read, an append, a
// truncation, Unseal, MaxTimestamp, Indexes, Headers). last says it is the
// last segment of its log, which comes back active once loaded. A load
// that fails, or finds the files other than described, is the error of
// that use (ErrNotAsVouched for the latter) and is tried again at the next.
// A broker of many idle partitions so starts without reading their
// segments, as Kafka loads its indexes lazily.
func OpenLazy(fsys vfs.FS, dir string, base int64, opts Options, next, size int64, last bool) *Segment {
	opts = opts.withDefaults()
	s := newSegment(fsys, dir, base, opts, opts.Files.Open(fsys, Name(dir, base, LogSuffix)+opts.Tag))
	s.next.Store(next)
	s.size.Store(size)
	s.lazyLast = last
	s.lazy.Store(true)
	return s
}

// Lazy reports whether the segment was opened lazily and not loaded yet.
func (s *Segment) Lazy() bool { return s.lazy.Load() }

// ensure loads a lazy segment, once.
func (s *Segment) ensure() error {
	if !s.lazy.Load() {
		return nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if !s.lazy.Load() {
		return nil
	}
	if s.retired.Load() {
		return ErrClosed
	}
	next, size := s.next.Load(), s.size.Load()
	end := next
	if s.lazyLast {
		end = -1
	}
	rec, err := s.open(Trust, end)
	if err == nil && (rec.Truncated > 0 || s.next.Load() != next || s.size.Load() != size) {
		err = fmt.Errorf("segment %d: %w: ends at %d with %d bytes, described as %d and %d (%v)",
			s.base, ErrNotAsVouched, s.next.Load(), s.size.Load(), next, size, rec.Cause)
	}
	if err != nil {
		s.next.Store(next)
		s.size.Store(size)
		return err
	}
	s.lazy.Store(false)
	return nil
}

func (s *Segment) open(mode Mode, end int64) (Recovery, error) {
	fileSize, err := s.log.Size()
	if err != nil {
		return Recovery{}, fmt.Errorf("segment: %w", err)
	}
	last := end < 0
	if mode == Trust {
		if err := s.loadIndexes(fileSize, end); err == nil {
			s.log.MarkSynced() // the caller vouches for it: sealed and fsynced

			if !last {
				s.size.Store(fileSize)
				s.next.Store(end)
				if e, ok := s.times.Last(); ok {
					s.maxTs.Store(e.Timestamp)
				}
				return Recovery{}, nil
			}
			// Re-check the tail after the last index entry, where a
			// crash could have left a torn batch.
			if err := s.unseal(); err != nil {
				return Recovery{}, err
			}
			s.idxFile.MarkSynced() // loaded and checked: as durable as the log
			s.timeFile.MarkSynced()
			pos, want := int64(0), s.base
			if e, ok := s.offsets.Last(); ok {
				pos, want = int64(e.Position), s.base+int64(e.RelOffset)
			}
			if e, ok := s.times.Last(); ok {
				s.maxTs.Store(e.Timestamp)
			}
			return s.recoverFrom(pos, want, fileSize)
		}
		// Damaged or missing indexes: fall through and rebuild from the log.
	}
	// Rebuild: empty indexes, fresh index files, every batch checked.
	s.offsets.Reset()
	s.times.Reset()
	if err := s.openIndexFiles(true); err != nil {
		return Recovery{}, err
	}
	rec, err := s.recoverFrom(0, s.base, fileSize)
	rec.IndexRebuilt = true
	if err != nil || last {
		return rec, err
	}
	// Keep the rebuilt indexes, sealed.
	return rec, s.seal()
}

// loadIndexes reads both index files and checks them against the log: entries
// in order (index.Load), positions and offsets inside the segment, and the last
// offset entry pointing at a batch with the offset it claims.
func (s *Segment) loadIndexes(fileSize, end int64) error {
	read := func(suffix string, load func(vfs.File) error) error {
		f, err := s.fs.Open(s.name(suffix))
		if err != nil {
			return err
		}
		defer f.Close()
		return load(f)
	}
	var offs *index.Offsets
	var times *index.Times
	if err := read(IndexSuffix, func(f vfs.File) (err error) { offs, err = index.LoadOffsets(f); return }); err != nil {
		return err
	}
	if err := read(TimeIndexSuffix, func(f vfs.File) (err error) { times, err = index.LoadTimes(f); return }); err != nil {
		return err
	}
	maxRel := int64(math.MaxUint32)
	if end >= 0 {
		maxRel = end - s.base
	}
	if e, ok := offs.Last(); ok {
		if int64(e.Position) >= fileSize || int64(e.RelOffset) >= maxRel {
			return fmt.Errorf("%w: offset entry %+v outside segment", index.ErrCorrupt, e)
		}
		hr := newHeaders(s.log, fileSize, record.HeaderSize)
		h, err := hr.at(int64(e.Position))
		hr.close()
		if err != nil || h.BaseOffset != s.base+int64(e.RelOffset) {
			return fmt.Errorf("%w: offset entry %+v does not point at its batch", index.ErrCorrupt, e)
		}
	}
	if e, ok := times.Last(); ok && int64(e.RelOffset) > maxRel {
		return fmt.Errorf("%w: time entry %+v outside segment", index.ErrCorrupt, e)
	}
	if end >= 0 && end > s.base {
		if _, ok := times.Last(); !ok && fileSize > 0 {
			// A sealed, non-empty segment ends with a time entry, unless
			// every record has no timestamp; rebuilding tells which.
			return fmt.Errorf("%w: sealed segment without a final time entry", index.ErrCorrupt)
		}
	}
	s.offsets, s.times = offs, times
	return nil
}

// recoverFrom checks the batches from pos (whose first batch must have base
// offset want) to the end of the file, indexing them as Append would, and cuts
// the file at the first bad byte. It publishes size, end offset and max
// timestamp. The index files must be open.
func (s *Segment) recoverFrom(pos, want, fileSize int64) (Recovery, error) {
	var rec Recovery
	maxTs := s.maxTs.Load()
	s.sinceIndex = 0
	// A buffer of up to 1 MiB, but no more than what is left to check: a
	// clean start re-checks only the few bytes after the last index entry
	// of thousands of partitions.
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, pos, fileSize-pos), int(min(max(fileSize-pos, 512), 1<<20)))
	for pos < fileSize {
		h, err := s.checkBatch(r, want, fileSize-pos)
		if err != nil {
			rec.Cause = fmt.Errorf("segment %d: batch at position %d: %w", s.base, pos, err)
			break
		}
		s.trackBatch(h, pos, &maxTs)
		pos += int64(h.Size())
		want = h.NextOffset()
		rec.Batches++
	}
	if pos < fileSize {
		if rec.Cause != nil && !errors.Is(rec.Cause, record.ErrCorrupt) && !errors.Is(rec.Cause, errOffsets) {
			return rec, rec.Cause // an I/O error, not damage
		}
		rec.Truncated = fileSize - pos
		if err := s.log.Truncate(pos); err != nil {
			return rec, fmt.Errorf("segment: truncate %s: %w", s.log.Name(), err)
		}
		rel := uint32(want - s.base)
		if err := s.offsets.TruncateFrom(rel, s.idxFile); err != nil {
			return rec, err
		}
		if err := s.times.TruncateFrom(rel, s.timeFile); err != nil {
			return rec, err
		}
	}
	s.maxTs.Store(maxTs)
	s.size.Store(pos)
	s.next.Store(want)
	return rec, nil
}

var errOffsets = errors.New("segment: offsets do not continue")

// checkBatch reads one batch from r and checks its header, its offsets and its
// CRC, streaming the CRC over bounded chunks. avail is the bytes left in the file.
func (s *Segment) checkBatch(r *bufio.Reader, want, avail int64) (record.Header, error) {
	hb, err := r.Peek(record.HeaderSize)
	if err != nil {
		if len(hb) < record.HeaderSize && (err == io.EOF || err == bufio.ErrBufferFull) {
			return record.Header{}, record.ErrShort
		}
		return record.Header{}, err
	}
	h, err := record.ParseHeader(hb)
	if err != nil {
		return h, err
	}
	size := int64(h.Size())
	if size > avail {
		return h, fmt.Errorf("%w: batch of %d bytes with %d left", record.ErrShort, size, avail)
	}
	if h.BaseOffset != want {
		return h, fmt.Errorf("%w: base offset %d, want %d", errOffsets, h.BaseOffset, want)
	}
	if h.LastOffset()-s.base >= math.MaxUint32 {
		return h, fmt.Errorf("%w: offset %d too far from base", errOffsets, h.LastOffset())
	}
	if _, err := r.Discard(21); err != nil {
		return h, err
	}
	var crc uint32
	for left := size - 21; left > 0; {
		chunk, err := r.Peek(int(min(left, int64(r.Size()))))
		if err != nil && len(chunk) == 0 {
			return h, err
		}
		crc = crc32.Update(crc, castagnoli, chunk)
		_, _ = r.Discard(len(chunk))
		left -= int64(len(chunk))
	}
	if crc != h.CRC {
		return h, fmt.Errorf("%w: stored %08x, computed %08x", record.ErrBadCRC, h.CRC, crc)
	}
	return h, nil
}

// trackBatch adds index entries for a batch at pos, as Append does.
func (s *Segment) trackBatch(h record.Header, pos int64, maxTs *int64) {
	if s.sinceIndex >= s.opts.IndexIntervalBytes {
		rel := uint32(h.BaseOffset - s.base)
		s.offsets.Append(index.OffsetEntry{RelOffset: rel, Position: uint32(pos)})
		s.times.MaybeAppend(index.TimeEntry{Timestamp: *maxTs, RelOffset: rel})
		s.sinceIndex = 0
	}
	s.sinceIndex += int64(h.Size())
	if h.MaxTimestamp > *maxTs {
		*maxTs = h.MaxTimestamp
	}
}
