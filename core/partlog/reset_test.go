package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// resetLog returns a log on fsys in d with records [0, 60) over several
// segments in epochs 1 and 3, durable, and a cleaner point; and a Slice of
// its first batch with that batch's bytes.
func resetLog(t *testing.T, fsys vfs.FS, d string, cfg Config) (*Log, AppendResult, Slice, []byte) {
	t.Helper()
	l, _, err := Open(fsys, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var last AppendResult
	for i := range 30 {
		if last, err = l.Append(ctx, batch(i, 2, 60), int32(1+2*(i/15))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit}); err != nil {
		t.Fatal(err)
	}
	if l.cleaned.Load().point() == 0 || len(l.Segments()) < 2 {
		t.Fatalf("want a cleaner point and several segments: %d, %s", l.cleaned.Load().point(), segNames(l))
	}
	sl, err := l.Read(0, 1, NoLimit)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sl.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return l, last, sl, old
}

// TestReset restarts a log empty below its start, inside it, at its end and
// past it: start and end are the offset, every record and epoch gone, the
// cleaner point forgotten, the recovery point there, earlier appends count
// as cut, a held Slice reads its old bytes, and appends go on from the
// offset; a reopen, clean or after a power cut, finds the same.
func TestReset(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		for _, to := range []int64{0, 25, 60, 5000} {
			t.Run(fmt.Sprintf("%s/%d", fsName, to), func(t *testing.T) {
				mem := memFS(t)
				var fsys vfs.FS = mem
				d := dir
				if fsName == "os" {
					fsys, d = vfs.Default, t.TempDir()
				}
				cfg := Config{SegmentBytes: 1024, RetentionAge: -1}
				l, last, sl, old := resetLog(t, fsys, d, cfg)
				defer sl.Release()
				gen := l.Generation()
				wait := l.Wait()
				if err := l.Reset(to); err != nil {
					t.Fatal(err)
				}
				select {
				case <-wait:
				default:
					t.Fatal("Reset did not wake Wait")
				}
				check := func(l *Log, end int64) {
					t.Helper()
					if l.StartOffset() != to || l.EndOffset() != end || l.FlushedOffset() != end || len(l.Segments()) != 1 {
						t.Fatalf("after reset to %d: [%d, %d) flushed %d, segments %s", to, l.StartOffset(), l.EndOffset(), l.FlushedOffset(), segNames(l))
					}
					if p := l.cleaned.Load().point(); p != 0 {
						t.Fatalf("cleaner point %d after reset", p)
					}
					if _, err := l.Read(to-1, 1, NoLimit); to > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
						t.Fatalf("read below the new start: %v", err)
					}
				}
				check(l, to)
				checkEpochs(t, l, nil)
				if l.Generation() == gen || l.Survived(last) || !errors.Is(l.FlushAppended(ctx, last), ErrCut) {
					t.Fatalf("an append before the reset survived it: generation %d -> %d", gen, l.Generation())
				}
				if got, err := sl.Bytes(); err != nil || !bytes.Equal(got, old) {
					t.Fatalf("a Slice held across the reset: %v", err)
				}
				if recoveryPoint(l) != to {
					t.Fatalf("recovery point %d", recoveryPoint(l))
				}
				res, err := l.Append(ctx, batch(500, 2, 60), 4)
				if err != nil || res.BaseOffset != to {
					t.Fatalf("append after reset: %+v %v", res, err)
				}
				checkEpochs(t, l, []EpochEntry{{4, to}})
				if err := l.Flush(l.EndOffset()); err != nil {
					t.Fatal(err)
				}
				var crash vfs.FS
				if fsName == "mem" {
					crash = mem.CrashClone()
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				for name, fs := range map[string]vfs.FS{"clean": fsys, "crash": crash} {
					if fs == nil {
						continue
					}
					l2, _, err := Open(fs, d, cfg)
					if err != nil {
						t.Fatalf("%s: reopen: %v", name, err)
					}
					check(l2, to+2)
					checkEpochs(t, l2, []EpochEntry{{4, to}})
					names, _ := fs.List(d)
					if slices.Contains(names, resetFile) {
						t.Errorf("%s: %s left behind: %v", name, resetFile, names)
					}
					_ = l2.Close()
				}
			})
		}
	}
}

// resetWorkload appends, resets past the end, appends, resets below the
// start and appends, telling phase what the log is about to become: the
// offset of a reset under way, then -1 once it returned.
func resetWorkload(t testing.TB, fs vfs.FS, m *model, onOpen func(*Log), phase func(int64)) error {
	cfg := Config{SegmentBytes: 1200, IndexIntervalBytes: 300, RetentionAge: -1, FlushPolicy: flushpolicy.EveryMessages(6)}
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	appendSome := func(from, n int) error {
		for i := range n {
			if _, err := m.append(t, l, batch(from+i, 1+i%3, 80)); err != nil {
				return err
			}
		}
		return nil
	}
	reset := func(to int64) error {
		phase(to)
		if err := l.Reset(to); err != nil {
			return err
		}
		m.ends[to], m.batchEnds[to] = true, true
		phase(-1)
		return nil
	}
	if err := appendSome(0, 14); err != nil {
		return err
	}
	if err := reset(1000); err != nil {
		return err
	}
	if err := appendSome(100, 10); err != nil {
		return err
	}
	if err := reset(500); err != nil {
		return err
	}
	if err := appendSome(200, 10); err != nil {
		return err
	}
	return l.Close()
}

// TestResetCrashLoop cuts the power before every file-system operation of
// resetWorkload: the log opens as it was before a reset under way (holding
// what was durable) or as the reset left it (empty at its offset, plus what
// was durable since), never anything in between; its epoch cache is what
// its batches give, and no reset file is left.
func TestResetCrashLoop(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := resetWorkload(t, errorfs.Wrap(memFS(t), probe), newModel(), func(*Log) {}, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	for _, torn := range []bool{false, true} {
		for k := range probe.Count() {
			var (
				mu      sync.Mutex
				log     *Log
				start   int64 // the log's start when the power went (the last reset's offset)
				resetTo int64 = -1
				durable int64
				inReset int64 = -1 // the crash came inside Reset(inReset): either state may be found
			)
			c, fs := newCrasher(memFS(t), k, torn, 11, func() {
				mu.Lock()
				defer mu.Unlock()
				if log != nil {
					start, durable, inReset = log.StartOffset(), log.FlushedOffset(), resetTo
				}
			})
			m := newModel()
			m.torn = torn
			err := resetWorkload(t, fs, m, func(l *Log) { mu.Lock(); log = l; mu.Unlock() },
				func(to int64) { mu.Lock(); resetTo = max(to, -1); mu.Unlock() })
			if err != nil {
				t.Fatal(err)
			}
			l, rep, err := Open(c.clone, dir, Config{SegmentBytes: 1200, IndexIntervalBytes: 300, RetentionAge: -1})
			if err != nil {
				t.Fatalf("torn=%v crash %d: reopen: %v", torn, k, err)
			}
			t.Run(fmt.Sprintf("torn=%v/crash=%d", torn, k), func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("start %d durable %d, in reset to %d; report %+v; segments %s", start, durable, inReset, rep, segNames(l))
					}
				}()
				switch got := l.StartOffset(); {
				case inReset >= 0 && got == inReset:
					if l.EndOffset() != inReset {
						t.Fatalf("the reset to %d left records", inReset)
					}
				default:
					m.check(t, l, start, durable)
				}
				checkEpochs(t, l, logEpochs(t, l))
				names, _ := c.clone.List(dir)
				if slices.Contains(names, resetFile) {
					t.Fatalf("%s left after Open: %v", resetFile, names)
				}
			})
			_ = l.Close()
		}
	}
}

// TestResetErrors fails each file-system operation of a Reset in turn: an
// error before its commit point changes nothing (the log is healthy and
// appends go on at its end); after it, the log is failed and its recovery
// finishes the reset. A reopen agrees either way.
func TestResetErrors(t *testing.T) {
	cfg := Config{SegmentBytes: 1024, RetentionAge: -1, RecoveryBackoff: -1}
	var armed bool
	var mu sync.Mutex
	count := &errorfs.FailAt{K: -1}
	fs := errorfs.Wrap(memFS(t), errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			return count.MaybeError(op, path)
		}
		return nil
	}))
	l, _, sl, _ := resetLog(t, fs, dir, cfg)
	sl.Release()
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := l.Reset(300); err != nil {
		t.Fatal(err)
	}
	total := count.Count()
	_ = l.Close()
	committedSeen := false
	for k := range total {
		mem := memFS(t)
		inj := &errorfs.FailAt{K: k}
		armed := false
		var failedOp errorfs.Op = -1
		fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
			if !armed {
				return nil
			}
			err := inj.MaybeError(op, path)
			if err != nil {
				failedOp = op
			}
			return err
		}))
		l, _, sl, _ := resetLog(t, fs, dir, cfg)
		sl.Release()
		start, end := l.StartOffset(), l.EndOffset()
		armed = true
		err := l.Reset(300)
		armed = false
		if !inj.Fired() || err == nil && failedOp != errorfs.OpClose || err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d (%v): Reset = %v (fired %v)", k, failedOp, err, inj.Fired())
		}
		switch {
		case err == nil: // closing a deleted segment's file failed: nothing needed it
			if l.StartOffset() != 300 || l.EndOffset() != 300 || l.Err() != nil {
				t.Fatalf("op %d: [%d, %d) %v", k, l.StartOffset(), l.EndOffset(), l.Err())
			}
		case l.Err() == nil:
			if committedSeen {
				t.Fatalf("op %d: a failure after the commit point left the log healthy", k)
			}
			if l.StartOffset() != start || l.EndOffset() != end {
				t.Fatalf("op %d: failed before its commit point, the log moved: [%d, %d)", k, l.StartOffset(), l.EndOffset())
			}
			if res, err := l.Append(ctx, batch(900, 1, 10), 3); err != nil || res.BaseOffset != end {
				t.Fatalf("op %d: append after a failed reset: %+v %v", k, res, err)
			}
			contiguous(t, l)
		default:
			committedSeen = true
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("op %d: %v, want ErrFailed", k, err)
			}
			if _, err := l.Recover(); err != nil {
				t.Fatalf("op %d: recover: %v", k, err)
			}
			if l.StartOffset() != 300 || l.EndOffset() != 300 || len(l.Epochs()) != 0 {
				t.Fatalf("op %d: recovery did not finish the reset: [%d, %d) %v", k, l.StartOffset(), l.EndOffset(), l.Epochs())
			}
		}
		wantStart, wantEnd := l.StartOffset(), l.EndOffset()
		_ = l.Close()
		l2, _, err := Open(mem, dir, cfg)
		if err != nil {
			t.Fatalf("op %d: reopen: %v", k, err)
		}
		if l2.StartOffset() != wantStart || l2.EndOffset() != wantEnd {
			t.Fatalf("op %d: reopened [%d, %d), want [%d, %d)", k, l2.StartOffset(), l2.EndOffset(), wantStart, wantEnd)
		}
		checkEpochs(t, l2, logEpochs(t, l2))
		_ = l2.Close()
	}
	if !committedSeen {
		t.Fatal("no failure came after the commit point")
	}
}

type cutFunc func(end int64) error

func (f cutFunc) AfterCut(end int64) error { return f(end) }

// TestAfterCut: the hook hears of every cut (Truncate's new end, Reset's
// -1) and of the end at Open and after each recovery; a failing hook fails
// the log, the recovery calls it again, and a Reset keeps its commit point
// until the hook has succeeded, so that a reopen calls it with -1 again.
func TestAfterCut(t *testing.T) {
	mem := memFS(t)
	var calls []int64
	var fail error
	cfg := Config{SegmentBytes: 1024, RetentionAge: -1, RecoveryBackoff: -1,
		CutHook: cutFunc(func(end int64) error { calls = append(calls, end); return fail })}
	l, _ := mustOpen(t, mem, cfg)
	defer func() { _ = l.Close() }()
	appendEpochs(t, l, 1, 10)
	if err := l.Truncate(30); err != nil { // nothing to cut
		t.Fatal(err)
	}
	if err := l.Truncate(15); err != nil { // inside [14, 16)
		t.Fatal(err)
	}
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 14, -1}; !slices.Equal(calls, want) {
		t.Fatalf("AfterCut calls %v, want %v", calls, want)
	}
	appendEpochs(t, l, 2, 3)
	calls, fail = nil, errors.New("hook failed")
	if err := l.Truncate(102); !errors.Is(err, ErrFailed) || !errors.Is(err, fail) {
		t.Fatalf("Truncate with a failing hook: %v", err)
	}
	if _, err := l.Recover(); err == nil {
		t.Fatal("recovered although the hook still fails")
	}
	fail = nil
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{102, 102, 102}; !slices.Equal(calls, want) {
		t.Fatalf("AfterCut calls %v, want %v", calls, want)
	}
	calls, fail = nil, errors.New("hook failed")
	if err := l.Reset(50); !errors.Is(err, ErrFailed) {
		t.Fatalf("Reset with a failing hook: %v", err)
	}
	if names, _ := mem.List(dir); !slices.Contains(names, resetFile) {
		t.Fatalf("the reset file went before the hook succeeded: %v", names)
	}
	clone := mem.CrashClone()
	fail = nil
	l2, rep := mustOpen(t, clone, cfg)
	defer func() { _ = l2.Close() }()
	if !rep.ResetFinished || l2.StartOffset() != 50 || l2.EndOffset() != 50 {
		t.Fatalf("reopen after the failed hook: %+v, [%d, %d)", rep, l2.StartOffset(), l2.EndOffset())
	}
	if want := []int64{-1, -1}; !slices.Equal(calls, want) {
		t.Fatalf("AfterCut calls %v, want %v (Reset's, then Open's)", calls, want)
	}
}
