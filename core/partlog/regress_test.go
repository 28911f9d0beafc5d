package partlog

// Regression tests for bugs a review found (each failed before its fix).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// contiguous reads the log and fails unless it serves whole, valid batches with
// contiguous offsets from StartOffset to EndOffset.
func contiguous(t *testing.T, l *Log) {
	t.Helper()
	next := l.StartOffset()
	for next < l.EndOffset() {
		sl, err := l.Read(next, 1<<20, NoLimit)
		if err != nil {
			t.Fatalf("read %d: %v (segments %s)", next, err, segNames(l))
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatalf("read %d served a torn slice [%d,+%d): %v (segments %s)", next, sl.Pos, sl.Size, err, segNames(l))
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatalf("read %d served a bad batch: %v", next, err)
			}
			if h.BaseOffset > next {
				t.Fatalf("read %d: log skips offsets [%d,%d) (segments %s)", next, next, h.BaseOffset, segNames(l))
			}
			next = h.NextOffset()
			b = b[n:]
		}
	}
}

// rollWithoutSeal runs an append that rolls, stopping where the appending
// goroutine has left appendMu and made its policy call, and has not yet
// called sealRolled (a legal interleaving: another goroutine may run any
// amount of code there).
func rollWithoutSeal(t *testing.T, l *Log, buf []byte) AppendResult {
	t.Helper()
	l.appendMu.Lock()
	res, rolled, pa, err := l.appendLocked(buf, 7, false)
	l.appendMu.Unlock()
	if err != nil || !rolled {
		t.Fatalf("append did not roll: %v %v", rolled, err)
	}
	if _, err := l.appended(ctx, pa.turn, pa.info); err != nil {
		t.Fatal(err)
	}
	return res
}

// Finding 1a: Truncate writes the recovery point at the truncated segment's
// base while an earlier segment, rolled away from but not yet sealed (its
// appender has not reached sealRolled), was never fsynced. After a power cut
// Open trusts that segment: the log claims offsets it does not have.
func TestRegressionTruncateTrustsUnsealedSegment(t *testing.T) {
	mem := memFS(t)
	cfg := Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionAge: -1}
	l, _ := mustOpen(t, mem, cfg)
	for i := 0; i < 6; i++ { // 2.9 KB in segment 0, never fsynced (policy Never)
		if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
			t.Fatal(err)
		}
	}
	r1 := rollWithoutSeal(t, l, batch(100, 2, 200))
	r2, err := l.Append(ctx, batch(101, 2, 200), 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(r2.BaseOffset); err != nil { // replica cuts its tail inside segment 1
		t.Fatal(err)
	}
	t.Logf("rolled at %d, recovery point now %d, flushed %d", r1.BaseOffset, recoveryPoint(l), l.FlushedOffset())
	clone := mem.CrashClone() // power cut before the appender's sealRolled ran
	l2, rep := mustOpen(t, clone, cfg)
	defer l2.Close()
	t.Logf("reopen: %+v segments %s", rep, segNames(l2))
	contiguous(t, l2)
}

// Finding 1b: the same race after a clean restart, where segment 0's index
// files already hold entries (so the "no time entry" check cannot catch it),
// with torn writes: Open trusts a torn tail and serves it.
func TestRegressionTruncateTrustsTornSegment(t *testing.T) {
	bad := 0
	for seed := uint64(0); seed < 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			mem := memFS(t)
			cfg := Config{SegmentBytes: 6000, IndexIntervalBytes: 400, RetentionAge: -1}
			l, _ := mustOpen(t, mem, cfg)
			for i := 0; i < 5; i++ {
				if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, _ = mustOpen(t, mem, cfg) // clean: segment 0 trusted, unsealed, index files kept
			for i := 5; i < 12; i++ {    // unsynced tail of segment 0
				if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
					t.Fatal(err)
				}
			}
			rollWithoutSeal(t, l, batch(100, 2, 200))
			r2, err := l.Append(ctx, batch(101, 2, 200), 7)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Truncate(r2.BaseOffset); err != nil {
				t.Fatal(err)
			}
			clone := mem.CrashCloneTorn(rand.New(rand.NewPCG(seed, 1)))
			l2, rep := mustOpen(t, clone, cfg)
			defer l2.Close()
			t.Logf("reopen: %+v segments %s", rep, segNames(l2))
			ok := t.Run("check", func(t *testing.T) { contiguous(t, l2) })
			if !ok {
				bad++
			}
		})
	}
	if bad > 0 {
		t.Fatalf("%d of 20 seeds served a torn batch or skipped offsets", bad)
	}
}

// Finding 2: after a failed fsync has failed the log, a pending sealRolled
// still seals (a second fsync "succeeds" on Linux after the pages were
// dropped) and advances the recovery point, so the next Open trusts the
// segment whose fsync failed.
func TestRegressionSealRolledAfterFailedFsync(t *testing.T) {
	mem := memFS(t)
	var arm atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpSync && path == dir+"/"+segmentName(0) && arm.CompareAndSwap(true, false) {
			return errors.New("EIO")
		}
		return nil
	}))
	cfg := Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionAge: -1}
	l, _ := mustOpen(t, fs, cfg)
	for i := 0; i < 6; i++ {
		if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
			t.Fatal(err)
		}
	}
	res := rollWithoutSeal(t, l, batch(100, 2, 200))
	rpBefore := recoveryPoint(l)
	arm.Store(true)
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) { // e.g. the deadline timer's flush
		t.Fatalf("flush: %v", err)
	}
	err := l.sealRolled() // the rolling appender continues
	rp := recoveryPoint(l)
	t.Logf("sealRolled after failure: %v; recovery point %d -> %d (segment 1 base %d)", err, rpBefore, rp, res.BaseOffset)
	if rp != rpBefore {
		t.Fatalf("the recovery point moved to %d after the log failed on an fsync of segment 0: reopen trusts segment 0", rp)
	}
}

// hugeBatch returns a batch claiming n records (n-1 = lastOffsetDelta) with a
// valid CRC; ValidateProduced accepts it without looking at the records.
func hugeBatch(id int, n int32) []byte {
	b := batch(id, 1, 50)
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32c(b[21:]))
	return b
}

// Finding 3: one append whose batches span more than 2^32 offsets does not fit
// even an empty segment: the log "rolls" to a new segment with the SAME base
// (Create truncates the live segment's files), appends anyway, and on reopen
// recovery cuts the acknowledged, flushed data.
func TestRegressionAppendSpanningMoreThanUint32Offsets(t *testing.T) {
	mem := memFS(t)
	cfg := Config{RetentionAge: -1}
	l, _ := mustOpen(t, mem, cfg)
	const n = 1<<31 - 1
	buf := append(append(append([]byte{}, hugeBatch(1, n)...), hugeBatch(2, n)...), hugeBatch(3, n)...)
	end := l.EndOffset()
	if _, err := l.Append(ctx, buf, 0); !errors.Is(err, record.ErrBadRecords) {
		t.Fatalf("append spanning 3*(2^31-1) offsets: %v, want ErrBadRecords", err)
	}
	if l.EndOffset() != end || len(l.Segments()) != 1 {
		t.Fatalf("rejected append changed the log: end %d, segments %s", l.EndOffset(), segNames(l))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// Finding 4: Fits lets a segment end at base+2^32, where the seal's final time
// entry's relative offset wraps to 0 and is dropped; after a clean reopen the
// segment's max timestamp is too low, so OffsetForTimestamp skips its last
// batch (and age retention would delete it early).
func TestRegressionFitsOffByOne(t *testing.T) {
	mem := memFS(t)
	cfg := Config{IndexIntervalBytes: 1, RetentionAge: -1}
	l, _ := mustOpen(t, mem, cfg)
	const n = 1<<31 - 1
	var last AppendResult
	for i, b := range [][]byte{hugeBatch(1, n), hugeBatch(2, n), batch(3, 2, 50)} {
		r, err := l.Append(ctx, b, 0)
		if err != nil {
			t.Fatal(i, err)
		}
		last = r
	}
	if last.NextOffset != 1<<32 {
		t.Fatalf("setup: end %d", last.NextOffset)
	}
	ts := int64(1_700_000_000_000 + 3*10) // batch 3's timestamps
	if off, ok, err := l.OffsetForTimestamp(ts); !ok || off != last.BaseOffset {
		t.Errorf("active segment ending at base+2^32: OffsetForTimestamp(%d) = %d, %v, %v; want %d", ts, off, ok, err, last.BaseOffset)
	}
	if _, err := l.Append(ctx, batch(4, 1, 50), 0); err != nil { // rolls: segment 0 ends at 2^32 exactly
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := mustOpen(t, mem, cfg)
	defer l2.Close()
	info := l2.Segments()
	t.Logf("segments after reopen: %+v", info)
	off, ok, err := l2.OffsetForTimestamp(ts)
	if err != nil || !ok || off != last.BaseOffset {
		t.Fatalf("OffsetForTimestamp(%d) = %d, %v, %v; want %d (segment 0 max timestamp now %d)", ts, off, ok, err, last.BaseOffset, info[0].MaxTimestamp)
	}
}

// Finding 5: the roll-by-age clock restarts on every Open, so a partition whose
// broker restarts more often than SegmentAge never rolls by age (and age
// retention never reaches its data).
func TestRegressionAgeRollResetByReopen(t *testing.T) {
	mem := memFS(t)
	clk := newClock()
	cfg := Config{SegmentAge: 7 * 24 * time.Hour, RetentionAge: 7 * 24 * time.Hour, Clock: clk}
	var l *Log
	for day := 0; day < 30; day++ {
		l, _ = mustOpen(t, mem, cfg)
		if _, err := l.Append(ctx, testbatchAt(day, clk.Now()), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		clk.Advance(24 * time.Hour) // a daily restart
	}
	l, _ = mustOpen(t, mem, cfg)
	defer l.Close()
	del, err := l.ApplyRetention()
	t.Logf("after 30 days with daily restarts: segments %s, retention deleted %v %v", segNames(l), del, err)
	if len(l.Segments())+len(del) < 4 || len(del) == 0 || err != nil {
		t.Fatalf("30 days of daily restarts with 7-day segments: segments %s, retention deleted %v, %v", segNames(l), del, err)
	}
}

func testbatchAt(id int, now time.Time) []byte {
	b := batch(id, 1, 20)
	// restamp: base and max timestamp at now (records use deltas from base)
	binary.BigEndian.PutUint64(b[27:], uint64(now.UnixMilli()))
	binary.BigEndian.PutUint64(b[35:], uint64(now.UnixMilli()))
	binary.BigEndian.PutUint32(b[17:], crc32c(b[21:]))
	return b
}

// Control for finding 1: the same steps with the appender's sealRolled done
// before Truncate pass.
func TestRegressionControlSealedBeforeTruncate(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		mem := memFS(t)
		cfg := Config{SegmentBytes: 6000, IndexIntervalBytes: 400, RetentionAge: -1}
		l, _ := mustOpen(t, mem, cfg)
		for i := 0; i < 5; i++ {
			if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, _ = mustOpen(t, mem, cfg)
		for i := 5; i < 12; i++ {
			if _, err := l.Append(ctx, batch(i, 2, 200), 7); err != nil {
				t.Fatal(err)
			}
		}
		rollWithoutSeal(t, l, batch(100, 2, 200))
		if err := l.sealRolled(); err != nil {
			t.Fatal(err)
		}
		r2, err := l.Append(ctx, batch(101, 2, 200), 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Truncate(r2.BaseOffset); err != nil {
			t.Fatal(err)
		}
		l2, _ := mustOpen(t, mem.CrashCloneTorn(rand.New(rand.NewPCG(seed, 1))), cfg)
		contiguous(t, l2)
		l2.Close()
	}
}

func recoveryPoint(l *Log) int64 {
	cp, ok := l.readCheckpoint()
	if !ok {
		return -1
	}
	return cp.recoveryPoint
}
