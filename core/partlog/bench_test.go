package partlog_test

// Storage-engine benchmarks. Names carry config keys (size=, flush=, impl=, ...)
// so benchstat can slice them, and scripts/benchratio turns the
// BenchmarkAppend output into the weir/raw throughput table.
//
//	go test -run '^$' -bench '^BenchmarkAppend$' -count 5 ./core/partlog/ | go run ./scripts/benchratio -key impl -base raw -goal 0.8 -check

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// benchTS is the first record timestamp of the batches the benchmarks build.
const benchTS = 1_700_000_000_000

// appendWindow bounds the bytes one log (or raw file) receives: when the next
// append would pass it, the timer stops, the log is closed and deleted and a
// fresh one opened (the raw loop closes, removes and re-creates its file), and
// the timer restarts. It is below the default SegmentBytes (1 GiB), so no
// segment rolls inside the timer: the benchmark measures the append path, not
// the fsync that seals a rolled segment, whose cost depends on how much of it
// the kernel has already written back (see BenchmarkAppendRoll for that).
const appendWindow = 256 << 20

var appendSizes = []struct {
	name  string
	bytes int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

var flushModes = []struct {
	name   string
	policy func() flushpolicy.Policy
}{{"never", flushpolicy.Never}, {"every-batch", flushpolicy.EveryBatch}}

// BenchmarkAppend compares Log.Append with a raw os.File.Write loop writing the
// same batch bytes, one batch per op; raw and weir of the same size and flush
// policy run back to back. flush=every-batch adds an fsync per op to both
// (File.Sync for raw, the EveryBatch policy for weir).
func BenchmarkAppend(b *testing.B) {
	for _, size := range appendSizes {
		batch := testbatch.OfSize(1, size.bytes, benchTS)
		for _, fl := range flushModes {
			name := "size=" + size.name + "/flush=" + fl.name
			b.Run(name+"/impl=raw", func(b *testing.B) {
				benchAppendRaw(b, batch, fl.name == "every-batch")
			})
			b.Run(name+"/impl=weir", func(b *testing.B) {
				benchAppendWeir(b, batch, partlog.Config{FlushPolicy: fl.policy()})
			})
		}
	}
}

// BenchmarkAppendRoll is BenchmarkAppend/flush=never/impl=weir with rolls
// inside the timer: 64 MiB segments, so every 64 MiB one append pays for
// creating the next segment and for sealing (fsyncing) the full one.
// Retention keeps two segments, applied with the timer stopped.
func BenchmarkAppendRoll(b *testing.B) {
	const segBytes = 64 << 20
	for _, size := range appendSizes {
		batch := testbatch.OfSize(1, size.bytes, benchTS)
		b.Run("size="+size.name+"/flush=never/seg=64MiB", func(b *testing.B) {
			l := openBenchLog(b, filepath.Join(b.TempDir(), "log"), partlog.Config{SegmentBytes: segBytes, RetentionBytes: segBytes})
			defer closeBenchLog(b, l)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			ctx := context.Background()
			perSeg := max(1, segBytes/len(batch))
			for i := 0; b.Loop(); i++ {
				if _, err := l.Append(ctx, batch, 0); err != nil {
					b.Fatal(err)
				}
				if i%perSeg == perSeg-1 {
					b.StopTimer()
					if _, err := l.ApplyRetention(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// windowed runs op once per b.Loop iteration and calls reset with the timer
// stopped after every appendWindow bytes.
func windowed(b *testing.B, batchBytes int, op, reset func()) {
	b.SetBytes(int64(batchBytes))
	b.ReportAllocs()
	perWindow := max(1, appendWindow/batchBytes)
	for i := 0; b.Loop(); i++ {
		op()
		if i%perWindow == perWindow-1 {
			b.StopTimer()
			reset()
			b.StartTimer()
		}
	}
}

func benchAppendRaw(b *testing.B, batch []byte, sync bool) {
	name := filepath.Join(b.TempDir(), "raw.log")
	var f *os.File
	open := func() {
		var err error
		if f, err = os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	closeRemove := func() {
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(name); err != nil {
			b.Fatal(err)
		}
	}
	open()
	windowed(b, len(batch), func() {
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}, func() { closeRemove(); open() })
	closeRemove()
}

func benchAppendWeir(b *testing.B, batch []byte, cfg partlog.Config) {
	root := b.TempDir()
	ctx := context.Background()
	n := 0
	var l *partlog.Log
	open := func() {
		n++
		l = openBenchLog(b, filepath.Join(root, strconv.Itoa(n)), cfg)
	}
	closeRemove := func() {
		closeBenchLog(b, l)
		if err := os.RemoveAll(l.Dir()); err != nil {
			b.Fatal(err)
		}
	}
	open()
	windowed(b, len(batch), func() {
		if _, err := l.Append(ctx, batch, 0); err != nil {
			b.Fatal(err)
		}
	}, func() { closeRemove(); open() })
	closeRemove()
}

func openBenchLog(tb testing.TB, dir string, cfg partlog.Config) *partlog.Log {
	tb.Helper()
	l, _, err := partlog.Open(vfs.Default, dir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func closeBenchLog(tb testing.TB, l *partlog.Log) {
	tb.Helper()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkRead reads a 64 MiB log of 16 KiB batches (in the page cache)
// sequentially, 1 MiB per Read, wrapping at the end. path=copy copies the bytes
// out with Slice.Bytes (the path for file systems that cannot sendfile);
// path=slice only finds the range, as the sendfile path does before sending.
// MB/s counts the bytes the reads returned.
func BenchmarkRead(b *testing.B) {
	const logBytes, maxBytes = 64 << 20, 1 << 20
	l := openBenchLog(b, filepath.Join(b.TempDir(), "log"), partlog.Config{})
	defer closeBenchLog(b, l)
	batch := testbatch.OfSize(1, 16<<10, benchTS)
	ctx := context.Background()
	for range logBytes / len(batch) {
		if _, err := l.Append(ctx, batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	for _, path := range []string{"copy", "slice"} {
		b.Run("batch=16KiB/max=1MiB/path="+path, func(b *testing.B) {
			b.ReportAllocs()
			var off, total int64
			for b.Loop() {
				sl, err := l.Read(off, maxBytes, partlog.NoLimit)
				if err != nil {
					b.Fatal(err)
				}
				if path == "copy" {
					if _, err := sl.Bytes(); err != nil {
						b.Fatal(err)
					}
				}
				sl.Release()
				total += sl.Size
				if off = sl.NextOffset; off >= end {
					off = 0
				}
			}
			b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(total)/float64(b.N), "B/read")
		})
	}
}

// The 1,000-segment log of BenchmarkLookup1000Segments, BenchmarkOpen1000Segments
// and TestMemoryPerSegment: 64 KiB segments of 1 KiB batches, one record each,
// timestamps growing by 1 ms per batch, default index interval (4 KiB).
const (
	manySegments     = 1000
	manySegmentBytes = 64 << 10
	manyBatchBytes   = 1 << 10
)

// buildManySegments writes a closed log of manySegments segments into a MemFS
// and returns it with the log's directory. Rolls on an OS file system cost
// several fsyncs each, so the log is built in memory; copyToOS copies it out.
func buildManySegments(tb testing.TB) (*vfs.MemFS, string) {
	tb.Helper()
	const memDir = "/log"
	fs := vfs.NewMem()
	l, _, err := partlog.Open(fs, memDir, partlog.Config{SegmentBytes: manySegmentBytes})
	if err != nil {
		tb.Fatal(err)
	}
	perSeg := manySegmentBytes / len(testbatch.OfSize(0, manyBatchBytes, benchTS))
	ctx := context.Background()
	for i := range manySegments * perSeg {
		if _, err := l.Append(ctx, testbatch.OfSize(uint64(i), manyBatchBytes, benchTS+int64(i)), 0); err != nil {
			tb.Fatal(err)
		}
	}
	if n := len(l.Segments()); n != manySegments {
		tb.Fatalf("built %d segments, want %d", n, manySegments)
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return fs, memDir
}

// copyToOS copies every file of memDir into dir, a directory on the OS.
func copyToOS(tb testing.TB, fs *vfs.MemFS, memDir, dir string) {
	tb.Helper()
	names, err := fs.List(memDir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range names {
		data, err := vfs.ReadFile(fs, memDir+"/"+n)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// manySegmentsOnDisk builds the 1,000-segment log in a temporary directory.
func manySegmentsOnDisk(tb testing.TB) string {
	tb.Helper()
	fs, memDir := buildManySegments(tb)
	dir := tb.TempDir()
	copyToOS(tb, fs, memDir, dir)
	return dir
}

// BenchmarkLookup1000Segments reads one batch at a random offset of a
// 1,000-segment log: segment binary search, sparse index lookup, header scan.
func BenchmarkLookup1000Segments(b *testing.B) {
	fs, memDir := buildManySegments(b)
	dir := b.TempDir()
	copyToOS(b, fs, memDir, dir)
	for _, im := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"os", vfs.Default, dir}, {"mem", fs, memDir}} {
		b.Run("fs="+im.name, func(b *testing.B) {
			l, _, err := partlog.Open(im.fs, im.dir, partlog.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer closeBenchLog(b, l)
			rng := rand.New(rand.NewPCG(1, 2))
			offs := make([]int64, 1<<12)
			for i := range offs {
				offs[i] = rng.Int64N(l.EndOffset())
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				off := offs[i%len(offs)]
				sl, err := l.Read(off, 1, partlog.NoLimit)
				if err != nil {
					b.Fatal(err)
				}
				if sl.FirstOffset > off || sl.NextOffset <= off {
					b.Fatalf("read %d returned [%d, %d)", off, sl.FirstOffset, sl.NextOffset)
				}
				sl.Release()
			}
		})
	}
}

// BenchmarkOpen1000Segments opens (after a clean shutdown) a log of 1,000
// segments; the Close between opens is not timed. It also reports the heap an
// open log holds per segment (B/segment), the index entries among it
// (index-B/segment: the .index and .timeindex bytes, which Open loads whole),
// and the log's own estimate (estimate-B/segment, SegmentInfo.MemBytes).
func BenchmarkOpen1000Segments(b *testing.B) {
	dir := manySegmentsOnDisk(b)
	m := measureOpen(b, dir)
	for b.Loop() {
		l := openBenchLog(b, dir, partlog.Config{})
		b.StopTimer()
		closeBenchLog(b, l)
		b.StartTimer()
	}
	b.ReportMetric(m.heap, "B/segment")
	b.ReportMetric(m.index, "index-B/segment")
	b.ReportMetric(m.estimate, "estimate-B/segment")
}

// openMemory is what an open log holds, per segment.
type openMemory struct {
	segments              int
	heap, index, estimate float64
}

// measureOpen opens the closed log in dir and measures the live heap it adds.
// Nothing else may run meanwhile (no parallel tests).
func measureOpen(tb testing.TB, dir string) openMemory {
	tb.Helper()
	var before, after runtime.MemStats
	// Two collections: the first moves sync.Pool contents to the victim
	// cache, the second frees them.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := openBenchLog(tb, dir, partlog.Config{})
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	segs := l.Segments()
	runtime.KeepAlive(l)
	closeBenchLog(tb, l)

	m := openMemory{segments: len(segs)}
	var estimate int
	for _, s := range segs {
		estimate += s.MemBytes
	}
	var index int64
	for _, suffix := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		matches, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
		if err != nil {
			tb.Fatal(err)
		}
		for _, name := range matches {
			fi, err := os.Stat(name)
			if err != nil {
				tb.Fatal(err)
			}
			index += fi.Size()
		}
	}
	n := float64(len(segs))
	m.heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	m.index = float64(index) / n
	m.estimate = float64(estimate) / n
	return m
}
