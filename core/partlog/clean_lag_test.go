package partlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// lagLog makes a log of three sealed segments and the active one: key k is
// "old" in the first (timestamps two hours before t0, the clock at the
// start, which then moves 3 ms), "mid" in the second (two hours before),
// "new" in the third (ten minutes before).
func lagLog(t *testing.T) (l *Log, clk *fakeClock, t0 time.Time) {
	t.Helper()
	clk = newClock()
	l, _ = mustOpen(t, memFS(t), cleanConfig(clk))
	t.Cleanup(func() { _ = l.Close() })
	t0 = clk.Now()
	for i, v := range []struct {
		value string
		age   time.Duration
	}{{"old", 2 * time.Hour}, {"mid", 2 * time.Hour}, {"new", 10 * time.Minute}} {
		if i > 0 {
			clk.Advance(l.cfg.SegmentAge) // the append rolls
		}
		appendAll(t, l, keyed(t, plain(), t0.Add(-v.age).UnixMilli(), put("k", v.value), put("other-"+v.value, "x")))
	}
	roll(t, l, clk)
	if n := len(l.Segments()); n != 4 {
		t.Fatalf("%d segments, want 4: %s", n, segNames(l))
	}
	return l, clk, t0
}

// values returns every value key k has in the log, in offset order.
func values(t *testing.T, l *Log, k string) []string {
	t.Helper()
	var vs []string
	for _, r := range readView(t, l).records {
		if string(r.key) == k {
			vs = append(vs, string(r.value))
		}
	}
	return vs
}

// TestCleanMinCompactionLag: min.compaction.lag.ms ends the cleanable range
// at the first dirty segment holding a record newer than the lag, as Kafka's
// cleanableOffsets does: the value ten minutes old is neither cleaned nor
// mapped (so the value before it stays), until the clock passes the lag.
func TestCleanMinCompactionLag(t *testing.T) {
	l, clk, _ := lagLog(t)
	segs := l.segments()
	all := l.Cleanable(CleanCheck{UpTo: NoLimit})
	lagged := l.Cleanable(CleanCheck{UpTo: NoLimit, MinCompactionLag: time.Hour})
	if want := segs[0].Size() + segs[1].Size() + segs[2].Size(); all.Total != want || all.Dirty != want {
		t.Fatalf("without lag: %+v, want %d cleanable and dirty", all, want)
	}
	if want := segs[0].Size() + segs[1].Size(); lagged.Total != want || lagged.Dirty != want {
		t.Fatalf("with a 1 h lag: %+v, want %d (the first two segments)", lagged, want)
	}
	if lagged := l.Cleanable(CleanCheck{UpTo: NoLimit, MinCompactionLag: 3 * time.Hour}); lagged.Total != 0 {
		t.Fatalf("with a 3 h lag: %+v, want nothing cleanable", lagged)
	}

	res := mustClean(t, l, CleanOptions{UpTo: NoLimit, MinCompactionLag: time.Hour})
	if got := values(t, l, "k"); len(got) != 2 || got[0] != "mid" || got[1] != "new" {
		t.Fatalf("after a pass with a 1 h lag, k holds %v, want [mid new]", got)
	}
	if res.CleanerPoint != segs[1].NextOffset() {
		t.Fatalf("cleaner point %d, want %d (the end of the second segment)", res.CleanerPoint, segs[1].NextOffset())
	}
	clk.Advance(time.Hour)
	mustClean(t, l, CleanOptions{UpTo: NoLimit, MinCompactionLag: time.Hour})
	if got := values(t, l, "k"); len(got) != 1 || got[0] != "new" {
		t.Fatalf("an hour later, k holds %v, want [new]", got)
	}
}

// TestCleanOverdue: Cleanable reports how far past max.compaction.lag.ms
// the oldest dirty record is (Kafka's max compaction delay), from the first
// batch of each dirty segment; nothing once it is cleaned.
func TestCleanOverdue(t *testing.T) {
	l, clk, t0 := lagLog(t)
	if c := l.Cleanable(CleanCheck{UpTo: NoLimit}); c.Overdue != 0 {
		t.Fatalf("overdue %v without a max lag", c.Overdue)
	}
	c := l.Cleanable(CleanCheck{UpTo: NoLimit, MaxCompactionLag: time.Hour})
	// The first segment's first batch is dated by its largest timestamp:
	// its second record's, 1 ms after its first.
	if want := clk.Now().Add(-time.Hour).Sub(t0.Add(-2*time.Hour + time.Millisecond)); c.Overdue != want {
		t.Fatalf("overdue %v, want %v", c.Overdue, want)
	}
	if c := l.Cleanable(CleanCheck{UpTo: NoLimit, MaxCompactionLag: 3 * time.Hour}); c.Overdue != 0 {
		t.Fatalf("overdue %v with a 3 h max lag", c.Overdue)
	}
	if c := l.Cleanable(CleanCheck{UpTo: NoLimit, MaxCompactionLag: time.Duration(1<<63 - 1)}); c.Overdue != 0 {
		t.Fatalf("overdue %v with no max lag", c.Overdue)
	}
	mustClean(t, l, CleanOptions{UpTo: NoLimit})
	if c := l.Cleanable(CleanCheck{UpTo: NoLimit, MaxCompactionLag: time.Hour}); c.Overdue != 0 || c.Dirty != 0 {
		t.Fatalf("after a pass: %+v, want nothing dirty nor overdue", c)
	}
}

// TestCleanThrottle: a pass hands every byte it reads and writes to
// Throttle, never with a lock of the log held (an append could not go on
// meanwhile), and an error from it (the rate limiter's ctx ending) abandons
// the pass, leaving the log as it was and no temporary file.
func TestCleanThrottle(t *testing.T) {
	l, _, _ := lagLog(t)
	before := readView(t, l)
	boom := errors.New("throttle says stop")
	var calls int
	_, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit, Throttle: func(context.Context, int) error {
		calls++
		return boom
	}})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("clean with a failing throttle: %v after %d calls", err, calls)
	}
	if left := cleanerFiles(t, l.fs); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if after := readView(t, l); len(after.records) != len(before.records) {
		t.Fatalf("an abandoned pass changed the log: %d records, had %d", len(after.records), len(before.records))
	}

	var throttled int64
	res := mustClean(t, l, CleanOptions{UpTo: NoLimit, Throttle: func(_ context.Context, n int) error {
		if !l.appendMu.TryLock() {
			t.Error("throttled with the append lock held")
		} else {
			l.appendMu.Unlock()
		}
		if !l.syncMu.TryLock() {
			t.Error("throttled with the sync lock held")
		} else {
			l.syncMu.Unlock()
		}
		throttled += int64(n)
		return nil
	}})
	// Every segment is read twice (the map, then the rewrite) or once, and
	// the result written once.
	if throttled < res.BytesBefore+res.BytesAfter || res.SegmentsWritten == 0 {
		t.Fatalf("throttled %d bytes for a pass that read %d and wrote %d", throttled, res.BytesBefore, res.BytesAfter)
	}
}

// TestCleanWithoutAppendLock: a pass makes no file-system operation under
// the append lock: not its rewrite, nor its swap's renames, deletions and
// directory fsyncs, nor the saving of the point it reached (a file written,
// fsynced and renamed, the directory fsynced), so appends do not wait for
// them; and the point saved is the one in memory.
func TestCleanWithoutAppendLock(t *testing.T) {
	var (
		mu           sync.Mutex
		l            *Log
		ops, cpOps   int
		locked       []string
		swapsRenamed int
	)
	fs := errorfs.Wrap(memFS(t), errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if l == nil {
			return nil
		}
		ops++
		if strings.Contains(path, cleanerPointFile) {
			cpOps++
		}
		if op == errorfs.OpRename && strings.HasSuffix(path, segment.SwapTag) {
			swapsRenamed++
		}
		if !l.appendMu.TryLock() {
			locked = append(locked, fmt.Sprint(op, " ", path))
		} else {
			l.appendMu.Unlock()
		}
		return nil
	}))
	clk := newClock()
	log, _ := mustOpen(t, fs, cleanConfig(clk))
	defer log.Close()
	for i := range 30 {
		appendAll(t, log, keyed(t, plain(), clk.Now().UnixMilli(), put(keyName(i%5), fmt.Sprint(i))))
		if i%10 == 9 {
			roll(t, log, clk)
		}
	}
	mu.Lock()
	l = log
	mu.Unlock()
	res := mustClean(t, log, CleanOptions{UpTo: NoLimit})
	mu.Lock()
	l = nil
	mu.Unlock()
	if cpOps == 0 || swapsRenamed == 0 || len(locked) > 0 {
		t.Fatalf("%d operations (%d on the cleaner-point file, %d renames to .swap); under the append lock: %v", ops, cpOps, swapsRenamed, locked)
	}
	h, damaged, err := log.readCleanHistory()
	if err != nil || damaged != nil || h.point() != res.CleanerPoint || h.point() != log.cleaned.Load().point() {
		t.Fatalf("file says %d (%v %v), memory %d, the pass %d", h.point(), damaged, err, log.cleaned.Load().point(), res.CleanerPoint)
	}
}
