package partlog

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

func TestAppendAndRead(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 8 << 10, IndexIntervalBytes: 512})
	defer l.Close()
	m := newModel()
	for i := 0; i < 60; i++ {
		var bs [][]byte
		for j := 0; j <= i%3; j++ { // one, two or three batches per append
			bs = append(bs, batch(i*10+j, 1+i%5, 100+i*7))
		}
		res, err := m.append(t, l, bs...)
		if err != nil {
			t.Fatal(err)
		}
		if res.NextOffset != l.EndOffset() {
			t.Fatalf("result next %d, log end %d", res.NextOffset, l.EndOffset())
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("expected rolls at 8 KiB, segments: %s", segNames(l))
	}
	m.check(t, l, 0, l.EndOffset())
	// Small maxBytes still makes progress one batch at a time; large reads
	// stay within one segment.
	if got := readAll(t, l, 1); len(got) != len(m.batches) {
		t.Fatalf("one-batch reads found %d batches, want %d", len(got), len(m.batches))
	}
	for _, tc := range []struct {
		off  int64
		want error
	}{{-1, ErrOffsetOutOfRange}, {l.EndOffset() + 1, ErrOffsetOutOfRange}} {
		if _, err := l.Read(tc.off, 100, NoLimit); !errors.Is(err, tc.want) {
			t.Errorf("Read(%d) = %v, want %v", tc.off, err, tc.want)
		}
	}
	if sl, err := l.Read(l.EndOffset(), 100, NoLimit); err != nil || sl.Size != 0 {
		t.Fatalf("read at the end: %+v, %v", sl, err)
	}
	if sl, err := l.Read(10, 1<<20, 10); err != nil || sl.Size != 0 {
		t.Fatalf("read at the high watermark: %+v, %v", sl, err)
	}
	sl, err := l.Read(0, 1<<20, 12)
	if err != nil || sl.NextOffset > 12 || sl.Size == 0 {
		t.Fatalf("read below the high watermark: [%d,%d) %v", sl.FirstOffset, sl.NextOffset, err)
	}
	sl.Release()
}

// Invalid appends are rejected whole: nothing is written, no offset is used,
// and the caller's bytes are not rewritten.
func TestAppendRejects(t *testing.T) {
	good := batch(1, 2, 50)
	tooBig := batch(2, 1, 2000)
	corrupt := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		buf  []byte
		want error
	}{
		{"empty", nil, record.ErrCorrupt},
		{"crc", corrupt(func(b []byte) { b[70] ^= 1 }), record.ErrBadCRC},
		{"magic", corrupt(func(b []byte) { b[16] = 1 }), record.ErrBadMagic},
		{"torn", good[:len(good)-1], record.ErrShort},
		{"good then torn", append(append([]byte{}, good...), good[:30]...), record.ErrShort},
		{"good then corrupt", append(append([]byte{}, good...), corrupt(func(b []byte) { b[80] ^= 4 })...), record.ErrBadCRC},
		{"too large", tooBig, ErrBatchTooLarge},
		{"count mismatch", corrupt(func(b []byte) {
			b[26] = 5 // lastOffsetDelta 5 with 2 records; fix the CRC so only the count is wrong
			fixCRC(b)
		}), record.ErrBadRecords},
	}
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{MaxBatchBytes: 1024})
	defer l.Close()
	m := newModel()
	if _, err := m.append(t, l, good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]byte{}, tc.buf...)
			end, size := l.EndOffset(), l.Size()
			_, err := l.Append(ctx, tc.buf, 0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if l.EndOffset() != end || l.Size() != size {
				t.Fatalf("log changed: end %d->%d size %d->%d", end, l.EndOffset(), size, l.Size())
			}
			if !bytes.Equal(before, tc.buf) {
				t.Fatal("rejected buffer was modified")
			}
			if l.Err() != nil {
				t.Fatalf("bad input failed the log: %v", l.Err())
			}
		})
	}
	if _, err := m.append(t, l, good); err != nil {
		t.Fatal(err)
	}
	m.check(t, l, 0, l.EndOffset())
}

// fixCRC recomputes a batch's CRC after a test changed covered bytes.
func fixCRC(b []byte) {
	crc := crc32c(b[21:])
	b[17], b[18], b[19], b[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
}

func TestRollByAgeAndRetention(t *testing.T) {
	clk := newClock()
	fs := memFS(t)
	fs.SetNow(clk.Now)
	l, _ := mustOpen(t, fs, Config{Clock: clk, SegmentAge: time.Hour, RetentionAge: 3 * time.Hour, RetentionBytes: -1})
	defer l.Close()
	m := newModel()
	// One append an hour, each with a timestamp of its hour: every append
	// after the first rolls.
	for i := 0; i < 6; i++ {
		b := testbatch.Make(uint64(i), 2, 100, clk.Now().UnixMilli())
		if _, err := m.append(t, l, b); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	if n := len(l.Segments()); n != 6 {
		t.Fatalf("%d segments after 6 hourly appends, want 6: %s", n, segNames(l))
	}
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	// Now is hour 6: segments whose newest record is older than hour 3 go: hours 0, 1, 2.
	if len(deleted) != 3 || l.StartOffset() != 6 {
		t.Fatalf("deleted %v, start %d", deleted, l.StartOffset())
	}
	for _, base := range deleted {
		if _, err := fs.Stat(dir + "/" + segmentName(base)); err == nil {
			t.Fatalf("segment %d still on disk", base)
		}
	}
	m.check(t, l, 6, l.EndOffset())
	if _, err := l.Read(0, 100, NoLimit); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of a deleted offset: %v", err)
	}
	// The active segment stays even when it is too old.
	clk.Advance(24 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 1 || l.StartOffset() != 10 {
		t.Fatalf("after everything expired: %s", segNames(l))
	}
}

func TestRetentionBySize(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 4096, RetentionBytes: 10000, RetentionAge: -1})
	defer l.Close()
	m := newModel()
	for i := 0; i < 40; i++ {
		if _, err := m.append(t, l, batch(i, 1, 900)); err != nil {
			t.Fatal(err)
		}
	}
	before := l.Size()
	deleted, err := l.ApplyRetention()
	if err != nil || len(deleted) == 0 {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
	if l.Size() < 10000 {
		t.Fatalf("retention went below RetentionBytes: %d", l.Size())
	}
	if first := l.Segments()[0]; l.Size()-first.Size >= 10000 {
		t.Fatalf("retention kept a deletable segment: size %d, first %d (was %d)", l.Size(), first.Size, before)
	}
	m.check(t, l, l.StartOffset(), l.EndOffset())
}

func TestOffsetForTimestamp(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 2048, IndexIntervalBytes: 256})
	defer l.Close()
	m := newModel()
	for i := 0; i < 50; i++ { // batch i: offsets 2i, 2i+1; timestamps 1000i, 1000i+1
		if _, err := m.append(t, l, testbatch.Make(uint64(i), 2, 60, int64(1000*i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ts   int64
		want int64
		ok   bool
	}{{-5, 0, true}, {0, 0, true}, {1, 0, true}, {2, 2, true}, {17001, 34, true}, {17002, 36, true}, {49001, 98, true}, {49002, 0, false}} {
		got, ok, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("OffsetForTimestamp(%d) = %d, %v, %v; want %d, %v", tc.ts, got, ok, err, tc.want, tc.ok)
		}
	}
}

func TestTruncate(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 2048})
	m := newModel()
	for i := 0; i < 40; i++ {
		if _, err := m.append(t, l, batch(i, 3, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Segments()) < 4 {
		t.Fatalf("want several segments: %s", segNames(l))
	}
	if err := l.Truncate(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("truncate below start: %v", err)
	}
	if err := l.Truncate(47); err != nil { // inside batch [45,48): the log ends at 45
		t.Fatal(err)
	}
	if l.EndOffset() != 45 || l.FlushedOffset() != 45 {
		t.Fatalf("end %d flushed %d after truncate", l.EndOffset(), l.FlushedOffset())
	}
	for off := range m.batches {
		if off >= 45 {
			delete(m.batches, off)
		}
	}
	m.check(t, l, 0, 45)
	if res, err := m.append(t, l, batch(99, 2, 100)); err != nil || res.BaseOffset != 45 {
		t.Fatalf("append after truncate: %+v, %v", res, err)
	}
	// Reopen without Close (a crash that kept the page cache): consistent.
	l2, rep := mustOpen(t, fs, Config{SegmentBytes: 2048})
	defer l2.Close()
	if rep.Clean {
		t.Fatal("reopen after no Close reported clean")
	}
	m.check(t, l2, 0, 47)
}

func TestReopen(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var fs vfs.FS = memFS(t)
			d := dir
			if name == "os" {
				fs, d = vfs.Default, t.TempDir()
			}
			cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 300}
			l, rep, err := Open(fs, d, cfg)
			if err != nil || rep.Clean || rep.Segments != 0 {
				t.Fatalf("fresh open: %+v, %v", rep, err)
			}
			m := newModel()
			for i := 0; i < 30; i++ {
				if _, err := m.append(t, l, batch(i, 2, 150)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(ctx, batch(0, 1, 10), 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("append after close: %v", err)
			}
			l, rep, err = Open(fs, d, cfg)
			if err != nil || !rep.Clean || rep.Recovered != 0 {
				t.Fatalf("clean reopen: %+v, %v", rep, err)
			}
			m.check(t, l, 0, l.EndOffset())
			for i := 30; i < 40; i++ {
				if _, err := m.append(t, l, batch(i, 2, 150)); err != nil {
					t.Fatal(err)
				}
			}
			// Abandon it (a process crash: the page cache survives).
			l, rep, err = Open(fs, d, cfg)
			if err != nil || rep.Clean || rep.Recovered == 0 || rep.Truncated != 0 {
				t.Fatalf("unclean reopen: %+v, %v", rep, err)
			}
			if rep.Recovered >= rep.Segments {
				t.Fatalf("recovery re-read every segment (%d of %d): the recovery point is not used", rep.Recovered, rep.Segments)
			}
			m.check(t, l, 0, m.acked)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFlushPolicies(t *testing.T) {
	t.Run("every-batch", func(t *testing.T) {
		l, _ := mustOpen(t, memFS(t), Config{FlushPolicy: flushpolicy.EveryBatch()})
		defer l.Close()
		for i := 0; i < 5; i++ {
			res, err := l.Append(ctx, batch(i, 2, 10), 0)
			if err != nil || !res.Flushed || l.FlushedOffset() != res.NextOffset {
				t.Fatalf("append %d: %+v flushed %d, %v", i, res, l.FlushedOffset(), err)
			}
		}
	})
	t.Run("messages", func(t *testing.T) {
		l, _ := mustOpen(t, memFS(t), Config{FlushPolicy: flushpolicy.EveryMessages(5)})
		defer l.Close()
		var flushedAt []int64
		for i := 0; i < 10; i++ {
			res, err := l.Append(ctx, batch(i, 2, 10), 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.Flushed {
				flushedAt = append(flushedAt, res.NextOffset)
			}
		}
		if want := []int64{6, 12, 18}; !equal(flushedAt, want) {
			t.Fatalf("flushed at %v, want %v", flushedAt, want)
		}
		if l.FlushedOffset() != 18 {
			t.Fatalf("flushed offset %d", l.FlushedOffset())
		}
	})
	t.Run("interval", func(t *testing.T) {
		clk := newClock()
		l, _ := mustOpen(t, memFS(t), Config{Clock: clk, FlushPolicy: flushpolicy.EveryInterval(50 * time.Millisecond)})
		defer l.Close()
		res, err := l.Append(ctx, batch(1, 3, 10), 0)
		if err != nil || res.Flushed {
			t.Fatalf("%+v, %v", res, err)
		}
		clk.Advance(20 * time.Millisecond)
		if _, err := l.Append(ctx, batch(2, 3, 10), 0); err != nil {
			t.Fatal(err)
		}
		if l.FlushedOffset() != 0 || clk.Pending() != 1 {
			t.Fatalf("flushed %d, %d timers pending", l.FlushedOffset(), clk.Pending())
		}
		clk.Advance(30 * time.Millisecond) // the deadline of the first append
		if l.FlushedOffset() != 6 {
			t.Fatalf("deadline passed, flushed offset %d, want 6", l.FlushedOffset())
		}
		clk.Advance(time.Hour)
		if clk.Pending() != 0 {
			t.Fatal("timer left armed with nothing to flush")
		}
	})
	t.Run("never", func(t *testing.T) {
		fs := memFS(t)
		l, _ := mustOpen(t, fs, Config{SegmentBytes: 2048})
		for i := 0; i < 10; i++ {
			if res, err := l.Append(ctx, batch(i, 1, 300), 0); err != nil || res.Flushed {
				t.Fatalf("%+v, %v", res, err)
			}
		}
		segs := l.Segments()
		if len(segs) < 2 || l.FlushedOffset() != segs[len(segs)-1].Base {
			t.Fatalf("with policy never, rolled segments are flushed and nothing else: flushed %d, %s", l.FlushedOffset(), segNames(l))
		}
		if err := l.Flush(l.EndOffset()); err != nil || l.FlushedOffset() != l.EndOffset() {
			t.Fatalf("explicit flush: %d, %v", l.FlushedOffset(), err)
		}
		l.Close()
	})
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Concurrent durable appends share fsyncs: while one fsync is in progress,
// every append that arrives is covered by the next single fsync.
func TestGroupCommit(t *testing.T) {
	mem := memFS(t)
	block := make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	blocked := make(chan struct{})
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if armed.Load() && op == errorfs.OpSync && strings.HasSuffix(path, ".log") {
			first := false
			once.Do(func() { first = true })
			if first {
				close(blocked)
				<-block
			}
		}
		return nil
	}))
	l, _ := mustOpen(t, fs, Config{})
	defer l.Close()
	armed.Store(true)
	before := l.Syncs()
	const n = 8
	var wg sync.WaitGroup
	appended := make(chan struct{}, n)
	errs := make(chan error, n)
	durable := func(i int) {
		defer wg.Done()
		res, err := l.Append(ctx, batch(i, 1, 50), 0)
		appended <- struct{}{}
		if err == nil {
			err = l.Flush(res.NextOffset)
		}
		errs <- err
	}
	wg.Add(1)
	go durable(0)
	<-blocked // the first fsync is in progress
	<-appended
	for i := 1; i < n; i++ {
		wg.Add(1)
		go durable(i)
	}
	for i := 1; i < n; i++ {
		<-appended
	}
	close(block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if l.FlushedOffset() != n {
		t.Fatalf("flushed %d, want %d", l.FlushedOffset(), n)
	}
	if got := l.Syncs() - before; got != 2 {
		t.Fatalf("%d durable appends took %d fsync rounds, want 2 (the blocked one and one shared)", n, got)
	}
}

// signalPolicy is EveryBatch that reports each Appended call's return.
type signalPolicy struct {
	flushpolicy.Policy
	decided chan struct{}
}

func (p signalPolicy) Appended(ctx context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	defer func() { p.decided <- struct{}{} }()
	return p.Policy.Appended(ctx, a)
}

// Group commit through the policy: appends whose policy asks for an fsync
// while one is in progress share the next one, although each asks for its
// own.
func TestGroupCommitByPolicy(t *testing.T) {
	mem := memFS(t)
	block, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if armed.Load() && op == errorfs.OpSync && strings.HasSuffix(path, ".log") {
			first := false
			once.Do(func() { first = true })
			if first {
				close(blocked)
				<-block
			}
		}
		return nil
	}))
	const n = 8
	pol := signalPolicy{flushpolicy.EveryBatch(), make(chan struct{}, n)}
	l, _ := mustOpen(t, fs, Config{FlushPolicy: pol})
	defer l.Close()
	armed.Store(true)
	before := l.Syncs()
	results := make(chan appendOutcome, n)
	durable := func(i int) {
		res, err := l.Append(ctx, batch(i, 1, 50), 0)
		results <- appendOutcome{res, err}
	}
	go durable(0)
	await(t, blocked, "the first fsync")
	for i := 1; i < n; i++ {
		go durable(i)
	}
	for i := 0; i < n; i++ {
		await(t, pol.decided, "an Appended call")
	}
	close(block)
	for range n {
		if r := await(t, results, "a durable append"); r.err != nil || !r.res.Flushed {
			t.Fatalf("%+v, %v", r.res, r.err)
		}
	}
	if l.FlushedOffset() != n {
		t.Fatalf("flushed %d, want %d", l.FlushedOffset(), n)
	}
	if got := l.Syncs() - before; got != 2 {
		t.Fatalf("%d appends asking for an fsync took %d fsync rounds, want 2 (the blocked one and one shared)", n, got)
	}
}

// Readers run against appends, rolls and retention without seeing anything
// torn or out of order (run with -race).
func TestConcurrentReaders(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 4096, RetentionBytes: 16384, RetentionAge: -1, IndexIntervalBytes: 512})
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				off := l.StartOffset()
				for off < l.EndOffset() {
					sl, err := l.Read(off, 2048, NoLimit)
					if errors.Is(err, ErrOffsetOutOfRange) {
						break // retention overtook this reader
					}
					if err != nil {
						t.Error(err)
						return
					}
					b, err := sl.Bytes()
					sl.Release()
					if err != nil {
						t.Error(err)
						return
					}
					bs, err := testbatch.Split(b)
					if err != nil || len(bs) == 0 {
						t.Errorf("read %d: %d batches, %v", off, len(bs), err)
						return
					}
					if h, _ := record.ParseHeader(bs[0]); h.NextOffset() <= off {
						t.Errorf("read %d returned a batch ending at %d", off, h.NextOffset())
						return
					}
					off = sl.NextOffset
				}
			}
		}()
	}
	for i := 0; i < 400; i++ {
		if _, err := l.Append(ctx, batch(i, 1+i%3, 100), 0); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// A failed write fails the log: appends are refused, reads go on, and a reopen
// recovers everything acknowledged.
func TestFailedLog(t *testing.T) {
	mem := memFS(t)
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite}, PartialWrite: true}
	l, _ := mustOpen(t, errorfs.Wrap(mem, inj), Config{})
	m := newModel()
	for i := 0; i < 5; i++ {
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	inj.K = inj.Count() // the next write fails, half written
	if _, err := m.append(t, l, batch(5, 2, 100)); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("append over a failing write: %v", err)
	}
	if _, err := m.append(t, l, batch(6, 2, 100)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append to a failed log: %v", err)
	}
	if err := l.Flush(l.EndOffset() + 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush of a failed log: %v", err)
	}
	m.check(t, l, 0, m.acked) // reads still work
	if err := l.Close(); err == nil {
		t.Fatal("closing a failed log reported success")
	}
	l2, rep := mustOpen(t, mem, Config{})
	defer l2.Close()
	if rep.Clean {
		t.Fatal("a failed log was marked clean")
	}
	m.check(t, l2, 0, m.acked)
	if res, err := m.append(t, l2, batch(7, 1, 10)); err != nil || res.BaseOffset != 10 {
		t.Fatalf("append after recovery: %+v, %v", res, err)
	}
}

// TestTruncateUnderReaders: a reader holding Slices across a Truncate and
// the appends that then take the cut offsets (with other records) reads the
// bytes it was given, or, for cut bytes, fails; never the new records.
// Cuts inside the active segment, at a segment's base (emptying one of
// several) and emptying the only segment; on MemFS and on the OS.
func TestTruncateUnderReaders(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		for _, tc := range []struct {
			name string
			cut  func(l *Log) int64
		}{
			{"inside the active segment", func(l *Log) int64 { return l.EndOffset() - 5 }},
			{"at a segment base", func(l *Log) int64 { s := l.Segments(); return s[len(s)-1].Base }},
			{"the only segment", func(l *Log) int64 { return 0 }},
		} {
			t.Run(fsName+"/"+tc.name, func(t *testing.T) {
				var fsys vfs.FS = memFS(t)
				d := dir
				if fsName == "os" {
					fsys, d = vfs.Default, t.TempDir()
				}
				cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 256}
				if tc.name == "the only segment" {
					cfg.SegmentBytes = 1 << 20
				}
				l, _, err := Open(fsys, d, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = l.Close() }()
				for i := range 30 {
					if _, err := l.Append(ctx, batch(i, 2, 60), 1); err != nil {
						t.Fatal(err)
					}
				}
				cut := tc.cut(l)
				if tc.name == "at a segment base" && len(l.Segments()) < 3 {
					t.Fatalf("want several segments: %s", segNames(l))
				}
				// One Slice per batch, held across everything below.
				type held struct {
					sl  Slice
					old []byte
				}
				var hs []held
				for off := l.StartOffset(); off < l.EndOffset(); {
					sl, err := l.Read(off, 1, NoLimit)
					if err != nil {
						t.Fatal(err)
					}
					b, err := sl.Bytes()
					if err != nil {
						t.Fatal(err)
					}
					hs = append(hs, held{sl, b})
					off = sl.NextOffset
				}
				defer func() {
					for i := range hs {
						hs[i].sl.Release()
					}
				}()
				oldEnd := l.EndOffset()
				if err := l.Truncate(cut); err != nil {
					t.Fatal(err)
				}
				end := l.EndOffset()
				for i := 0; l.EndOffset() < oldEnd+4; i++ {
					if _, err := l.Append(ctx, batch(5000+i, 2, 60), 2); err != nil {
						t.Fatal(err)
					}
				}
				cutSlices := 0
				for _, h := range hs {
					b, err := h.sl.Bytes()
					switch {
					case h.sl.FirstOffset < end && (err != nil || !bytes.Equal(b, h.old)):
						t.Fatalf("kept batch at %d: read %v (equal %v) after the truncation", h.sl.FirstOffset, err, bytes.Equal(b, h.old))
					case h.sl.FirstOffset >= end && err == nil && !bytes.Equal(b, h.old):
						t.Fatalf("cut batch at %d: the held Slice reads other bytes (new records?)", h.sl.FirstOffset)
					case h.sl.FirstOffset >= end:
						cutSlices++
					}
				}
				if cutSlices == 0 {
					t.Fatalf("no held Slice covered the cut [%d, %d)", end, oldEnd)
				}
				// The log itself serves the new records at the cut offsets.
				sl, err := l.Read(end, 1, NoLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer sl.Release()
				b, err := sl.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				if h, _ := record.ParseHeader(b); h.PartitionLeaderEpoch != 2 || h.BaseOffset != end {
					t.Fatalf("the log serves %+v at %d, want the new epoch-2 records", h, end)
				}
			})
		}
	}
}
