package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// compactedLeader returns a leader log that Append and Clean wrote: leader
// epochs 0 to 7, idempotent batches among plain ones, and after a pass of
// the cleaner every shape it writes (records whose offset deltas skip,
// batches lowered over a gap, batches of no records).
func compactedLeader(t *testing.T) *Log {
	t.Helper()
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	t.Cleanup(func() { _ = l.Close() })
	idem := int32(0)
	for i := 0; i < 320; i++ {
		o := plain()
		if i%7 == 3 {
			o, idem = idempotent(9, idem), idem+2
		}
		b := keyed(t, o, clk.Now().UnixMilli(), put(keyName(i%20), fmt.Sprint(i)), put(keyName((i*7)%31), fmt.Sprint(-i)))
		if _, err := l.Append(ctx, b, int32(i/40)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(l.cfg.SegmentAge) // roll, so that everything before may be cleaned
	if _, err := l.Append(ctx, keyed(t, plain(), clk.Now().UnixMilli(), unkeyed("roll")), 7); err != nil {
		t.Fatal(err)
	}
	mustClean(t, l, CleanOptions{UpTo: NoLimit})
	var skips, lowered, empty int
	for _, b := range rawBatches(t, l) {
		h, _ := record.ParseHeader(b)
		switch {
		case h.RecordCount == 0:
			empty++
		case int64(h.RecordCount) < int64(h.LastOffsetDelta)+1:
			skips++
		}
		recs, err := record.Records(b, nil)
		if err == nil && len(recs) > 0 && recs[0].OffsetDelta > 0 {
			lowered++
		}
	}
	if skips == 0 || lowered == 0 || empty == 0 {
		t.Fatalf("the leader lacks a compacted shape: %d skipping, %d lowered, %d empty", skips, lowered, empty)
	}
	return l
}

// copyLog appends everything src holds from off on to dst with
// AppendReplicated, in reads of at most maxBytes: a follower's fetches.
func copyLog(t testing.TB, src, dst *Log, off, maxBytes int64) {
	t.Helper()
	for off < src.EndOffset() {
		sl, err := src.Read(off, maxBytes, NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		res, err := dst.AppendReplicated(ctx, b)
		if err != nil {
			t.Fatalf("replicate [%d, %d): %v", sl.FirstOffset, sl.NextOffset, err)
		}
		if res.BaseOffset != sl.FirstOffset || res.NextOffset != sl.NextOffset {
			t.Fatalf("replicated [%d, %d) as %+v", sl.FirstOffset, sl.NextOffset, res)
		}
		off = sl.NextOffset
	}
}

// sameLog fails unless a and b hold the same batches, byte for byte, and
// the same epoch cache.
func sameLog(t testing.TB, a, b *Log) {
	t.Helper()
	ab, bb := rawBatches(t, a), rawBatches(t, b)
	if len(ab) != len(bb) || a.StartOffset() != b.StartOffset() || a.EndOffset() != b.EndOffset() {
		t.Fatalf("%d batches [%d, %d) against %d [%d, %d)", len(ab), a.StartOffset(), a.EndOffset(), len(bb), b.StartOffset(), b.EndOffset())
	}
	for i := range ab {
		if !bytes.Equal(ab[i], bb[i]) {
			h, _ := record.ParseHeader(ab[i])
			t.Fatalf("batch %d (at %d) differs", i, h.BaseOffset)
		}
	}
	if !slices.Equal(a.Epochs(), b.Epochs()) {
		t.Fatalf("epochs %v against %v", a.Epochs(), b.Epochs())
	}
}

// TestAppendReplicatedCopiesLeader: a follower that appends what it reads
// from a leader written by Append and Clean holds the same batches, byte
// for byte, and the same epoch cache, whatever the fetch sizes; and so after
// a reopen, clean or after a power cut that followed a flush.
func TestAppendReplicatedCopiesLeader(t *testing.T) {
	leader := compactedLeader(t)
	for _, maxBytes := range []int64{1, 700, 1 << 20} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			mem := memFS(t)
			cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 256}
			f, _ := mustOpen(t, mem, cfg)
			copyLog(t, leader, f, 0, maxBytes)
			sameLog(t, leader, f)
			checkEpochs(t, f, logEpochs(t, f))
			if err := f.Flush(f.EndOffset()); err != nil {
				t.Fatal(err)
			}
			crash := mem.CrashClone()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for name, fsys := range map[string]vfs.FS{"clean": mem, "crash": crash} {
				g, rep := mustOpen(t, fsys, cfg)
				if rep.EpochsRebuilt != nil {
					t.Errorf("%s: epochs rebuilt: %v", name, rep.EpochsRebuilt)
				}
				sameLog(t, leader, g)
				_ = g.Close()
			}
		})
	}
}

// TestAppendReplicatedRejects: a replicated append that does not continue
// the log exactly (a gap, an overlap, a batch not right after the one
// before), carries a bad batch (CRC, magic, length, header), a batch over
// MaxBatchBytes or an epoch below the latest is refused with its error, and
// nothing at all is written: no file operation.
func TestAppendReplicatedRejects(t *testing.T) {
	leader := compactedLeader(t)
	all := rawBatches(t, leader)
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	clone := func(b []byte, f func([]byte)) []byte { b = bytes.Clone(b); f(b); return b }
	h0, _ := record.ParseHeader(all[0])
	tooMany := make([]byte, record.HeaderSize)
	record.PutHeader(tooMany, record.Header{BaseOffset: h0.NextOffset(), LastOffsetDelta: 0, RecordCount: 2,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	big := 0 // the first of the largest batches: every one before it is smaller
	for i, b := range all {
		if len(b) > len(all[big]) {
			big = i
		}
	}
	for _, tc := range []struct {
		name   string
		buf    []byte
		want   error
		prefix int // leader batches the follower holds first (default 1)
	}{
		{"gap at the start", all[2], ErrNotContiguous, 0},
		{"overlap at the start", join(all[0], all[1]), ErrNotContiguous, 0}, // the follower has all[0] already
		{"gap inside", join(all[1], all[3]), ErrNotContiguous, 0},
		{"overlap inside", join(all[1], all[1]), ErrNotContiguous, 0},
		{"bad CRC", join(all[1], clone(all[2], func(b []byte) { b[len(b)-1] ^= 1 })), record.ErrBadCRC, 0},
		{"bad magic", clone(all[1], func(b []byte) { b[16] = 1 }), record.ErrBadMagic, 0},
		{"torn", all[1][:len(all[1])-1], record.ErrShort, 0},
		{"records outside their offsets", tooMany, record.ErrBadRecords, 0},
		{"too large", all[big], ErrBatchTooLarge, big}, // the follower's MaxBatchBytes is set below
		{"stale epoch", clone(all[1], func(b []byte) { record.SetPartitionLeaderEpoch(b, 0) }), ErrStaleEpoch, 0},
		{"empty", nil, record.ErrCorrupt, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == ErrStaleEpoch && h0.PartitionLeaderEpoch != 0 {
				t.Fatalf("the leader's first batch has epoch %d, the test wants 0", h0.PartitionLeaderEpoch)
			}
			var mu sync.Mutex
			writes := 0
			counting := false
			fs := errorfs.Wrap(memFS(t), errorfs.InjectorFunc(func(op errorfs.Op, _ string) error {
				mu.Lock()
				defer mu.Unlock()
				if counting && op != errorfs.OpRead && op != errorfs.OpOpen && op != errorfs.OpClose && op != errorfs.OpSize {
					writes++
				}
				return nil
			}))
			cfg := Config{}
			if tc.want == ErrBatchTooLarge {
				cfg.MaxBatchBytes = len(all[big]) - 1
			}
			f, _ := mustOpen(t, fs, cfg)
			defer func() { _ = f.Close() }()
			if tc.prefix == 0 {
				tc.prefix = 1
			}
			for _, b := range all[:tc.prefix] {
				if _, err := f.AppendReplicated(ctx, bytes.Clone(b)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.want == ErrStaleEpoch {
				if err := f.AssignEpoch(h0.PartitionLeaderEpoch+1, f.EndOffset()); err != nil {
					t.Fatal(err)
				}
			}
			end, epochs := f.EndOffset(), f.Epochs()
			mu.Lock()
			counting = true
			mu.Unlock()
			res, err := f.AppendReplicated(ctx, tc.buf)
			mu.Lock()
			counting = false
			n := writes
			mu.Unlock()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if res != (AppendResult{}) || f.EndOffset() != end || !slices.Equal(f.Epochs(), epochs) || n != 0 {
				t.Fatalf("refused append: result %+v, end %d -> %d, epochs %v -> %v, %d file operations",
					res, end, f.EndOffset(), epochs, f.Epochs(), n)
			}
			// The log goes on from where it was.
			if next := all[tc.prefix]; tc.want != ErrStaleEpoch && tc.want != ErrBatchTooLarge {
				if _, err := f.AppendReplicated(ctx, bytes.Clone(next)); err != nil {
					t.Fatalf("the next batch: %v", err)
				}
			}
		})
	}
}

// TestAppendReplicatedWritePath: a replicated append goes through Append's
// write path: the flush policy's fsync (Flushed), the generation, Wait's
// wake-up, rolls with their seals, and the epoch the first batch of a new
// epoch starts.
func TestAppendReplicatedWritePath(t *testing.T) {
	leader := compactedLeader(t)
	all := rawBatches(t, leader)
	f, _ := mustOpen(t, memFS(t), Config{SegmentBytes: 1024, FlushPolicy: flushpolicy.EveryBatch()})
	defer func() { _ = f.Close() }()
	for i, b := range all {
		wait := f.Wait()
		res, err := f.AppendReplicated(ctx, bytes.Clone(b))
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if !res.Flushed || res.Generation != f.Generation() || f.FlushedOffset() != res.NextOffset {
			t.Fatalf("batch %d: %+v, flushed %d", i, res, f.FlushedOffset())
		}
		select {
		case <-wait:
		default:
			t.Fatalf("batch %d: Wait's channel not closed", i)
		}
	}
	if len(f.Segments()) < 3 || recoveryPoint(f) < f.Segments()[len(f.Segments())-2].Next {
		t.Fatalf("rolls not sealed: %s, recovery point %d", segNames(f), recoveryPoint(f))
	}
	sameLog(t, leader, f)
}

// replicaWorkload copies leader into a follower on fs in fetches of varied
// sizes, with a truncation at a batch's base (the follower cutting its tail
// and fetching it again; cut tells its offset, then -1) and a reopen in
// between.
func replicaWorkload(leader *Log, fs vfs.FS, onOpen func(*Log), cut func(int64)) error {
	cfg := Config{SegmentBytes: 1800, IndexIntervalBytes: 256, FlushPolicy: flushpolicy.EveryMessages(20)}
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	copyTo := func(upTo int64) error {
		for i := 0; l.EndOffset() < upTo; i++ {
			sl, err := leader.Read(l.EndOffset(), int64(100+(i*397)%900), upTo)
			if err != nil {
				return err
			}
			b, err := sl.Bytes()
			sl.Release()
			if err != nil {
				return err
			}
			if len(b) == 0 {
				return nil
			}
			if _, err := l.AppendReplicated(ctx, b); err != nil {
				return err
			}
		}
		return nil
	}
	half := leader.EndOffset() / 2
	if err := copyTo(half); err != nil {
		return err
	}
	sl, err := l.Read(l.EndOffset()-30, 1, NoLimit)
	if err != nil {
		return err
	}
	sl.Release()
	cut(sl.FirstOffset)
	if err := l.Truncate(sl.FirstOffset); err != nil {
		return err
	}
	cut(-1)
	if err := l.Close(); err != nil {
		return err
	}
	if l, _, err = Open(fs, dir, cfg); err != nil {
		return err
	}
	onOpen(l)
	if err := copyTo(leader.EndOffset()); err != nil {
		return err
	}
	return l.Close()
}

// TestAppendReplicatedCrashLoop cuts the power before every file-system
// operation of replicaWorkload: the follower reopens holding a prefix of the
// leader's batches, byte for byte, at least what was durable, with the
// epoch cache its batches give, and continues from its end.
func TestAppendReplicatedCrashLoop(t *testing.T) {
	leader := compactedLeader(t)
	want := rawBatches(t, leader)
	probe := &errorfs.FailAt{K: -1}
	if err := replicaWorkload(leader, errorfs.Wrap(memFS(t), probe), func(*Log) {}, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	step := 1
	if testing.Short() {
		step = 5
	}
	for k := 0; k < probe.Count(); k += step {
		var log *Log
		durable, cutAt := int64(0), int64(-1)
		c, fs := newCrasher(memFS(t), k, false, 3, func() {
			if log != nil {
				durable = log.FlushedOffset()
				if cutAt >= 0 {
					durable = min(durable, cutAt)
				}
			}
		})
		if err := replicaWorkload(leader, fs, func(l *Log) { log = l }, func(off int64) { cutAt = off }); err != nil {
			t.Fatal(err)
		}
		l, rep, err := Open(c.clone, dir, Config{SegmentBytes: 1800, IndexIntervalBytes: 256})
		if err != nil {
			t.Fatalf("crash %d: reopen: %v", k, err)
		}
		got := rawBatches(t, l)
		if len(got) > len(want) || l.EndOffset() < durable {
			t.Fatalf("crash %d: %d batches to %d (durable %d); %+v", k, len(got), l.EndOffset(), durable, rep)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("crash %d: batch %d is not the leader's", k, i)
			}
		}
		checkEpochs(t, l, logEpochs(t, l))
		copyLog(t, leader, l, l.EndOffset(), 1<<20)
		sameLog(t, leader, l)
		_ = l.Close()
	}
}
