package partlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// The log cleaner: Kafka's log compaction (cleanup.policy=compact). See
// "Compaction" in the package doc for the design and its rules; clean.go has
// the pass, cleanbatch.go what happens to each batch, cleanswap.go the swap
// of cleaned segments into the log and its completion after a crash,
// cleanpoint.go the cleaner point.

var (
	// ErrLogChanged: retention, Truncate or a recovery changed the segments
	// a Clean was rewriting, or the log failed meanwhile; the pass stopped
	// where it was (what it swapped in before stands). Call Clean again.
	ErrLogChanged = errors.New("partlog: log changed under the cleaner")
	// ErrCleanMapFull: the distinct keys of the first segment to clean need
	// more than CleanOptions.MaxMapBytes, so no pass can make progress until
	// the bound is raised (Kafka log.cleaner.dedupe.buffer.size).
	ErrCleanMapFull = errors.New("partlog: cleaner key map too small for one segment")
)

// Defaults of CleanOptions.
const (
	DefaultDeleteRetention = 24 * time.Hour
	DefaultCleanMapBytes   = 128 << 20
)

// CleanOptions configure one Clean pass. Only UpTo has no default.
type CleanOptions struct {
	// UpTo: nothing at or past this offset is cleaned. Pass the high
	// watermark (the last stable offset, once transactions are tracked), or
	// NoLimit. There is no default: the zero value cleans nothing. A cut
	// below what a pass cleaned (Truncate, as a replica makes) would lose
	// the records that records past the cut superseded, as in Kafka: hence
	// the high watermark, below which replicas do not truncate.
	UpTo int64
	// DeleteRetention is how long a tombstone (a keyed record with a null
	// value) is kept after the pass that first cleaned it (Kafka
	// delete.retention.ms). Default DefaultDeleteRetention (24 h); negative
	// means none: the next pass removes it.
	DeleteRetention time.Duration
	// MaxMapBytes bounds the memory of the key map a pass builds (Kafka
	// log.cleaner.dedupe.buffer.size; the keys themselves plus about 48
	// bytes each). When the dirty segments hold more distinct keys, the
	// pass cleans up to the last segment whose keys all fit, and the next
	// pass goes on from there (CleanResult.MapFull). Default
	// DefaultCleanMapBytes (128 MiB); the map only takes what it needs.
	MaxMapBytes int64
	// Decompress returns the uncompressed records section of a batch
	// compressed under codec c, and Compress compresses a records section
	// under c; neither may keep its input. A compressed batch is read only
	// with Decompress and rewritten only with both; one that cannot be is
	// kept unchanged (and holds up the removal of later tombstones, see the
	// package doc). A rewritten batch keeps its codec. The log reads
	// batches producers wrote, so Decompress should bound what it returns
	// (a decompression bomb). A pass notices ctx's end and Close between
	// calls only: a codec behind an RPC should be given the same ctx (a
	// closure made per pass). Default: none.
	Decompress func(c record.Codec, section []byte) ([]byte, error)
	Compress   func(c record.Codec, raw []byte) ([]byte, error)
	// MinCompactionLag (Kafka min.compaction.lag.ms): records stay
	// uncleaned at least this long after their timestamps. The cleanable
	// range ends at the first dirty segment whose largest record timestamp
	// is newer than now (Config.Clock) less MinCompactionLag. Zero or
	// negative: no lag.
	MinCompactionLag time.Duration
	// Throttle, when set, is called before the pass reads or writes n bytes
	// of segment data and may block to hold the cleaner's I/O to a rate
	// (Kafka log.cleaner.io.max.bytes.per.second); an error (ctx's end)
	// abandons the pass. It is never called with a lock of the log held:
	// appends go on while a pass waits. n is at most about 1 MiB.
	Throttle func(ctx context.Context, n int) error
}

func (o CleanOptions) validate() (CleanOptions, error) {
	if o.UpTo < 0 {
		return o, fmt.Errorf("partlog: clean: negative UpTo %d", o.UpTo)
	}
	switch {
	case o.DeleteRetention == 0:
		o.DeleteRetention = DefaultDeleteRetention
	case o.DeleteRetention < 0:
		o.DeleteRetention = 0
	}
	switch {
	case o.MaxMapBytes == 0:
		o.MaxMapBytes = DefaultCleanMapBytes
	case o.MaxMapBytes < 0:
		return o, fmt.Errorf("partlog: clean: negative MaxMapBytes %d", o.MaxMapBytes)
	}
	return o, nil
}

// CleanResult says what a Clean pass did.
type CleanResult struct {
	// SegmentsRead is how many segments were rewritten (or found clean
	// already and left in place); SegmentsWritten how many replaced them.
	SegmentsRead, SegmentsWritten int
	// BytesBefore and BytesAfter are the size of the segments read, before
	// and after the pass.
	BytesBefore, BytesAfter int64
	// MapKeys is how many distinct keys the dirty segments held (up to
	// where the map filled); MapFull tells that it filled before the end of
	// what was cleanable: the next pass goes on.
	MapKeys int
	MapFull bool
	// RecordsKept and RecordsRemoved count the records of the segments
	// read; TombstonesRemoved is the part of RecordsRemoved that were
	// tombstones removed for good (not superseded by a newer record).
	RecordsKept, RecordsRemoved, TombstonesRemoved int64
	// CleanerPoint is the offset below which the log is now cleaned.
	CleanerPoint int64
	Duration     time.Duration
	// AppendLockHeld is how long the pass held the append lock in all
	// (its swaps, and moving the cleaner point), and AppendLockMax its
	// longest hold: how long an append may have waited for the cleaner.
	AppendLockHeld, AppendLockMax time.Duration
}

// Clean makes one cleaning pass (Kafka's log compaction): it maps every key
// of the dirty segments (those the last pass did not reach) to its latest
// offset, then rewrites the log from its start up to there, dropping every
// record whose key the map holds at a larger offset, and tombstones whose
// DeleteRetention has passed. Only sealed, durable segments below o.UpTo are
// touched, whole, and never the active one; every offset keeps its place.
// See "Compaction" in the package doc.
//
// Appends, reads, Flush, ApplyRetention and Truncate go on meanwhile; each
// cleaned group of segments is swapped in (three directory fsyncs) under a
// lock that ApplyRetention, Truncate, Reset and recoveries wait for, and
// appends only for a check and the publication of the new segment. Clean passes are serialised. With nothing dirty a
// pass still reads every cleanable segment, to remove tombstones whose time
// is up; CleanableRatio tells a caller whether a pass is due. It returns
// ErrClosed on a closed log (and stops when Close is called), ctx's error
// when ctx ends,
// the log's error (ErrFailed) on a failed log, ErrLogChanged when retention,
// Truncate or a recovery replaced segments it was rewriting, ErrCleanMapFull,
// an error wrapping record.ErrCorrupt for a batch it cannot read (bad CRC,
// offsets that do not continue, malformed records, a failed Decompress),
// or an I/O error. A failure before a swap leaves the log as it was, its
// temporary files removed, and does not fail the log; one during a swap
// fails it, and its recovery completes the swap. The result tells what was
// done up to the error.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	start := l.cfg.Clock.Now()
	c := &cleaner{l: l, now: start}
	err := c.run(ctx, o)
	c.res.Duration = l.cfg.Clock.Now().Sub(start)
	return c.res, err
}

// CleanableRatio reports what Clean(UpTo: upTo) could clean now: total bytes
// in cleanable segments, and the dirty part of them, in segments no pass has
// cleaned yet. Kafka cleans a log when dirty/total reaches
// min.cleanable.dirty.ratio (0.5).
func (l *Log) CleanableRatio(upTo int64) (dirty, total int64) {
	c := l.Cleanable(CleanCheck{UpTo: upTo})
	return c.Dirty, c.Total
}

// CleanCheck asks Cleanable what a pass could clean now.
type CleanCheck struct {
	// UpTo and MinCompactionLag: as in CleanOptions.
	UpTo             int64
	MinCompactionLag time.Duration
	// MaxCompactionLag (Kafka max.compaction.lag.ms), when positive, asks
	// for Cleanability.Overdue.
	MaxCompactionLag time.Duration
}

// Cleanability is what a Clean pass with the same UpTo and
// MinCompactionLag could clean now.
type Cleanability struct {
	// Total is the bytes of the cleanable segments, Dirty the part of them
	// in segments no pass has cleaned yet.
	Total, Dirty int64
	// Overdue (asked for by CleanCheck.MaxCompactionLag) is how long ago the
	// oldest dirty record passed MaxCompactionLag, 0 if none has: Kafka's
	// max compaction delay. Records are dated by the first batch of each
	// dirty segment (its largest timestamp, as Kafka does); batches without
	// a timestamp do not count.
	Overdue time.Duration
}

// Cleanable reports what a pass could clean now (see Cleanability). Kafka
// cleans a log when Dirty/Total reaches min.cleanable.dirty.ratio (0.5), or
// when some dirty bytes are Overdue.
func (l *Log) Cleanable(q CleanCheck) Cleanability {
	now := l.cfg.Clock.Now()
	p := l.planClean(q.UpTo, q.MinCompactionLag, now)
	var c Cleanability
	first := int64(math.MaxInt64)
	for i, s := range p.segs {
		c.Total += s.Size()
		if i < p.dirty {
			continue
		}
		c.Dirty += s.Size()
		if q.MaxCompactionLag > 0 {
			_ = s.Headers(func(_ int64, h record.Header) bool {
				if h.MaxTimestamp > 0 {
					first = min(first, h.MaxTimestamp)
				}
				return false
			})
		}
	}
	if q.MaxCompactionLag > 0 && first != math.MaxInt64 {
		due := now.UnixMilli() - q.MaxCompactionLag.Milliseconds()
		if q.MaxCompactionLag.Milliseconds() > now.UnixMilli() {
			due = math.MinInt64
		}
		if first < due {
			c.Overdue = time.Duration(due-first) * time.Millisecond
		}
	}
	return c
}

// cleanPlan is what may be cleaned now.
type cleanPlan struct {
	segs   []*segment.Segment // from the log start: sealed, durable, below UpTo, not the last
	dirty  int                // segs[dirty:] are not cleaned yet (one holding the cleaner point counts)
	hist   *cleanHistory
	end    int64 // where segs ended
	gen    int64 // the log's generation and recoverSeq when planned
	recSeq int64
}

func (l *Log) planClean(upTo int64, minLag time.Duration, now time.Time) cleanPlan {
	recSeq := l.recoverSeq.Load()
	gen := l.gen.Load()
	all := l.segments()
	hist := l.cleaned.Load()
	// The recovery point after the list: a segment it covers was sealed
	// and fsynced when the point was written, and stays so until a
	// truncation, which lowers the point first (and changes the list, which
	// the swap checks).
	limit := min(l.rp.Load(), upTo)
	n := 0
	for n < len(all)-1 && all[n].NextOffset() <= limit {
		n++
	}
	cp := hist.point()
	d := 0
	for d < n && all[d].NextOffset() <= cp {
		d++
	}
	if minLag > 0 {
		// Kafka's cleanableOffsets: nothing from the first dirty segment
		// holding a record newer than the lag on.
		newest := now.Add(-minLag).UnixMilli()
		for i := d; i < n; i++ {
			if all[i].MaxTimestamp() > newest {
				n = i
				break
			}
		}
	}
	p := cleanPlan{segs: all[:n], dirty: min(d, n), hist: hist, gen: gen, recSeq: recSeq}
	if n > 0 {
		p.end = all[n-1].NextOffset()
	}
	return p
}

// cleaner is the state of one pass.
type cleaner struct {
	l    *Log
	o    CleanOptions
	now  time.Time
	plan cleanPlan
	res  CleanResult
	keys keyMap
	// dirtyStart: records from here on are cleaned for the first time.
	dirtyStart int64
	// opaque: the pass has met a batch it keeps whole without knowing (or
	// while keeping) superseded records in it; tombstones after it stay,
	// since removing one could bring back an older value of its key.
	opaque  bool
	buf     []byte // batches read
	raw     []byte // the kept records of the batch being rewritten
	out     []byte // the batch rewritten
	shifted []byte // the records of a batch being lowered
	lowered []byte // the batch lowered
	// lastOf maps producer ids to the base offset of their last batch in
	// segment lastSeg (see keepEmpty).
	lastSeg *segment.Segment
	lastOf  map[int64]int64
}

func (c *cleaner) run(ctx context.Context, o CleanOptions) error {
	l := c.l
	if l.closed.Load() || l.stopClean.Load() {
		return ErrClosed
	}
	o, err := o.validate()
	if err != nil {
		return err
	}
	c.o = o
	if err := l.Err(); err != nil {
		return err
	}
	if l.cleanTemps.Load() {
		l.removeCleanTemps()
	}
	c.plan = l.planClean(o.UpTo, o.MinCompactionLag, c.now)
	c.res.CleanerPoint = c.plan.hist.point()
	segs := c.plan.segs
	if len(segs) == 0 {
		return nil
	}
	// With nothing dirty the pass still runs: its map is empty, and it
	// removes the tombstones whose time is up.
	c.dirtyStart = segs[len(segs)-1].NextOffset()
	if c.plan.dirty < len(segs) {
		c.dirtyStart = segs[c.plan.dirty].Base()
	}
	mapped, err := c.buildMap(ctx)
	if err != nil {
		return err
	}
	done := 0 // segs[:done] are cleaned (swapped in, or found clean already)
	for done < mapped {
		next, err := c.cleanGroup(ctx, done, mapped)
		if err != nil {
			if done > 0 { // what was swapped in stands: the point may move up to it
				err = errors.Join(err, c.advance(segs[done-1].NextOffset()))
			}
			return err
		}
		done = next
	}
	return c.advance(segs[done-1].NextOffset())
}

// advance moves the cleaner point to end, which the pass has cleaned, with
// the time it did: the time that tombstones below end count from. Nothing
// moves if a cut since the pass began went below end (Truncate, or a
// recovery: the offsets below end may hold new records; the cut clamped the
// point), nor on a failed log (its recovery reads the point from the file).
//
// The point moves in memory under appendMu, and is saved under cpMu alone,
// so appends do not wait for the file's fsyncs: a cut or a recovery
// meanwhile (which hold cpMu, under appendMu) replaced the history in memory
// and wrote the file themselves, and then this write is skipped, so the
// file never gets ahead of memory.
func (c *cleaner) advance(end int64) error {
	l := c.l
	h, save := c.raise(end)
	if !save {
		return nil
	}
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	if l.cleaned.Load() != h || l.closed.Load() {
		return nil
	}
	if err := l.writeCleanHistory(h); err != nil {
		l.cleanUnsaved.Store(true) // the next pass tries again
		return fmt.Errorf("partlog: clean: cleaned up to %d, but the cleaner point was not saved: %w", h.point(), err)
	}
	l.cleanUnsaved.Store(false)
	return nil
}

// held counts a hold of the append lock that began at since and ends now
// (wall time: it measures the cleaner's effect on appends).
func (c *cleaner) held(since time.Time) {
	d := time.Since(since)
	c.res.AppendLockHeld += d
	c.res.AppendLockMax = max(c.res.AppendLockMax, d)
}

// raise moves the cleaner point in memory to end (see advance) and tells
// whether the file must be written: the point moved, or an earlier write
// failed.
func (c *cleaner) raise(end int64) (*cleanHistory, bool) {
	l := c.l
	l.appendMu.Lock()
	defer c.held(time.Now())
	defer l.appendMu.Unlock()
	if l.closed.Load() || l.Err() != nil || !l.Survived(AppendResult{NextOffset: end, Generation: c.plan.gen}) {
		return nil, false
	}
	h := l.cleaned.Load()
	if end > h.point() {
		h = h.add(end, l.cfg.Clock.Now().UnixMilli(), l.StartOffset())
		l.cleaned.Store(h) // memory first (see cleanpoint.go): it never lags the file
		c.res.CleanerPoint = end
		return h, true
	}
	return h, l.cleanUnsaved.Load()
}

// keyMap maps each key of the dirty segments to its latest offset. Keys map
// to indexes into offs, so that updating a known key, the common case,
// allocates nothing.
type keyMap struct {
	idx   map[string]int32
	offs  []int64
	bytes int64
}

// keyMapOverhead estimates the bytes a key costs besides its own: the map
// entry (string header, index, hash bits, load factor) and its offset.
const keyMapOverhead = 48

// latest returns the latest offset of key in the dirty segments.
func (m *keyMap) latest(key []byte) (int64, bool) {
	i, ok := m.idx[string(key)]
	if !ok {
		return 0, false
	}
	return m.offs[i], true
}

// put records key at off (offsets come in increasing order); false when a
// new key would take the map past limit.
func (m *keyMap) put(key []byte, off, limit int64) bool {
	if i, ok := m.idx[string(key)]; ok {
		m.offs[i] = off
		return true
	}
	cost := int64(len(key)) + keyMapOverhead
	if m.bytes+cost > limit || len(m.offs) == math.MaxInt32 {
		return false
	}
	m.idx[string(key)] = int32(len(m.offs))
	m.offs = append(m.offs, off)
	m.bytes += cost
	return true
}

var errMapFull = errors.New("map full")

// buildMap maps the keys of the dirty segments and returns how many of the
// plan's segments the pass may clean: all of them, or those before the one
// whose keys did not all fit.
func (c *cleaner) buildMap(ctx context.Context) (int, error) {
	c.keys = keyMap{idx: map[string]int32{}}
	segs := c.plan.segs
	for i := c.plan.dirty; i < len(segs); i++ {
		err := c.eachBatch(ctx, segs[i], func(b []byte, h record.Header, _ int64) error {
			return c.mapBatch(b, h)
		})
		if errors.Is(err, errMapFull) {
			c.res.MapFull, c.res.MapKeys = true, len(c.keys.offs)
			if i == c.plan.dirty {
				return 0, fmt.Errorf("%w: segment %d holds more distinct keys than %d bytes of map take", ErrCleanMapFull,
					segs[i].Base(), c.o.MaxMapBytes)
			}
			// The keys of segs[i] mapped so far stay: a record dropped
			// for one of them is superseded by a record of segs[i],
			// which this pass keeps.
			return i, nil
		}
		if err != nil {
			return 0, err
		}
	}
	c.res.MapKeys = len(c.keys.offs)
	return len(segs), nil
}

func (c *cleaner) mapBatch(b []byte, h record.Header) error {
	if h.Control() || h.Transactional() || h.RecordCount == 0 {
		return nil // never dropped, so never a reason to drop others
	}
	section, readable, _, err := c.section(b, h)
	if err != nil || !readable {
		return err
	}
	return record.ForEach(h, section, func(r *record.Record, _ []byte) error {
		if r.Key != nil && !c.keys.put(r.Key, h.BaseOffset+int64(r.OffsetDelta), c.o.MaxMapBytes) {
			return errMapFull
		}
		return nil
	})
}

// section returns the uncompressed records section of batch b, whether it
// could be read (false: compressed and no Decompress) and whether it could
// be rewritten (Compress too).
func (c *cleaner) section(b []byte, h record.Header) (section []byte, readable, rewritable bool, err error) {
	section = b[record.HeaderSize:h.Size()]
	codec := h.Codec()
	if codec == record.CodecNone {
		return section, true, true, nil
	}
	if c.o.Decompress == nil {
		return nil, false, false, nil
	}
	raw, err := c.o.Decompress(codec, section)
	if err != nil {
		return nil, false, false, fmt.Errorf("%w: decompress %s: %w", record.ErrBadRecords, codec, err)
	}
	return raw, true, c.o.Compress != nil, nil
}

// cleanReadChunk is how many bytes of whole batches a pass reads at once.
const cleanReadChunk = 1 << 20

// eachBatch calls fn with every batch of s in order (b aliases a buffer
// reused after fn returns), after checking it whole (CRC) and that offsets
// continue from the segment's base to its end. It stops at ctx's end and at
// Close.
func (c *cleaner) eachBatch(ctx context.Context, s *segment.Segment, fn func(b []byte, h record.Header, pos int64) error) error {
	off, end := s.Base(), s.NextOffset()
	bad := func(pos int64, err error) error {
		return c.raced(fmt.Errorf("partlog: clean: segment %d, batch at position %d (offset %d): %w", s.Base(), pos, off, err))
	}
	for off < end {
		if err := c.stopped(ctx); err != nil {
			return err
		}
		sl, err := s.Read(off, cleanReadChunk, NoLimit)
		if err == nil && c.o.Throttle != nil {
			if terr := c.o.Throttle(ctx, int(sl.Size)); terr != nil {
				sl.Release()
				return fmt.Errorf("partlog: clean: throttle: %w", terr)
			}
		}
		switch {
		case errors.Is(err, segment.ErrClosed):
			return fmt.Errorf("%w: segment %d closed", ErrLogChanged, s.Base())
		case err != nil:
			return bad(-1, err)
		}
		if cap(c.buf) < int(sl.Size) {
			c.buf = make([]byte, sl.Size)
		}
		data := c.buf[:sl.Size]
		n, rerr := sl.File.ReadAt(data, sl.Pos)
		pos := sl.Pos
		sl.Release()
		if n < len(data) {
			return bad(pos, fmt.Errorf("read %d of %d bytes: %w", n, len(data), rerr))
		}
		for len(data) > 0 {
			h, n, err := record.Next(data, 0)
			if err != nil {
				return bad(pos, err)
			}
			if h.BaseOffset != off {
				return bad(pos, fmt.Errorf("%w: base offset %d does not continue the segment", record.ErrCorrupt, h.BaseOffset))
			}
			if err := fn(data[:n], h, pos); err != nil {
				if errors.Is(err, record.ErrCorrupt) {
					return bad(pos, err)
				}
				return err
			}
			off = h.NextOffset()
			data = data[n:]
			pos += int64(n)
		}
	}
	if off != end {
		return bad(-1, fmt.Errorf("%w: batches end at %d, the segment at %d", record.ErrCorrupt, off, end))
	}
	return nil
}

// raced returns err as ErrLogChanged when a cut or a recovery came since
// the pass began: Truncate, or a recovery, may cut the files of segments it
// is reading, which then look damaged; they are not.
func (c *cleaner) raced(err error) error {
	// Truncate lowers the recovery point before it cuts a file, a
	// recovery counts in recoverSeq before it opens one.
	if c.l.gen.Load() != c.plan.gen || c.l.recoverSeq.Load() != c.plan.recSeq || c.l.rp.Load() < c.plan.end {
		return fmt.Errorf("%w: %w", ErrLogChanged, err)
	}
	return err
}

// stopped tells whether the pass must stop: ctx ended, or Close was called.
func (c *cleaner) stopped(ctx context.Context) error {
	if c.l.stopClean.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("partlog: clean: %w", err)
	}
	return nil
}

// cleanGroup cleans plan.segs[i:j] into one new segment, for the largest j
// up to limit that keeps it within SegmentBytes and the index's relative
// offsets, and swaps it in. A single segment that comes out unchanged is
// left in place. It returns j.
func (c *cleaner) cleanGroup(ctx context.Context, i, limit int) (int, error) {
	l, segs := c.l, c.plan.segs
	base := segs[i].Base()
	opts := segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes, Tag: segment.CleanedTag}
	seg, err := segment.Create(l.fs, l.dir, base, opts)
	if err != nil {
		return i, fmt.Errorf("partlog: clean: %w", err)
	}
	w := &cleanWriter{seg: seg, next: base, outNext: base}
	if c.o.Throttle != nil {
		w.throttle = func(n int) error { return c.o.Throttle(ctx, n) }
	}
	abandon := func(err error) (int, error) {
		if derr := seg.Delete(); derr != nil {
			l.cleanTemps.Store(true)
			l.cfg.Logger.Warn("partition log: cleaner could not remove its temporary files", "dir", l.dir, "err", derr)
		}
		return i, err
	}
	j := i
	var before int64
	for j < limit {
		if j > i {
			fits, err := c.fits(ctx, w, segs[j], base)
			if err != nil {
				return abandon(err)
			}
			if !fits {
				break
			}
		}
		if err := c.cleanSegment(ctx, segs[j], w); err != nil {
			return abandon(err)
		}
		before += segs[j].Size()
		j++
	}
	if err := w.finish(segs[j-1].NextOffset()); err != nil {
		return abandon(c.raced(fmt.Errorf("partlog: clean: %w", err)))
	}
	if j == i+1 && !w.changed {
		// Left in place: its copy is dropped before costing an fsync.
		c.res.SegmentsRead++
		c.res.BytesBefore += before
		c.res.BytesAfter += before
		_, err := abandon(nil)
		return j, err
	}
	if err := seg.Seal(); err != nil { // fsyncs the log and both indexes
		return abandon(fmt.Errorf("partlog: clean: %w", err))
	}
	if err := c.stopped(ctx); err != nil {
		return abandon(err)
	}
	committed, err := l.swapClean(segs[i:j], w.next, c.plan.gen, seg, c.held)
	if !committed {
		return abandon(err)
	}
	_ = seg.Close() // its files are the log's now; this closes its handles
	if err != nil {
		return i, err
	}
	c.res.SegmentsRead += j - i
	c.res.SegmentsWritten++
	c.res.BytesBefore += before
	c.res.BytesAfter += seg.Size()
	return j, nil
}

// fits tells whether s, cleaned, fits after what w holds in a segment of
// SegmentBytes whose offsets stay within uint32 of base. Its size bounds its
// cleaned size; when that is too much, a dry run over s (decoding its
// records again, checking them against the map) bounds it better, so that
// segments the pass shrinks merge now, not at the next pass.
func (c *cleaner) fits(ctx context.Context, w *cleanWriter, s *segment.Segment, base int64) (bool, error) {
	if s.NextOffset()-1-base >= math.MaxUint32 {
		return false, nil
	}
	room := c.l.cfg.SegmentBytes - w.size()
	if s.Size() <= room {
		return true, nil
	}
	if room < record.HeaderSize {
		return false, nil
	}
	var bound int64
	err := c.eachBatch(ctx, s, func(b []byte, h record.Header, _ int64) error {
		n, err := c.cleanedBound(b, h)
		bound += n
		if bound > room {
			return errTooBig
		}
		return err
	})
	if errors.Is(err, errTooBig) {
		return false, nil
	}
	return err == nil, err
}

var errTooBig = errors.New("too big")

// cleanedBound bounds the bytes batch b takes once cleaned (cleanBatch):
// only superseded records go (tombstones are taken to stay), and a batch
// that loses all its records takes at most one batch of no records. A
// compressed batch counts its size: decompressing it once more only to
// bound it would cost about as much as cleaning it (so segments of
// compressed batches merge at the next pass, as Kafka's grouping does).
func (c *cleaner) cleanedBound(b []byte, h record.Header) (int64, error) {
	if h.Control() || h.Transactional() || h.RecordCount == 0 || h.Codec() != record.CodecNone {
		return int64(h.Size()), nil
	}
	section := b[record.HeaderSize:h.Size()]
	var kept int32
	var raw int64
	err := record.ForEach(h, section, func(r *record.Record, rb []byte) error {
		if r.Key != nil {
			if latest, ok := c.keys.latest(r.Key); ok && latest > h.BaseOffset+int64(r.OffsetDelta) {
				return nil
			}
		}
		kept++
		raw += int64(len(rb))
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case kept == 0:
		return record.HeaderSize, nil
	}
	return record.HeaderSize + raw, nil
}
