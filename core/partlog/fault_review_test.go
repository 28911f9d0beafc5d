package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Regression tests for review findings on recovery in place.

// A rolled segment whose seal fsync failed must not be deleted by retention
// before the recovery: the recovery cuts back to FlushedOffset, which would
// then lie below the log start (it used to panic with index -1 and leave the
// partition's locks held forever).
func TestRetentionSparesUndurableSegmentsOfFailedLog(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
	cfg := faultConfig(clk, flushpolicy.Never)
	cfg.RetentionBytes = 1
	l, _ := mustOpen(t, fs, cfg)
	defer func() { _ = l.Close() }()
	var err error
	for i := 0; len(l.Segments()) == 1; i++ {
		if l.Size() > 2000 {
			inj.K = inj.Count() // the roll's seal fsync fails
		}
		_, err = l.Append(ctx, batch(i, 2, 300), 0)
	}
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("append that rolled: %v, want ErrFailed (its seal's fsync failed)", err)
	}
	start := l.StartOffset()
	del, err := l.ApplyRetention()
	if err != nil || len(del) != 0 || l.StartOffset() != start {
		t.Fatalf("retention on a failed log deleted %v (err %v): start %d -> %d", del, err, start, l.StartOffset())
	}
	flushed := l.FlushedOffset()
	if _, err := l.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if l.EndOffset() != flushed {
		t.Fatalf("after recovery end %d, want %d (FlushedOffset before)", l.EndOffset(), flushed)
	}
	// The partition is not wedged: appends, flushes and retention go on.
	res, err := l.Append(ctx, batch(1000, 2, 300), 0)
	if err != nil || res.BaseOffset != flushed {
		t.Fatalf("append after recovery: %+v %v, want base %d", res, err, flushed)
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() > flushed {
		t.Fatalf("start %d past the records appended after recovery (%d)", l.StartOffset(), flushed)
	}
}

// Retention on a healthy log deletes only segments that end at or below
// FlushedOffset.
func TestRetentionKeepsUnflushedSegments(t *testing.T) {
	clk := newClock()
	cfg := faultConfig(clk, flushpolicy.Never)
	cfg.RetentionBytes = 1
	l, _ := mustOpen(t, memFS(t), cfg)
	defer func() { _ = l.Close() }()
	for i := 0; len(l.Segments()) < 3; i++ {
		if _, err := l.Append(ctx, batch(i, 2, 300), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range l.Segments()[:len(l.Segments())-1] {
		if s.Next > l.FlushedOffset() {
			t.Fatalf("sealed segment %+v ends past FlushedOffset %d", s, l.FlushedOffset())
		}
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if got := len(l.Segments()); got != 1 {
		t.Fatalf("%d segments left (%s), want only the active one", got, segNames(l))
	}
}

// logFaults fails the k-th write and the k-th fsync of a .log file, counted
// from 0 (-1: none).
type logFaults struct{ writeK, syncK, writes, syncs int }

func (f *logFaults) inject(op errorfs.Op, path string) error {
	if !strings.HasSuffix(path, ".log") {
		return nil
	}
	switch op {
	case errorfs.OpWrite:
		f.writes++
		if f.writes-1 == f.writeK {
			return syscall.EIO
		}
	case errorfs.OpSync:
		f.syncs++
		if f.syncs-1 == f.syncK {
			return syscall.EIO
		}
	}
	return nil
}

// An fsync that fails inside a recovery is a failed fsync like any other:
// readers stop at FlushedOffset at once, and the next recovery cuts back to
// it instead of trusting a second fsync that may "succeed" without writing
// the dropped pages.
func TestRecoveryFsyncFailureCutsToFlushed(t *testing.T) {
	for _, point := range []struct {
		name string
		sync int // which .log fsync of the first recovery fails
	}{
		{"before-seal", 0}, // the recovery's first fsync
		{"settle", 2},      // fsync before recovery, seal, then settle's fsync of the active segment
	} {
		t.Run(point.name, func(t *testing.T) {
			clk := newClock()
			f := &logFaults{writeK: -1, syncK: -1}
			fs := errorfs.Wrap(memFS(t), errorfs.InjectorFunc(f.inject))
			l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
			defer func() { _ = l.Close() }()
			for i := range 3 {
				if _, err := l.Append(ctx, batch(i, 2, 100), 0); err != nil {
					t.Fatal(err)
				}
			}
			flushed := l.FlushedOffset()
			f.writeK = f.writes
			if _, err := l.Append(ctx, batch(9, 2, 100), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("append with a failing write: %v", err)
			}
			if l.EndOffset() != 6 {
				t.Fatalf("end %d after a failed write, want 6 (a write failure keeps what came before)", l.EndOffset())
			}
			f.syncK = f.syncs + point.sync
			if _, err := l.Recover(); !errors.Is(err, ErrFailed) {
				t.Fatalf("recover #1 with a failing fsync: %v, want ErrFailed", err)
			}
			if l.EndOffset() != flushed {
				t.Fatalf("after an fsync failed in recovery, readers are served up to %d, want FlushedOffset %d",
					l.EndOffset(), flushed)
			}
			if _, err := l.Recover(); err != nil {
				t.Fatalf("recover #2: %v", err)
			}
			if l.EndOffset() != flushed || l.FlushedOffset() != flushed || l.Generation() != 1 {
				t.Fatalf("recover #2: end %d flushed %d generation %d, want the log cut back to %d in generation 1",
					l.EndOffset(), l.FlushedOffset(), l.Generation(), flushed)
			}
			res, err := l.Append(ctx, batch(10, 2, 100), 0)
			if err != nil || res.BaseOffset != flushed {
				t.Fatalf("append after recovery: %+v %v, want base %d", res, err, flushed)
			}
		})
	}
}

// A cut that empties the log's only segment gives the next appends a new
// file: a Slice of cut records held across the recovery reads those records
// (or comes up short), never the new generation's bytes at their offsets.
func TestCutOfSoleSegmentKeepsHeldSlices(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	fs, inj := faultFS(mem, faultPoints[3], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer func() { _ = l.Close() }()
	for i := range 3 {
		if _, err := l.Append(ctx, batch(i, 2, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	sl, err := l.Read(0, 1<<20, NoLimit)
	if err != nil || sl.Size == 0 {
		t.Fatal(sl, err)
	}
	defer sl.Release()
	old, err := sl.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	inj.K = inj.Count()
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 0 || len(l.Segments()) != 1 || l.Generation() != 1 {
		t.Fatalf("after recovery: end %d, segments %s, generation %d; want one empty segment, generation 1",
			l.EndOffset(), segNames(l), l.Generation())
	}
	for i := range 3 {
		if _, err := l.Append(ctx, batch(100+i, 2, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := sl.Bytes(); err == nil && !bytes.Equal(b, old) {
		t.Fatalf("held Slice of cut records reads the new generation's bytes (segments %s)", segNames(l))
	}
	names, err := mem.List(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == freshTailDir {
			t.Fatalf("%s left in %s: %v", freshTailDir, l.Dir(), names)
		}
	}
	// A reopen finds the new generation.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer func() { _ = l2.Close() }()
	if l2.EndOffset() != 6 {
		t.Fatalf("reopened: end %d, want 6", l2.EndOffset())
	}
	got, err := l2.Read(0, 1<<20, NoLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if b, err := got.Bytes(); err != nil || bytes.Equal(b, old) {
		t.Fatalf("reopened log reads the cut records (err %v)", err)
	}
}

// OffsetForTimestamp racing recoveries in place (which close the segments it
// may be looking at) finds the first segment's batch every time, instead of
// skipping a closed segment and answering with a later one.
func TestOffsetForTimestampDuringRecoveries(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[0], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer func() { _ = l.Close() }()
	for i := 0; len(l.Segments()) < 3; i++ {
		if _, err := l.Append(ctx, batch(i, 2, 300), 0); err != nil {
			t.Fatal(err)
		}
	}
	ts := int64(1_700_000_000_000) // batch 0's, at offset 0
	var calls atomic.Int64
	done := make(chan struct{})
	bad := make(chan error, 1)
	go func() {
		defer close(bad)
		for {
			select {
			case <-done:
				return
			default:
			}
			off, ok, err := l.OffsetForTimestamp(ts)
			if err != nil || !ok || off != 0 {
				bad <- fmt.Errorf("OffsetForTimestamp(%d) = %d, %v, %v during a recovery; want 0, true", ts, off, ok, err)
				return
			}
			calls.Add(1)
		}
	}()
	for range 200 {
		// One recovery per reader call at most, so that a call meets a few
		// recoveries, not an endless stream of them.
		for seen := calls.Load(); calls.Load() == seen; {
			select {
			case err := <-bad:
				t.Fatal(err)
			default:
			}
			runtime.Gosched()
		}
		inj.K = inj.Count()
		if _, err := l.Append(ctx, batch(0, 2, 300), 0); !errors.Is(err, ErrFailed) {
			t.Fatalf("append with a failing write: %v", err)
		}
		if _, err := l.Recover(); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-bad; err != nil {
		t.Fatal(err)
	}
}

// probePolicy never asks for a flush and, when told of a failed fsync, records
// what readers were being served at that moment.
type probePolicy struct {
	l        *Log
	endAtErr int64 // EndOffset when Flushed reported a failure; -1: none yet
}

func (p *probePolicy) Appended(context.Context, flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	return flushpolicy.Decision{}, nil
}

func (p *probePolicy) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	if f.Failed && p.endAtErr < 0 {
		p.endAtErr = p.l.EndOffset()
	}
	return nil
}

// The flush policy hears of a failed fsync only after readers stopped being
// served what it may have dropped: a policy can be a plugin behind an RPC,
// and readers must not see unflushed records meanwhile. It hears of it at
// the next Append call, here one the failed log refuses.
func TestFailedFsyncLimitsReadersBeforePolicyHears(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
	pol := &probePolicy{endAtErr: -1}
	cfg := faultConfig(clk, flushpolicy.Never)
	cfg.FlushPolicy = pol
	l, _ := mustOpen(t, fs, cfg)
	defer func() { _ = l.Close() }()
	pol.l = l
	for i := range 3 {
		if _, err := l.Append(ctx, batch(i, 2, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	inj.K = inj.Count()
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush with a failing fsync: %v", err)
	}
	if pol.endAtErr != -1 {
		t.Fatal("Flush told the policy itself")
	}
	if _, err := l.Append(ctx, batch(3, 2, 100), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append to the failed log: %v", err)
	}
	if pol.endAtErr != l.FlushedOffset() {
		t.Fatalf("policy told of the failed fsync while readers were served up to %d, want FlushedOffset %d",
			pol.endAtErr, l.FlushedOffset())
	}
}

// AppendInGeneration appends only in the generation the caller expects: after
// a cut (here by a recovery the append itself makes first) it appends nothing
// and says so with a retriable error.
func TestAppendInGeneration(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer func() { _ = l.Close() }()
	if _, err := l.AppendInGeneration(ctx, batch(0, 2, 100), 0, -1); err == nil {
		t.Fatal("negative generation accepted")
	}
	res, err := l.AppendInGeneration(ctx, batch(0, 2, 100), 0, 0)
	if err != nil || res.Generation != 0 || res.NextOffset != 2 {
		t.Fatalf("append in generation 0: %+v %v", res, err)
	}
	inj.K = inj.Count()
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
	clk.Advance(MaxRecoveryBackoff) // the next append recovers first, cutting to 0: generation 1
	_, err = l.AppendInGeneration(ctx, batch(1, 2, 100), 0, 0)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrGenerationChanged) {
		t.Fatalf("append in generation 0 after a cut: %v, want ErrFailed and ErrGenerationChanged", err)
	}
	if l.Generation() != 1 || l.EndOffset() != 0 || l.Err() != nil {
		t.Fatalf("generation %d end %d err %v, want a recovered log in generation 1, empty", l.Generation(), l.EndOffset(), l.Err())
	}
	res, err = l.AppendInGeneration(ctx, batch(1, 2, 100), 0, 1)
	if err != nil || res.BaseOffset != 0 || res.Generation != 1 {
		t.Fatalf("append in generation 1: %+v %v", res, err)
	}
}

// Every operation of a recovery that replaces the log's only segment (a cut
// emptied it) may fail: the log stays failed and a later recovery completes
// it. A power cut at that point leaves a log that opens either before the
// recovery (the fault model keeps pages a failed fsync did not drop) or
// after its cut; and once the new generation's records are flushed, a power
// cut keeps exactly them.
func TestReplaceSoleSegmentFaults(t *testing.T) {
	for k := 0; ; k++ {
		clk := newClock()
		mem := memFS(t)
		fsyncFS, syncInj := faultFS(mem, faultPoints[3], faultModes[1])
		inj := &errorfs.FailAt{K: -1, Err: syscall.EIO}
		fs := errorfs.Wrap(fsyncFS, inj)
		l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
		for i := range 3 {
			if _, err := l.Append(ctx, batch(i, 2, 100), 0); err != nil {
				t.Fatal(err)
			}
		}
		syncInj.K = syncInj.Count()
		if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
			t.Fatal(err)
		}
		inj.K = inj.Count() + k
		_, err := l.Recover()
		hit := inj.Count() > inj.K
		inj.Clear()
		if !hit {
			if err != nil {
				t.Fatalf("k=%d: recovery without a fault: %v", k, err)
			}
			_ = l.Close()
			if k < 10 {
				t.Fatalf("only %d operations in the recovery: the test does not reach replaceSole", k)
			}
			return
		}
		if err == nil && l.Err() != nil {
			t.Fatalf("k=%d: recovery reported success on a failed log: %v", k, l.Err())
		}
		if l.EndOffset() != 0 {
			t.Fatalf("k=%d: after a failed fsync and a failed recovery, readers served up to %d, want 0", k, l.EndOffset())
		}
		crashed := mem.CrashClone()
		if _, err := l.Recover(); err != nil {
			t.Fatalf("k=%d: second recovery: %v", k, err)
		}
		// A first attempt that failed after recording its cut may make the
		// second record one more: generations count cuts, not recoveries.
		if l.EndOffset() != 0 || l.Generation() < 1 {
			t.Fatalf("k=%d: end %d generation %d, want 0 and at least 1", k, l.EndOffset(), l.Generation())
		}
		if res, err := l.Append(ctx, batch(7, 2, 100), 0); err != nil || res.BaseOffset != 0 {
			t.Fatalf("k=%d: append after recovery: %+v %v", k, res, err)
		}
		if err := l.Flush(l.EndOffset()); err != nil {
			t.Fatalf("k=%d: flush: %v", k, err)
		}
		after := mem.CrashClone()
		if err := l.Close(); err != nil {
			t.Fatalf("k=%d: close: %v", k, err)
		}
		for _, c := range []struct {
			name string
			fs   *vfs.MemFS
			ends []int64
		}{{"at the fault", crashed, []int64{0, 6}}, {"after the flush", after, []int64{2}}} {
			cl, _, err := Open(c.fs, dir, faultConfig(clk, flushpolicy.Never))
			if err != nil {
				t.Fatalf("k=%d: open after a power cut %s: %v", k, c.name, err)
			}
			if !slices.Contains(c.ends, cl.EndOffset()) {
				t.Errorf("k=%d: power cut %s: end %d, want one of %v", k, c.name, cl.EndOffset(), c.ends)
			}
			_ = cl.Close()
		}
	}
}
