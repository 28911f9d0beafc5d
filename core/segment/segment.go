package segment

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/index"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// File name suffixes.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
)

// MaxSize is the largest a log file may grow: index positions are uint32, and
// like Kafka we keep segments below 2 GiB.
const MaxSize = math.MaxInt32

// NoTimestamp is the max timestamp of a segment with no records.
const NoTimestamp int64 = -1

var (
	// ErrClosed is returned by operations on a closed or deleted segment.
	ErrClosed = errors.New("segment: closed")
	// ErrNotFound means the segment holds no batch containing the offset (or
	// timestamp) asked for.
	ErrNotFound = errors.New("segment: offset not in segment")
)

// Options configure a segment.
type Options struct {
	// IndexIntervalBytes is how many log bytes may be appended between two
	// offset index entries. Default 4096.
	IndexIntervalBytes int64
	// Tag, when not empty, follows the usual name of each of the segment's
	// files (00000000000000368769.log.cleaned): a segment written under a
	// temporary name, as the log cleaner writes one (CleanedTag, SwapTag),
	// to be renamed into place by its owner. Everything works as for any
	// segment, on the tagged files. Default: none.
	Tag string
	// Files bounds the descriptors the segment's files hold, with those of
	// every other segment opened through it (see package filecache): each
	// file is opened when used and may be closed while idle. Default:
	// filecache.Unbounded (a file stays open once opened).
	Files *filecache.Cache
}

// Tags of a segment the log cleaner writes (see package partlog): first
// CleanedTag while it is written, SwapTag once it is complete and durable and
// is to replace the segments it was cleaned from.
const (
	CleanedTag = ".cleaned"
	SwapTag    = ".swap"
)

func (o Options) withDefaults() Options {
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.Files == nil {
		o.Files = filecache.Unbounded
	}
	return o
}

// Name returns the path of a segment file: dir/<20-digit base><suffix>.
func Name(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// name is the path of one of the segment's files, tagged if it is.
func (s *Segment) name(suffix string) string { return Name(s.dir, s.base, suffix) + s.opts.Tag }

// ParseName returns the base offset and suffix of a segment file name, or false
// when name is not one.
func ParseName(name string) (base int64, suffix string, ok bool) {
	name = filepath.Base(name)
	dot := strings.IndexByte(name, '.')
	if dot != 20 {
		return 0, "", false
	}
	suffix = name[dot:]
	switch suffix {
	case LogSuffix, IndexSuffix, TimeIndexSuffix:
	default:
		return 0, "", false
	}
	base, err := strconv.ParseInt(name[:dot], 10, 64)
	if err != nil || base < 0 {
		return 0, "", false
	}
	return base, suffix, true
}

// Segment is one log file and its indexes.
type Segment struct {
	fs   vfs.FS
	dir  string
	base int64
	opts Options
	log  *filecache.File

	// Published to readers. The writer stores size before next; readers load next
	// before size, so a reader never sees an end offset whose bytes it cannot see.
	size  atomic.Int64
	next  atomic.Int64
	maxTs atomic.Int64

	offsets *index.Offsets
	times   *index.Times

	// Writer state, guarded by the partition log's append lock.
	sinceIndex int64 // bytes appended since the last offset index entry
	idxFile    *filecache.File
	timeFile   *filecache.File // both nil while sealed

	held atomic.Bool // Hold pinned the log file open

	// A segment opened lazily (OpenLazy) is loaded at its first use that
	// needs its files: lazy is set until then, loadMu serialises the load.
	lazy     atomic.Bool
	lazyLast bool
	loadMu   sync.Mutex
	refs     atomic.Int32 // 1 for the owner, +1 per outstanding Slice
	retired  atomic.Bool  // closed or deleted: no new readers
	closeMu  sync.Mutex
	closed   bool
	err      error // from closing the files
}

// Base is the segment's base offset.
func (s *Segment) Base() int64 { return s.base }

// NextOffset is the offset after the segment's last record (its base when empty).
func (s *Segment) NextOffset() int64 { return s.next.Load() }

// Size is the number of log bytes readers may see.
func (s *Segment) Size() int64 { return s.size.Load() }

// MaxTimestamp is the largest record timestamp in the segment, NoTimestamp
// when empty (or when a lazy segment cannot be loaded).
func (s *Segment) MaxTimestamp() int64 {
	if s.ensure() != nil {
		return NoTimestamp
	}
	return s.maxTs.Load()
}

// Dir is the partition directory holding the segment.
func (s *Segment) Dir() string { return s.dir }

// MemBytes estimates the heap the segment holds: its index entries and struct.
func (s *Segment) MemBytes() int {
	return s.offsets.MemBytes() + s.times.MemBytes() + structBytes
}

// structBytes is the fixed heap of a segment besides its index entries: the
// struct, the index headers, the open file and its name (TestMemoryPerSegment
// measures it).
const structBytes = 600

func newSegment(fs vfs.FS, dir string, base int64, opts Options, log *filecache.File) *Segment {
	s := &Segment{fs: fs, dir: dir, base: base, opts: opts, log: log,
		offsets: index.NewOffsets(), times: index.NewTimes()}
	s.next.Store(base)
	s.maxTs.Store(NoTimestamp)
	s.refs.Store(1)
	return s
}

// Create makes a new, empty, active segment. The caller syncs the directory.
func Create(fs vfs.FS, dir string, base int64, opts Options) (*Segment, error) {
	if base < 0 {
		return nil, fmt.Errorf("segment: negative base offset %d", base)
	}
	opts = opts.withDefaults()
	log, err := opts.Files.Create(fs, Name(dir, base, LogSuffix)+opts.Tag)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	s := newSegment(fs, dir, base, opts, log)
	if err := s.openIndexFiles(true); err != nil {
		_ = log.Close()
		return nil, err
	}
	return s, nil
}

// openIndexFiles opens (or, with create, creates empty) the index files for writing.
func (s *Segment) openIndexFiles(create bool) error {
	// Existing index files are opened at their first write (a seal, a
	// truncation): an unsealed segment of an idle partition costs no
	// descriptor, and opening thousands of them no system call.
	open := func(fsys vfs.FS, name string) (*filecache.File, error) { return s.opts.Files.Open(fsys, name), nil }
	if create {
		open = s.opts.Files.Create
	}
	idx, err := open(s.fs, s.name(IndexSuffix))
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	tix, err := open(s.fs, s.name(TimeIndexSuffix))
	if err != nil {
		_ = idx.Close()
		return fmt.Errorf("segment: %w", err)
	}
	s.idxFile, s.timeFile = idx, tix
	return nil
}

// Active reports whether the segment has its index files open for appending.
func (s *Segment) Active() bool { return s.idxFile != nil }

// Append writes buf, which holds whole batches described in order by hs, with
// offsets already assigned and continuing from NextOffset. One write, then the
// indexes, then the new size and end offset are published. The caller (one
// writer at a time) has checked that the batches fit (Fits).
//
// On a write error the segment tries to cut the file back to its old size; the
// published state is unchanged either way, so readers never see the failed bytes.
func (s *Segment) Append(buf []byte, hs []record.Header) error {
	if err := s.ensure(); err != nil {
		return err
	}
	if s.idxFile == nil {
		return fmt.Errorf("segment %d: append to a sealed segment: %w", s.base, ErrClosed)
	}
	pos := s.size.Load()
	if _, err := s.log.Write(buf); err != nil {
		if terr := s.log.Truncate(pos); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("segment: append to %s: %w", s.log.Name(), err)
	}
	maxTs := s.maxTs.Load()
	p := pos
	for _, h := range hs {
		s.trackBatch(h, p, &maxTs)
		p += int64(h.Size())
	}
	s.maxTs.Store(maxTs)
	s.size.Store(p)
	if len(hs) > 0 {
		s.next.Store(hs[len(hs)-1].NextOffset())
	}
	return nil
}

// Fits reports whether n more bytes ending at offset last may go into this
// segment given a size limit: the file stays below limit (an empty segment takes
// any batch) and relative offsets stay within uint32.
func (s *Segment) Fits(n int64, last int64, limit int64) bool {
	if last-s.base >= math.MaxUint32 { // the end offset's relative form must fit a uint32
		return false
	}
	size := s.size.Load()
	if size+n > MaxSize {
		return size == 0 && n <= MaxSize
	}
	return size == 0 || size+n <= limit
}

// Sync fsyncs the log file. It may run concurrently with Append. The index
// files are not fsynced here: an active segment is always past the recovery
// point, so after a crash its indexes are rebuilt from the log anyway; Seal
// makes them durable once they are final.
func (s *Segment) Sync() error {
	if s.lazy.Load() {
		return nil // not loaded, so not written since its owner vouched for it
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.log.Name(), err)
	}
	return nil
}

func (s *Segment) syncIndexes() error {
	idx, tix := s.idxFile, s.timeFile
	if idx == nil {
		return nil
	}
	if err := s.offsets.Sync(idx); err != nil {
		return err
	}
	return s.times.Sync(tix)
}

// Seal ends appends to the segment: it records a final time index entry (the
// segment's max timestamp at its end offset), writes and fsyncs both indexes and
// the log, and closes the index files. Reads continue.
func (s *Segment) Seal() error {
	if s.lazy.Load() {
		return nil // as sealed as when its owner vouched for it
	}
	return s.seal()
}

func (s *Segment) seal() error {
	if s.idxFile == nil {
		return nil
	}
	if ts := s.maxTs.Load(); ts != NoTimestamp {
		s.times.MaybeAppend(index.TimeEntry{Timestamp: ts, RelOffset: uint32(s.next.Load() - s.base)})
	}
	err := s.Sync()
	if err == nil {
		err = s.syncIndexes()
	}
	if errors.Is(err, filecache.ErrGone) {
		// Its owner removed or replaced the files (a Reset, a recovery
		// replacing an emptied tail): there is nothing left to make
		// durable, as there was none in the unlinked files an open
		// descriptor would have written.
		err = nil
	}
	if err != nil {
		return err
	}
	err = errors.Join(s.idxFile.Close(), s.timeFile.Close())
	s.idxFile, s.timeFile = nil, nil
	if err != nil {
		return fmt.Errorf("segment: seal %d: %w", s.base, err)
	}
	return nil
}

// Unseal makes a sealed segment active again (after a truncation made it the
// last segment of the log).
func (s *Segment) Unseal() error {
	if err := s.ensure(); err != nil {
		return err
	}
	return s.unseal()
}

func (s *Segment) unseal() error {
	if s.idxFile != nil {
		return nil
	}
	return s.openIndexFiles(false)
}

// acquire takes a reader reference; false once the segment is closed.
func (s *Segment) acquire() bool {
	if s.retired.Load() {
		return false
	}
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference and closes the files after the last one.
func (s *Segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *Segment) closeFiles() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.held.Swap(false) {
		s.log.Unpin()
	}
	errs := []error{s.log.Close()}
	if s.idxFile != nil {
		errs = append(errs, s.idxFile.Close(), s.timeFile.Close())
	}
	s.err = errors.Join(errs...)
}

// Close seals an active segment (flushing it) and drops the owner's reference:
// the files close once no Slice is outstanding.
func (s *Segment) Close() error {
	if s.retired.Swap(true) {
		return nil
	}
	err := s.Seal()
	s.release()
	return err
}

// Hold keeps the log file open (a filecache pin) until the segment's files
// close, for an owner about to remove or rename over the segment's files
// while it is still published: readers that reach it before it is retired
// go on reading its bytes, as they would through a descriptor opened
// earlier, rather than find the name gone. Idempotent.
func (s *Segment) Hold() error {
	if s.held.Load() {
		return nil
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.held.Load() {
		return nil
	}
	if _, err := s.log.Pin(true); err != nil {
		return fmt.Errorf("segment %d: hold: %w", s.base, err)
	}
	s.held.Store(true)
	return nil
}

// Drop drops the owner's reference without sealing the segment or removing
// its files: for a segment whose files its owner removed or replaced
// already (package partlog's Reset), which has nothing left to make
// durable. Readers holding a Slice keep reading until they release it; then
// the files close.
func (s *Segment) Drop() {
	if !s.retired.Swap(true) {
		s.release()
	}
}

// Delete removes the segment's files and drops the owner's reference. Readers
// holding a Slice keep reading the unlinked file until they release it. The
// caller syncs the directory.
func (s *Segment) Delete() error {
	if s.retired.Swap(true) {
		return fmt.Errorf("segment %d: delete: %w", s.base, ErrClosed)
	}
	var errs []error
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
		if err := s.fs.Remove(s.name(suf)); err != nil && !errors.Is(err, errNotExist) {
			errs = append(errs, err)
		}
	}
	s.release()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: delete %d: %w", s.base, err)
	}
	return nil
}

// TruncateTo removes every batch holding an offset >= offset; a batch is never
// split, so the one containing offset goes too and the segment then ends at its
// base. The segment must be active (Unseal it first). The bytes before the cut
// stay where they are; a Slice past the new end comes up short, and would see
// whatever is appended there next: package partlog never appends to a segment
// it cut, but seals it and starts a new file.
func (s *Segment) TruncateTo(offset int64) error {
	if err := s.ensure(); err != nil {
		return err
	}
	if s.idxFile == nil {
		return fmt.Errorf("segment %d: truncate a sealed segment: %w", s.base, ErrClosed)
	}
	if offset >= s.next.Load() {
		return nil
	}
	pos, newNext := int64(0), s.base
	if offset > s.base {
		hr := newHeaders(s.log, s.size.Load(), 2*s.opts.IndexIntervalBytes)
		p, h, err := s.locate(hr, offset)
		hr.close()
		if err != nil {
			return fmt.Errorf("segment %d: truncate to %d: %w", s.base, offset, err)
		}
		pos, newNext = p, h.BaseOffset
	}
	if err := s.log.Truncate(pos); err != nil {
		return fmt.Errorf("segment: truncate %s: %w", s.log.Name(), err)
	}
	rel := uint32(newNext - s.base)
	if err := s.offsets.TruncateFrom(rel, s.idxFile); err != nil {
		return err
	}
	if err := s.times.TruncateFrom(rel, s.timeFile); err != nil {
		return err
	}
	// Recompute the writer's state from the last index entry on.
	from, want := int64(0), s.base
	if e, ok := s.offsets.Last(); ok {
		from, want = int64(e.Position), s.base+int64(e.RelOffset)
	}
	maxTs := NoTimestamp
	if e, ok := s.times.Last(); ok {
		maxTs = e.Timestamp
	}
	s.maxTs.Store(maxTs)
	rec, err := s.recoverFrom(from, want, pos)
	if err != nil {
		return err
	}
	if rec.Truncated > 0 {
		return fmt.Errorf("segment %d: damaged batch below the truncation point: %w", s.base, rec.Cause)
	}
	return nil
}
