package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-broker/weir/harness/result"
)

// Disk section factors, in matrix order, and their levels.
const (
	FactorOp      = "op"
	FactorPattern = "pattern"
	FactorIO      = "io"
	FactorBlock   = "block"

	OpWrite           = "write"
	OpRead            = "read"
	OpAppendFdatasync = "append+fdatasync" // FsyncBlock appended, then fdatasync; pattern=seq, io=buffered
	OpAppendFsync     = "append+fsync"     // the same with fsync (also flushes metadata such as mtime)

	PatternSeq  = "seq"
	PatternRand = "rand"

	IOBuffered = "buffered"
	IODirect   = "direct"
)

// Disk probe defaults, used when a DiskOptions field is zero. They keep the
// whole default probe to about 20 s on a VM with a fast virtual disk.
const (
	DefaultDiskFileSize  = 256 << 20
	DefaultPointDuration = 500 * time.Millisecond
	DefaultFsyncOps      = 1000
	DefaultFsyncBlock    = 4 << 10
	DefaultFsyncTimeout  = 5 * time.Second
	DefaultReps          = 1
)

// DefaultBlockSizes are the disk probe's block sizes when
// DiskOptions.BlockSizes is empty: a page, a typical batch, a large read.
var DefaultBlockSizes = []int{4 << 10, 64 << 10, 1 << 20}

// maxBlockSize bounds one I/O, and so the aligned buffer the probe maps.
const maxBlockSize = 64 << 20

// DiskOptions configure Disk. Only Dir is required.
type DiskOptions struct {
	// Dir is the directory the probe's files go in, on the file system and
	// device to measure. It must exist. The files are removed when the probe
	// returns.
	Dir string
	// FileSize is the size of the file the read and write points use.
	// Default DefaultDiskFileSize (256 MiB). It must be a multiple of 4096 and
	// at least the largest block size. Make it larger than the device's
	// cache (and, for a VM, the host's) to see the device itself.
	FileSize int64
	// BlockSizes are the I/O sizes of the read and write points, each a
	// multiple of 512 (of 4096 when IO includes direct) up to 64 MiB.
	// Default DefaultBlockSizes (4K, 64K, 1M).
	BlockSizes []int
	// Ops are the operations to measure, in this order: OpWrite, OpRead,
	// OpAppendFdatasync, OpAppendFsync. Default all four. The append ops
	// ignore Patterns, IO and BlockSizes (they are sequential, buffered and
	// FsyncBlock bytes).
	Ops []string
	// Patterns: PatternSeq, PatternRand. Default both.
	Patterns []string
	// IO: IOBuffered, IODirect. Default both.
	IO []string
	// BufferedRandomReads adds the points op=read/pattern=rand/io=buffered,
	// which are left out by default: random reads through the page cache
	// measure memory as soon as the blocks are cached, so random reads
	// default to O_DIRECT.
	BufferedRandomReads bool
	// PointDuration bounds each read or write point, which also stops after
	// moving FileSize bytes. Default DefaultPointDuration (500 ms).
	PointDuration time.Duration
	// FsyncOps is how many appends (each followed by its sync) an append
	// point makes. Default DefaultFsyncOps (1000).
	FsyncOps int
	// FsyncBlock is the size of one append. Default DefaultFsyncBlock
	// (4 KiB).
	FsyncBlock int
	// FsyncTimeout stops an append point early on a slow disk (a 7200 rpm
	// disk needs ~10 s for 1000 syncs). Default DefaultFsyncTimeout (5 s).
	FsyncTimeout time.Duration
	// Reps is how many times each point is measured. Default DefaultReps
	// (1); reports want 5 or more. Repetitions are interleaved: every point
	// once, then every point again, so a drift in the machine's state
	// spreads over all points.
	Reps int
	// Seed seeds the random offsets. Any value is a valid seed; the same
	// seed gives the same offsets.
	Seed int64
	// RandomWriteSpan, when set, makes the O_DIRECT random write points
	// (op=write/pattern=rand/io=direct) write at offsets over a second file
	// of this many bytes instead of the probe file (buffered random writes
	// are sorted by writeback, and a span would make their closing
	// fdatasync write thousands of pages far apart): a file preallocated with
	// fallocate(2), never written in full, so the writes spread over that
	// much of the device, as random writes over a whole disk or array do.
	// On an emulated disk (harness/device/diskfs) a preallocated file is
	// laid out over the modelled device, so a span near its capacity
	// measures random writes over the whole array, with seeks across the
	// whole stroke; inside the probe file they land in its region only, a
	// short seek apart. On a real file system the span takes that much space (as
	// unwritten extents). Zero (the default): the probe file. It must be a
	// multiple of 4096 and at least FileSize.
	RandomWriteSpan int64
	// DeviceTime, when set, reads the device time an emulated disk under
	// Dir has charged so far (diskfs.Status.Waited): each point then also
	// reports its figures over the device time it was charged
	// (MetricDeviceMBPerSec, MetricDeviceOpsPerSec), beside those over the
	// wall clock, which include the FUSE round trips.
	DeviceTime func() time.Duration
}

// Metrics of points measured on an emulated disk (DiskOptions.DeviceTime,
// MemoryOptions.DeviceTime): the same counts over the modelled device time
// the points were charged rather than the wall clock.
const (
	MetricDeviceMBPerSec     = "device-MB/s"
	MetricDeviceOpsPerSec    = "device-ops/s"
	MetricDeviceValuesPerSec = "device-values/s"
	MetricDeviceMs           = "device-ms" // the device time a point was charged
)

// deviceClock reads DeviceTime, or nothing.
type deviceClock func() time.Duration

func (c deviceClock) start() time.Duration {
	if c == nil {
		return 0
	}
	return c()
}

// add puts the figures over the device time since t0 into m: MB/s and
// ops/s (or values/s) of n units of size bytes.
func (c deviceClock) add(m map[string]float64, t0 time.Duration, n int64, size int, values bool) {
	if c == nil || m == nil {
		return
	}
	d := c() - t0
	m[MetricDeviceMs] = float64(d) / 1e6
	if d <= 0 {
		return
	}
	if values {
		m[MetricDeviceValuesPerSec] = float64(n) / d.Seconds()
	} else {
		m[MetricDeviceOpsPerSec] = float64(n) / d.Seconds()
	}
	m[MetricDeviceMBPerSec] = float64(n) * float64(size) / 1e6 / d.Seconds()
}

func (o DiskOptions) validate() (DiskOptions, error) {
	bad := func(format string, args ...any) (DiskOptions, error) {
		return o, fmt.Errorf("%w: DiskOptions."+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	if o.Dir == "" {
		return bad("Dir is empty")
	}
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		return bad("Dir %q is not an existing directory", o.Dir)
	}
	if o.Ops == nil {
		o.Ops = []string{OpWrite, OpRead, OpAppendFdatasync, OpAppendFsync}
	}
	if o.Patterns == nil {
		o.Patterns = []string{PatternSeq, PatternRand}
	}
	if o.IO == nil {
		o.IO = []string{IOBuffered, IODirect}
	}
	if o.BlockSizes == nil {
		o.BlockSizes = slices.Clone(DefaultBlockSizes)
	}
	for name, c := range map[string]struct{ got, allowed []string }{
		"Ops":      {o.Ops, []string{OpWrite, OpRead, OpAppendFdatasync, OpAppendFsync}},
		"Patterns": {o.Patterns, []string{PatternSeq, PatternRand}},
		"IO":       {o.IO, []string{IOBuffered, IODirect}},
	} {
		if len(c.got) == 0 {
			return bad("%s is empty", name)
		}
		for i, v := range c.got {
			if !slices.Contains(c.allowed, v) {
				return bad("%s[%d] = %q: want one of %q", name, i, v, c.allowed)
			}
			if slices.Index(c.got, v) != i {
				return bad("%s[%d] = %q: listed twice", name, i, v)
			}
		}
	}
	if len(o.BlockSizes) == 0 {
		return bad("BlockSizes is empty")
	}
	align := 512
	if slices.Contains(o.IO, IODirect) {
		align = 4096
	}
	for i, bs := range o.BlockSizes {
		if bs <= 0 || bs > maxBlockSize || bs%align != 0 {
			return bad("BlockSizes[%d] = %d: want a multiple of %d in [%d, %d]", i, bs, align, align, maxBlockSize)
		}
	}
	switch {
	case o.FileSize == 0:
		o.FileSize = DefaultDiskFileSize
	case o.FileSize < 0 || o.FileSize%4096 != 0:
		return bad("FileSize = %d: want a positive multiple of 4096", o.FileSize)
	}
	if largest := slices.Max(o.BlockSizes); o.FileSize < int64(largest) {
		return bad("FileSize = %d: smaller than the largest block size %d", o.FileSize, largest)
	}
	if o.RandomWriteSpan != 0 && (o.RandomWriteSpan < o.FileSize || o.RandomWriteSpan%4096 != 0) {
		return bad("RandomWriteSpan = %d: want 0 or a multiple of 4096 of at least FileSize (%d)", o.RandomWriteSpan, o.FileSize)
	}
	switch {
	case o.PointDuration == 0:
		o.PointDuration = DefaultPointDuration
	case o.PointDuration < 0:
		return bad("PointDuration = %v: want > 0", o.PointDuration)
	}
	switch {
	case o.FsyncOps == 0:
		o.FsyncOps = DefaultFsyncOps
	case o.FsyncOps < 0:
		return bad("FsyncOps = %d: want > 0", o.FsyncOps)
	}
	switch {
	case o.FsyncBlock == 0:
		o.FsyncBlock = DefaultFsyncBlock
	case o.FsyncBlock < 0 || o.FsyncBlock > maxBlockSize:
		return bad("FsyncBlock = %d: want (0, %d]", o.FsyncBlock, maxBlockSize)
	}
	switch {
	case o.FsyncTimeout == 0:
		o.FsyncTimeout = DefaultFsyncTimeout
	case o.FsyncTimeout < 0:
		return bad("FsyncTimeout = %v: want > 0", o.FsyncTimeout)
	}
	switch {
	case o.Reps == 0:
		o.Reps = DefaultReps
	case o.Reps < 0:
		return bad("Reps = %d: want > 0", o.Reps)
	}
	return o, nil
}

// diskPoint is one cell of the disk matrix.
type diskPoint struct {
	op, pattern, io string
	block           int
}

func (p diskPoint) result() result.Point {
	return point(FactorOp, p.op, FactorPattern, p.pattern, FactorIO, p.io, FactorBlock, sizeLabel(p.block))
}

func (p diskPoint) append() bool { return p.op == OpAppendFdatasync || p.op == OpAppendFsync }

// diskPoints lists the matrix o asks for, in order.
func diskPoints(o DiskOptions) []diskPoint {
	var pts []diskPoint
	for _, op := range o.Ops {
		if op == OpAppendFdatasync || op == OpAppendFsync {
			pts = append(pts, diskPoint{op, PatternSeq, IOBuffered, o.FsyncBlock})
			continue
		}
		for _, pat := range o.Patterns {
			for _, io := range o.IO {
				if op == OpRead && pat == PatternRand && io == IOBuffered && !o.BufferedRandomReads {
					continue
				}
				for _, bs := range o.BlockSizes {
					pts = append(pts, diskPoint{op, pat, io, bs})
				}
			}
		}
	}
	return pts
}

// Disk runs the disk probe in o.Dir and returns section "disk": one point per
// cell of the matrix, one Rep per repetition, with MB/s, ops/s and
// p50/p99/p99.9/max-us. Points that do not apply here (O_DIRECT on tmpfs) get
// skipped Reps (see Skipped); a failed operation fails its Rep, not the run.
// progress may be nil.
//
// The error is non-nil when the options are invalid (ErrInvalidOptions, no
// points), when the probe file cannot be created or prepared, or when ctx is
// cancelled: then the section holds every point with at least one finished
// repetition (the interrupted repetition is dropped, so with Reps > 1 some
// points have one rep fewer than others) and the error wraps ctx.Err().
func Disk(ctx context.Context, o DiskOptions, progress Progress) (result.Section, error) {
	o, err := o.validate()
	sec := result.Section{Name: SectionDisk, Factors: []string{FactorOp, FactorPattern, FactorIO, FactorBlock}}
	if err != nil {
		return sec, err
	}
	if progress == nil {
		progress = func(int, int, string) {}
	}
	pts := diskPoints(o)
	results := make([]result.Point, len(pts))
	for i, p := range pts {
		results[i] = p.result()
	}
	// finish keeps the points with at least one finished repetition: all of
	// them after a full run, those measured before an interruption.
	finish := func() result.Section {
		for _, r := range results {
			if len(r.Reps) > 0 {
				sec.Points = append(sec.Points, r)
			}
		}
		return sec
	}

	d := &diskRun{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))}
	defer d.close()
	needFile := slices.ContainsFunc(pts, func(p diskPoint) bool { return !p.append() })
	if needFile {
		progress(0, len(pts)*o.Reps, fmt.Sprintf("writing the %s probe file", sizeWords(int(o.FileSize))))
		if err := d.prepare(ctx); err != nil {
			if ctx.Err() != nil {
				return finish(), canceled(ctx)
			}
			return sec, err
		}
	}
	total := len(pts) * o.Reps
	for rep := range o.Reps {
		for i, p := range pts {
			progress(rep*len(pts)+i, total, Describe(SectionDisk, results[i]))
			r, err := d.run(ctx, p)
			if err != nil { // only cancellation
				return finish(), err
			}
			results[i].Reps = append(results[i].Reps, r)
		}
	}
	progress(total, total, "")
	return finish(), nil
}

// diskRun holds the probe file and buffers across points.
type diskRun struct {
	o       DiskOptions
	rng     *rand.Rand
	f       *os.File // buffered I/O
	direct  *os.File // O_DIRECT on the same file; nil when skipReason is set
	skip    string   // why direct points are skipped
	buf     []byte   // page-aligned, the largest block size
	freeBuf func()
	// The random write points' file when RandomWriteSpan is set, like f and
	// direct; spanErr says why it could not be made (the points fail).
	span, spanDirect *os.File
	spanErr          error
}

func (d *diskRun) close() {
	for _, f := range []*os.File{d.direct, d.f, d.spanDirect, d.span} {
		if f != nil {
			_ = f.Close()
		}
	}
	for _, f := range []*os.File{d.f, d.span} {
		if f != nil {
			_ = os.Remove(f.Name())
		}
	}
	if d.freeBuf != nil {
		d.freeBuf()
	}
}

// prepare creates the probe file: FileSize bytes of incompressible data,
// written with 1 MiB writes and fdatasync'ed.
func (d *diskRun) prepare(ctx context.Context) error {
	f, err := os.CreateTemp(d.o.Dir, "weir-probe-*.dat")
	if err != nil {
		return fmt.Errorf("probe: create probe file: %w", err)
	}
	d.f = f
	size := max(slices.Max(d.o.BlockSizes), 1<<20)
	if d.buf, d.freeBuf, err = alignedBuffer(size); err != nil {
		return err
	}
	chunk := d.buf[:1<<20]
	x := uint64(d.o.Seed)
	for off := int64(0); off < d.o.FileSize; off += int64(len(chunk)) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x = fillPattern(chunk, x)
		n := min(int64(len(chunk)), d.o.FileSize-off)
		if _, err := f.WriteAt(chunk[:n], off); err != nil {
			return fmt.Errorf("probe: write probe file: %w", err)
		}
	}
	if err := dropCache(f); err != nil {
		return err
	}
	if slices.Contains(d.o.IO, IODirect) {
		d.direct, d.skip, err = openDirect(f.Name())
		if err != nil {
			return err
		}
	}
	// Writes write this pattern; refill so it is not the file's last MiB.
	fillPattern(d.buf, x)
	if d.o.RandomWriteSpan > 0 && d.direct != nil && slices.Contains(d.o.Ops, OpWrite) && slices.Contains(d.o.Patterns, PatternRand) {
		d.spanErr = d.prepareSpan()
	}
	return nil
}

// prepareSpan creates the random write points' file: RandomWriteSpan bytes
// preallocated, not written.
func (d *diskRun) prepareSpan() error {
	f, err := os.CreateTemp(d.o.Dir, "weir-probe-span-*.dat")
	if err != nil {
		return fmt.Errorf("probe: create the random write span file: %w", err)
	}
	d.span = f
	if err := unix.Fallocate(int(f.Fd()), 0, 0, d.o.RandomWriteSpan); err != nil {
		return fmt.Errorf("probe: fallocate %d bytes for the random write span: %w", d.o.RandomWriteSpan, err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("probe: fdatasync the random write span file: %w", err)
	}
	if d.direct != nil {
		if d.spanDirect, _, err = openDirect(f.Name()); err != nil {
			return err
		}
	}
	return nil
}

// run measures one repetition of p. The error is non-nil only when ctx was
// cancelled; I/O failures come back as a Rep with Error set.
func (d *diskRun) run(ctx context.Context, p diskPoint) (result.Rep, error) {
	if p.append() {
		return d.runAppend(ctx, p)
	}
	f, file, size := d.f, d.f, d.o.FileSize
	if p.io == IODirect {
		if d.direct == nil {
			return skippedRep(d.skip), nil
		}
		f = d.direct
	}
	failed := func(err error) (result.Rep, error) {
		return result.Rep{Started: time.Now(), Error: err.Error()}, nil
	}
	if p.op == OpWrite && p.pattern == PatternRand && p.io == IODirect && d.o.RandomWriteSpan > 0 {
		if d.spanErr != nil {
			return failed(d.spanErr)
		}
		f, file, size = d.span, d.span, d.o.RandomWriteSpan
		if p.io == IODirect {
			f = d.spanDirect
		}
	}
	if err := dropCache(file); err != nil {
		return failed(err)
	}
	buf := d.buf[:p.block]
	blocks := size / int64(p.block)        // where offsets are drawn
	limit := d.o.FileSize / int64(p.block) // at most FileSize bytes, whatever the span
	lat := make(latencies, 0, min(limit, 1<<20))
	dev := deviceClock(d.o.DeviceTime)
	dev0 := dev.start()
	started := time.Now()
	deadline := started.Add(d.o.PointDuration)
	var ops int64
	for ops < limit {
		if ctx.Err() != nil {
			return result.Rep{}, canceled(ctx)
		}
		off := ops * int64(p.block)
		if p.pattern == PatternRand {
			off = d.rng.Int64N(blocks) * int64(p.block)
		}
		var err error
		if p.op == OpWrite {
			stamp(buf, ops)
		}
		t0 := time.Now()
		if p.op == OpWrite {
			_, err = f.WriteAt(buf, off)
		} else {
			_, err = f.ReadAt(buf, off)
		}
		t1 := time.Now()
		if err != nil {
			return failed(fmt.Errorf("probe: %s at offset %d: %w", p.op, off, err))
		}
		lat = append(lat, t1.Sub(t0))
		ops++
		if !t1.Before(deadline) {
			break
		}
	}
	// Every write point ends with an fdatasync in its window, buffered or
	// O_DIRECT: its figures are what reached the media, not what a page
	// cache or the device's write cache accepted.
	if p.op == OpWrite {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return failed(fmt.Errorf("probe: fdatasync: %w", err))
		}
	}
	r := rwRep(started, time.Since(started), ops, p.block, lat)
	dev.add(r.Metrics, dev0, ops, p.block, false)
	return r, nil
}

// stamp writes n into the first bytes of every 4 KiB of buf, so no two
// written blocks are identical and deduplicating storage cannot skip them.
func stamp(buf []byte, n int64) {
	for i := 0; i+8 <= len(buf); i += 4096 {
		binary.LittleEndian.PutUint64(buf[i:], uint64(n))
	}
}

// rwRep computes a Rep's metrics. ops/s and MB/s share one count and one
// window, so MB/s = ops/s × block / 1e6 exactly.
func rwRep(started time.Time, window time.Duration, ops int64, block int, lat latencies) result.Rep {
	secs := window.Seconds()
	m := map[string]float64{
		result.OpsPerSec: float64(ops) / secs,
		result.MBPerSec:  float64(ops) * float64(block) / 1e6 / secs,
	}
	lat.add(m)
	return result.Rep{Started: started, Duration: window, Metrics: m}
}

// runAppend measures one repetition of an append point on a new file.
func (d *diskRun) runAppend(ctx context.Context, p diskPoint) (result.Rep, error) {
	failed := func(err error) (result.Rep, error) {
		return result.Rep{Started: time.Now(), Error: err.Error()}, nil
	}
	f, err := os.CreateTemp(d.o.Dir, "weir-probe-append-*.dat")
	if err != nil {
		return failed(fmt.Errorf("probe: create append file: %w", err))
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	buf := make([]byte, p.block)
	fillPattern(buf, uint64(d.o.Seed)+1)
	sync := unix.Fdatasync
	if p.op == OpAppendFsync {
		sync = unix.Fsync
	}
	fd := int(f.Fd())
	lat := make(latencies, 0, d.o.FsyncOps)
	dev := deviceClock(d.o.DeviceTime)
	dev0 := dev.start()
	started := time.Now()
	deadline := started.Add(d.o.FsyncTimeout)
	var ops int64
	for ops < int64(d.o.FsyncOps) {
		if ctx.Err() != nil {
			return result.Rep{}, canceled(ctx)
		}
		stamp(buf, ops)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, ops*int64(p.block)); err != nil {
			return failed(fmt.Errorf("probe: append: %w", err))
		}
		if err := sync(fd); err != nil {
			return failed(fmt.Errorf("probe: %s: %w", p.op, err))
		}
		t1 := time.Now()
		lat = append(lat, t1.Sub(t0))
		ops++
		if !t1.Before(deadline) {
			break
		}
	}
	r := rwRep(started, time.Since(started), ops, p.block, lat)
	dev.add(r.Metrics, dev0, ops, p.block, false)
	return r, nil
}
