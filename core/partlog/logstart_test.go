package partlog

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// startLog returns a log on a MemFS with records [0, 60) in batches of 2
// over several segments, durable.
func startLog(t *testing.T) (*Log, *vfs.MemFS) {
	t.Helper()
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 1024, RetentionAge: -1})
	for i := range 30 {
		if _, err := l.Append(ctx, batch(i, 2, 60), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if len(l.Segments()) < 4 {
		t.Fatalf("want several segments: %s", segNames(l))
	}
	return l, fs
}

// TestDeleteRecordsBefore moves the log start into the middle of a segment:
// reads below it are out of range, the batch holding it is served, the
// segments wholly below it are gone, a lower offset changes nothing, one past
// the end is refused, and the start survives a clean reopen and a crash.
func TestDeleteRecordsBefore(t *testing.T) {
	l, fs := startLog(t)
	got, err := l.DeleteRecordsBefore(25)
	if err != nil || got != 25 || l.StartOffset() != 25 {
		t.Fatalf("DeleteRecordsBefore(25) = %d, %v; start %d", got, err, l.StartOffset())
	}
	if _, err := l.Read(24, 1<<20, NoLimit); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read 24 below the start: %v, want out of range", err)
	}
	sl, err := l.Read(25, 1, NoLimit)
	if err != nil || sl.Size == 0 || sl.NextOffset <= 25 {
		t.Fatalf("read 25: %+v, %v", sl, err)
	}
	sl.Release()
	for _, s := range l.Segments() {
		if s.Next <= 25 && s.Base != l.ActiveBase() {
			t.Fatalf("segment [%d,%d) below the start kept: %s", s.Base, s.Next, segNames(l))
		}
	}
	if first := l.Segments()[0]; first.Base > 25 {
		t.Fatalf("the segment holding 25 went: %s", segNames(l))
	}
	if got, err := l.DeleteRecordsBefore(10); err != nil || got != 25 {
		t.Fatalf("DeleteRecordsBefore(10) = %d, %v, want 25 unchanged", got, err)
	}
	if _, err := l.DeleteRecordsBefore(61); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore past the end: %v", err)
	}
	if _, err := l.DeleteRecordsBefore(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore(-1): %v", err)
	}
	crashed := fs.CrashClone()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*vfs.MemFS{"clean": fs, "crash": crashed} {
		l2, _ := mustOpen(t, f, Config{SegmentBytes: 1024, RetentionAge: -1})
		if l2.StartOffset() != 25 || l2.EndOffset() != 60 {
			t.Fatalf("%s reopen: log [%d, %d), want [25, 60)", name, l2.StartOffset(), l2.EndOffset())
		}
		if _, err := l2.Read(24, 1<<20, NoLimit); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("%s reopen: read 24: %v", name, err)
		}
		_ = l2.Close()
	}
}

// TestDeleteRecordsWholeLog moves the start to the log end: nothing is
// served, appends go on from there and are served.
func TestDeleteRecordsWholeLog(t *testing.T) {
	l, _ := startLog(t)
	defer l.Close()
	if got, err := l.DeleteRecordsBefore(60); err != nil || got != 60 {
		t.Fatalf("DeleteRecordsBefore(60) = %d, %v", got, err)
	}
	if len(l.Segments()) != 1 {
		t.Fatalf("only the active segment should stay: %s", segNames(l))
	}
	res, err := l.Append(ctx, batch(99, 2, 60), 1)
	if err != nil || res.BaseOffset != 60 {
		t.Fatalf("append after: %+v, %v", res, err)
	}
	sl, err := l.Read(60, 1<<20, NoLimit)
	if err != nil || sl.Size == 0 {
		t.Fatalf("read 60: %+v, %v", sl, err)
	}
	sl.Release()
}

// TestLogStartFollowsCuts: a truncation below the log start brings it down
// to the new end (records appended there are served), a reopen agrees, and a
// Reset puts it at the reset offset.
func TestLogStartFollowsCuts(t *testing.T) {
	l, fs := startLog(t)
	if _, err := l.DeleteRecordsBefore(45); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(42); err != nil {
		t.Fatal(err)
	}
	end := l.EndOffset()
	if l.StartOffset() != end || end > 42 {
		t.Fatalf("after truncating below the start: log [%d, %d)", l.StartOffset(), end)
	}
	if _, err := l.Append(ctx, batch(50, 2, 60), 1); err != nil {
		t.Fatal(err)
	}
	sl, err := l.Read(end, 1<<20, NoLimit)
	if err != nil || sl.Size == 0 {
		t.Fatalf("read %d after the cut: %+v, %v", end, sl, err)
	}
	sl.Release()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, fs, Config{SegmentBytes: 1024, RetentionAge: -1})
	if l.StartOffset() != end {
		t.Fatalf("reopened: start %d, want %d", l.StartOffset(), end)
	}
	if _, err := l.DeleteRecordsBefore(end + 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(5); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 5 || l.EndOffset() != 5 {
		t.Fatalf("after Reset(5): log [%d, %d)", l.StartOffset(), l.EndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, fs, Config{SegmentBytes: 1024, RetentionAge: -1})
	defer l.Close()
	if l.StartOffset() != 5 {
		t.Fatalf("reopened after Reset(5): start %d", l.StartOffset())
	}
}

// TestRetentionBelowLogStart: segments the log start passed while they were
// not yet durable go at the next retention pass.
func TestRetentionBelowLogStart(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 1024, RetentionAge: -1})
	defer l.Close()
	for i := range 30 {
		if _, err := l.Append(ctx, batch(i, 2, 60), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecordsBefore(50); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Segments() {
		if s.Next <= 50 && s.Base != l.ActiveBase() {
			t.Fatalf("segment [%d,%d) below the start kept by retention: %s", s.Base, s.Next, segNames(l))
		}
	}
	if l.StartOffset() != 50 {
		t.Fatalf("start %d, want 50", l.StartOffset())
	}
}

// TestCrashLoopDeleteRecords cuts the power before every file operation of
// a workload that appends, moves the log start twice and closes: the log
// reopened from what survived starts at 0, 25 or 45, never below a move
// that had returned, and serves every offset from its start to its end.
func TestCrashLoopDeleteRecords(t *testing.T) {
	workload := func(fs vfs.FS, moved func(int64)) {
		l, _, err := Open(fs, dir, Config{SegmentBytes: 1024, RetentionAge: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if _, err := l.Append(ctx, batch(i, 2, 60), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{25, 45} {
			if _, err := l.DeleteRecordsBefore(off); err != nil {
				t.Fatal(err)
			}
			moved(off)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	probe := &errorfs.FailAt{K: -1}
	workload(errorfs.Wrap(memFS(t), probe), func(int64) {})
	total := probe.Count()
	for k := range total {
		var mu sync.Mutex
		var returned, atCrash int64
		c, fs := newCrasher(memFS(t), k, false, 1, func() {
			mu.Lock()
			atCrash = returned
			mu.Unlock()
		})
		workload(fs, func(off int64) { mu.Lock(); returned = off; mu.Unlock() })
		l, _, err := Open(c.clone, dir, Config{SegmentBytes: 1024, RetentionAge: -1})
		if err != nil {
			t.Fatalf("crash %d: reopen: %v", k, err)
		}
		start := l.StartOffset()
		if start < atCrash || !slices.Contains([]int64{0, 25, 45}, start) {
			t.Fatalf("crash %d: log starts at %d, a move to %d had returned", k, start, atCrash)
		}
		contiguous(t, l)
		_ = l.Close()
	}
}
