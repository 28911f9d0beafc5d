package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

// Memory section factors, in matrix order, and their levels.
const (
	FactorMedium = "medium"
	FactorAccess = "access"

	MediumMemory = "memory"
	MediumDisk   = "disk"

	AccessSeq  = "seq"
	AccessRand = "rand"
)

// Memory probe defaults, used when a MemoryOptions field is zero: about 5 s
// in all.
const (
	DefaultMemoryBytes         = 256 << 20
	DefaultMemoryDiskBytes     = 256 << 20
	DefaultMemoryPointDuration = time.Second
	minMemoryBytes             = 64 << 10
	maxMemoryBytes             = 16 << 30 // random indexes are drawn as 32-bit fractions of the length
	memoryDiskReadSize         = 1 << 20  // sequential disk values are read in 1 MiB blocks
	memoryDiskRandomReadSize   = 4 << 10  // one 4 KiB direct read per random disk value
	memoryChunk                = 1 << 16  // values read between clock and ctx checks
	valueSize                  = 8        // an int64
)

// MemoryOptions configure Memory. The zero value is valid and measures
// memory only.
type MemoryOptions struct {
	// Bytes is the size of the int64 array in memory, a multiple of 8 in
	// [64 KiB, 16 GiB]. Default DefaultMemoryBytes (256 MiB): far larger than
	// any CPU cache, so random reads miss them. A small array measures the
	// caches instead.
	Bytes int64
	// Dir is where the file for the disk points goes (the directory must
	// exist; the file is removed when the probe returns). Empty leaves the
	// disk points out.
	Dir string
	// DiskBytes is the size of that file, a multiple of 4096 of at least
	// 64 KiB. Default DefaultMemoryDiskBytes (256 MiB).
	DiskBytes int64
	// PointDuration bounds each point. The sequential disk point also stops
	// after one pass over the file. Default DefaultMemoryPointDuration (1 s).
	PointDuration time.Duration
	// Reps is how many times each point is measured. Default 1.
	Reps int
	// Seed seeds the random indexes and offsets.
	Seed int64
	// DeviceTime, as DiskOptions.DeviceTime: the disk points also report
	// MetricDeviceValuesPerSec over the device time they were charged.
	DeviceTime func() time.Duration
}

func (o MemoryOptions) validate() (MemoryOptions, error) {
	bad := func(format string, args ...any) (MemoryOptions, error) {
		return o, fmt.Errorf("%w: MemoryOptions."+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.Bytes == 0:
		o.Bytes = DefaultMemoryBytes
	case o.Bytes < minMemoryBytes || o.Bytes > maxMemoryBytes || o.Bytes%valueSize != 0:
		return bad("Bytes = %d: want a multiple of 8 in [%d, %d]", o.Bytes, minMemoryBytes, int64(maxMemoryBytes))
	}
	if o.Dir != "" {
		if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
			return bad("Dir %q is not an existing directory", o.Dir)
		}
	}
	switch {
	case o.DiskBytes == 0:
		o.DiskBytes = DefaultMemoryDiskBytes
	case o.DiskBytes < minMemoryBytes || o.DiskBytes%4096 != 0:
		return bad("DiskBytes = %d: want a multiple of 4096 of at least %d", o.DiskBytes, minMemoryBytes)
	}
	switch {
	case o.PointDuration == 0:
		o.PointDuration = DefaultMemoryPointDuration
	case o.PointDuration < 0:
		return bad("PointDuration = %v: want > 0", o.PointDuration)
	}
	switch {
	case o.Reps == 0:
		o.Reps = DefaultReps
	case o.Reps < 0:
		return bad("Reps = %d: want > 0", o.Reps)
	}
	return o, nil
}

// Memory runs the memory probe and returns section "memory": values/s (and
// MB/s) for sequential and random int64 reads from memory and, when o.Dir is
// set, from a file on disk, so a report can set this machine beside Jacobs'
// 2009 comparison (References). Errors are as for Disk: invalid options, a
// file that cannot be prepared, or cancellation (the finished points and an
// error wrapping ctx.Err()).
func Memory(ctx context.Context, o MemoryOptions, progress Progress) (result.Section, error) {
	o, err := o.validate()
	sec := result.Section{Name: SectionMemory, Factors: []string{FactorMedium, FactorAccess}}
	if err != nil {
		return sec, err
	}
	if progress == nil {
		progress = func(int, int, string) {}
	}
	type memPoint struct{ medium, access string }
	pts := []memPoint{{MediumMemory, AccessSeq}, {MediumMemory, AccessRand}}
	if o.Dir != "" {
		pts = append(pts, memPoint{MediumDisk, AccessSeq}, memPoint{MediumDisk, AccessRand})
	}
	results := make([]result.Point, len(pts))
	for i, p := range pts {
		results[i] = point(FactorMedium, p.medium, FactorAccess, p.access)
	}
	finish := func() result.Section {
		for _, r := range results {
			if len(r.Reps) > 0 {
				sec.Points = append(sec.Points, r)
			}
		}
		return sec
	}

	total := len(pts) * o.Reps
	progress(0, total, fmt.Sprintf("filling %s of memory", sizeWords(int(o.Bytes))))
	m := &memRun{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0xda3e39cb94b95bdb))}
	defer m.close()
	m.arr = make([]int64, o.Bytes/valueSize)
	for i := range m.arr { // touch every page: untouched pages all map the one zero page
		m.arr[i] = int64(i)
	}
	if o.Dir != "" {
		progress(0, total, fmt.Sprintf("writing the %s values file", sizeWords(int(o.DiskBytes))))
		if err := m.prepareDisk(ctx); err != nil {
			if ctx.Err() != nil {
				return finish(), canceled(ctx)
			}
			return finish(), err
		}
	}
	for rep := range o.Reps {
		for i, p := range pts {
			progress(rep*len(pts)+i, total, Describe(SectionMemory, results[i]))
			var r result.Rep
			switch p {
			case memPoint{MediumMemory, AccessSeq}:
				r = m.memorySeq(ctx)
			case memPoint{MediumMemory, AccessRand}:
				r = m.memoryRand(ctx)
			case memPoint{MediumDisk, AccessSeq}:
				r = m.diskSeq(ctx)
			default:
				r = m.diskRand(ctx)
			}
			if ctx.Err() != nil {
				return finish(), canceled(ctx)
			}
			results[i].Reps = append(results[i].Reps, r)
		}
	}
	progress(total, total, "")
	return finish(), nil
}

// sink keeps the compiler from discarding sums it could prove unused.
var sink int64

type memRun struct {
	o    MemoryOptions
	rng  *rand.Rand
	arr  []int64
	file *os.File // the values file, opened O_DIRECT; nil when skip is set
	name string
	skip string
	buf  []byte // page-aligned, memoryDiskReadSize
	free func()
}

func (m *memRun) close() {
	if m.file != nil {
		_ = m.file.Close()
	}
	if m.name != "" {
		_ = os.Remove(m.name)
	}
	if m.free != nil {
		m.free()
	}
}

// valuesRep builds a Rep from a count of values read in a window.
func valuesRep(started time.Time, window time.Duration, values int64) result.Rep {
	secs := window.Seconds()
	return result.Rep{Started: started, Duration: window, Metrics: map[string]float64{
		result.ValuesPerSec: float64(values) / secs,
		result.MBPerSec:     float64(values) * valueSize / 1e6 / secs,
	}}
}

func mismatch(format string, args ...any) result.Rep {
	return result.Rep{Started: time.Now(), Error: fmt.Errorf("%w: "+format, append([]any{ErrMismatch}, args...)...).Error()}
}

// memorySeq sums the array front to back, whole passes until the window
// ends, checking each pass's sum (arr[i] == i).
func (m *memRun) memorySeq(ctx context.Context) result.Rep {
	n := int64(len(m.arr))
	want := n * (n - 1) / 2
	started := time.Now()
	deadline := started.Add(m.o.PointDuration)
	var values int64
	for {
		var s int64
		for _, v := range m.arr {
			s += v
		}
		values += n
		if s != want {
			return mismatch("memory pass summed to %d, want %d", s, want)
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	return valuesRep(started, time.Since(started), values)
}

// memoryRand reads arr at independent random indexes (xorshift64, mapped to
// [0, n) by a multiply-shift), so the CPU may overlap several cache misses,
// as it would for any scan of unrelated records. Each value is checked
// against its index.
func (m *memRun) memoryRand(ctx context.Context) result.Rep {
	n := uint64(len(m.arr))
	x := m.rng.Uint64() | 1
	started := time.Now()
	deadline := started.Add(m.o.PointDuration)
	var values, diff int64
	for {
		for range memoryChunk {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			j := ((x >> 32) * n) >> 32
			diff += m.arr[j] - int64(j)
		}
		values += memoryChunk
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	sink += diff
	if diff != 0 {
		return mismatch("random memory reads differ from their indexes by %d in sum", diff)
	}
	return valuesRep(started, time.Since(started), values)
}

// prepareDisk writes the values file (little-endian int64 i at index i),
// makes it durable, drops it from the page cache and opens it O_DIRECT.
func (m *memRun) prepareDisk(ctx context.Context) error {
	f, err := os.CreateTemp(m.o.Dir, "weir-probe-values-*.dat")
	if err != nil {
		return fmt.Errorf("probe: create values file: %w", err)
	}
	m.name = f.Name()
	defer f.Close()
	if m.buf, m.free, err = alignedBuffer(memoryDiskReadSize); err != nil {
		return err
	}
	for off := int64(0); off < m.o.DiskBytes; off += memoryDiskReadSize {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		chunk := m.buf[:min(memoryDiskReadSize, m.o.DiskBytes-off)]
		for i := 0; i < len(chunk); i += valueSize {
			binary.LittleEndian.PutUint64(chunk[i:], uint64((off+int64(i))/valueSize))
		}
		if _, err := f.WriteAt(chunk, off); err != nil {
			return fmt.Errorf("probe: write values file: %w", err)
		}
	}
	if err := dropCache(f); err != nil {
		return err
	}
	m.file, m.skip, err = openDirect(m.name)
	return err
}

// diskSeq reads the values file front to back with O_DIRECT and sums the
// values: one pass, or less if the window ends first.
func (m *memRun) diskSeq(ctx context.Context) result.Rep {
	if m.file == nil {
		return skippedRep(m.skip)
	}
	dev := deviceClock(m.o.DeviceTime)
	dev0 := dev.start()
	started := time.Now()
	deadline := started.Add(m.o.PointDuration)
	var values, s int64
	var off int64
	for off < m.o.DiskBytes && ctx.Err() == nil && time.Now().Before(deadline) {
		chunk := m.buf[:min(memoryDiskReadSize, m.o.DiskBytes-off)]
		if _, err := m.file.ReadAt(chunk, off); err != nil {
			return result.Rep{Started: started, Error: fmt.Sprintf("probe: read values file at %d: %v", off, err)}
		}
		for i := 0; i < len(chunk); i += valueSize {
			s += int64(binary.LittleEndian.Uint64(chunk[i:]))
		}
		values += int64(len(chunk) / valueSize)
		off += int64(len(chunk))
	}
	window := time.Since(started)
	sink += s
	if want := values * (values - 1) / 2; s != want {
		return mismatch("the first %d values of the file summed to %d, want %d", values, s, want)
	}
	r := valuesRep(started, window, values)
	dev.add(r.Metrics, dev0, values, valueSize, true)
	return r
}

// diskRand reads one value per O_DIRECT 4 KiB read at a random offset and
// checks it against its index.
func (m *memRun) diskRand(ctx context.Context) result.Rep {
	if m.file == nil {
		return skippedRep(m.skip)
	}
	nValues := m.o.DiskBytes / valueSize
	perBlock := int64(memoryDiskRandomReadSize / valueSize)
	buf := m.buf[:memoryDiskRandomReadSize]
	dev := deviceClock(m.o.DeviceTime)
	dev0 := dev.start()
	started := time.Now()
	deadline := started.Add(m.o.PointDuration)
	var values int64
	for ctx.Err() == nil && time.Now().Before(deadline) {
		j := m.rng.Int64N(nValues)
		off := j / perBlock * memoryDiskRandomReadSize
		if _, err := m.file.ReadAt(buf, off); err != nil {
			return result.Rep{Started: started, Error: fmt.Sprintf("probe: read values file at %d: %v", off, err)}
		}
		if v := int64(binary.LittleEndian.Uint64(buf[(j%perBlock)*valueSize:])); v != j {
			return mismatch("value %d read back as %d", j, v)
		}
		values++
	}
	r := valuesRep(started, time.Since(started), values)
	dev.add(r.Metrics, dev0, values, valueSize, true)
	return r
}
