package partlog

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Tests of disk-full and I/O errors met while the log runs, and of its
// recovery in place once the fault is gone (recover.go).

// faultPoint is where a fault first strikes: the first operation of kind op
// on a file whose name ends with suffix after the fault is armed.
type faultPoint struct {
	name   string
	op     errorfs.Op
	suffix string
	// policy is the log's flush policy; fsync faults need appends that fsync.
	policy func() flushpolicy.Policy
	// lostPages: an fsync failed, so the log goes back to FlushedOffset.
	lostPages bool
}

var faultPoints = []faultPoint{
	{name: "append-write", op: errorfs.OpWrite, suffix: ".log", policy: flushpolicy.Never},
	{name: "roll-create", op: errorfs.OpCreate, suffix: ".log", policy: flushpolicy.Never},
	{name: "index-write", op: errorfs.OpWrite, suffix: ".index", policy: flushpolicy.Never},
	{name: "fsync", op: errorfs.OpSync, suffix: ".log", policy: flushpolicy.EveryBatch, lostPages: true},
}

// faultMode is how the fault behaves once it strikes.
type faultMode struct {
	name    string
	sticky  bool // every later matching operation fails too, until cleared
	err     error
	partial bool // a failing write stores half its bytes first
}

var faultModes = []faultMode{
	{name: "enospc-sticky", sticky: true, err: syscall.ENOSPC},
	{name: "eio-once", err: syscall.EIO},
	{name: "half-write", err: syscall.EIO, partial: true},
}

// faultFS wraps fs with a FailAt that sees only the operations of the point
// (its op kind, on its kind of file) and fails none until armed.
func faultFS(fs vfs.FS, p faultPoint, m faultMode) (vfs.FS, *errorfs.FailAt) {
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{p.op}, Sticky: m.sticky, Err: m.err, PartialWrite: m.partial}
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if !strings.HasSuffix(path, p.suffix) {
			return nil
		}
		return inj.MaybeError(op, path)
	})), inj
}

func faultConfig(clk *fakeClock, policy func() flushpolicy.Policy) Config {
	return Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionBytes: -1, RetentionAge: -1,
		FlushPolicy: policy(), Clock: clk, RecoveryBackoff: time.Second}
}

// TestFaultRecovery fails each kind of operation the log makes while it runs
// (append write, segment create on a roll, index write when sealing, fsync)
// in each way (a disk that stays full until space returns, a one-off EIO, a
// half write). While the fault lasts, appends fail with ErrFailed carrying
// the cause and readers are served only whole, valid, contiguous batches;
// once it is gone, the next append after the backoff recovers the log in
// place and lands right after every acknowledged record: none lost, no
// offset skipped or given twice. A reopen and a power cut agree.
func TestFaultRecovery(t *testing.T) {
	for _, p := range faultPoints {
		for _, mode := range faultModes {
			if mode.partial && p.op != errorfs.OpWrite {
				continue // only writes store bytes
			}
			t.Run(p.name+"/"+mode.name, func(t *testing.T) { testFault(t, p, mode) })
		}
	}
}

func testFault(t *testing.T, p faultPoint, mode faultMode) {
	clk := newClock()
	mem := memFS(t)
	fs, inj := faultFS(mem, p, mode)
	l, _ := mustOpen(t, fs, faultConfig(clk, p.policy))
	defer l.Close()
	m := newModel()
	id := 0
	next := func() []byte { id++; return batch(id, 1+id%3, 100+(id*37)%200) }
	for range 8 {
		if _, err := m.append(t, l, next()); err != nil {
			t.Fatal(err)
		}
	}
	acked := m.acked
	flushedBefore := l.FlushedOffset()

	// Arm the fault, then append until it strikes: a roll comes within a
	// few appends (the segment is 3000 bytes).
	inj.K = inj.Count()
	var failErr error
	for range 40 {
		if _, failErr = m.append(t, l, next()); failErr != nil {
			break
		}
	}
	if !inj.Fired() || failErr == nil {
		t.Fatalf("the fault never struck (fired %v, err %v)", inj.Fired(), failErr)
	}
	if !errors.Is(failErr, ErrFailed) || !errors.Is(failErr, mode.err) {
		t.Fatalf("failed append: %v; want ErrFailed wrapping %v", failErr, mode.err)
	}
	acked = max(acked, m.acked)
	t.Logf("fault struck: %v", failErr)
	if p.lostPages {
		if l.EndOffset() != l.FlushedOffset() {
			t.Fatalf("after a failed fsync the log serves up to %d, beyond the durable %d", l.EndOffset(), l.FlushedOffset())
		}
	}
	contiguous(t, l)

	// While the fault lasts: refused within the backoff, and after it too
	// when the fault is sticky (the recovery or the append meets it again).
	if _, err := m.append(t, l, next()); !errors.Is(err, ErrFailed) {
		t.Fatalf("append within the backoff: %v", err)
	}
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush of a failed log: %v", err)
	}
	if mode.sticky {
		for range 3 {
			clk.Advance(MaxRecoveryBackoff)
			// A batch as large as a segment rolls, so it meets every
			// kind of fault point.
			id++
			if _, err := m.append(t, l, batch(id, 3, 1000)); !errors.Is(err, ErrFailed) || !errors.Is(err, mode.err) {
				t.Fatalf("append while the disk is still full: %v", err)
			}
			contiguous(t, l)
		}
		inj.Clear()
	}

	// Space returns: after the backoff the next append recovers and lands
	// at the log end, after everything acknowledged.
	clk.Advance(MaxRecoveryBackoff)
	recoveries := l.Recoveries()
	res, err := m.append(t, l, next())
	if err != nil {
		t.Fatalf("append after the fault cleared: %v", err)
	}
	if l.Recoveries() != recoveries+1 {
		t.Fatalf("recoveries %d -> %d, want one more", recoveries, l.Recoveries())
	}
	if res.BaseOffset < acked {
		t.Fatalf("append after recovery at %d reuses acknowledged offsets (acknowledged up to %d)", res.BaseOffset, acked)
	}
	if p.lostPages && res.BaseOffset != acked {
		// Every batch was fsynced before its ack; the failed one was cut.
		t.Fatalf("append after recovery at %d, want %d (flushed before the fault %d)", res.BaseOffset, acked, flushedBefore)
	}
	m.check(t, l, 0, res.NextOffset)
	for range 10 { // and goes on, across rolls
		if _, err := m.append(t, l, next()); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	}
	m.check(t, l, 0, m.acked)
	durable := l.FlushedOffset()
	if err := l.Close(); err != nil {
		t.Fatalf("close after recovery: %v", err)
	}

	// What is on disk agrees: a reopen finds it all, and a power cut keeps
	// at least what was fsynced.
	for _, c := range []struct {
		name string
		fs   vfs.FS
		want int64
	}{{"reopen", mem, m.acked}, {"power cut", mem.CrashClone(), durable}} {
		l2, rep := mustOpen(t, c.fs, Config{SegmentBytes: 3000, RetentionAge: -1})
		m.check(t, l2, 0, c.want)
		if c.name == "reopen" && !rep.Clean {
			t.Errorf("close after recovery left no clean-shutdown marker")
		}
		l2.Close()
	}
}

// TestFaultFsyncLosesUnflushed pins the one loss a recovery makes: after a
// failed fsync, records acknowledged without a covering fsync (no durable
// ack) are cut, as a power cut would cut them, and their offsets go to the
// next records. Readers stop being served them as soon as the fsync fails, a
// durable-ack wait on them fails with ErrCut, and the generation moves on.
func TestFaultFsyncLosesUnflushed(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	p := faultPoints[3]
	fs, inj := faultFS(mem, p, faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer l.Close()
	m := newModel()
	for i := range 4 {
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	durable := l.FlushedOffset()
	unflushed, err := m.append(t, l, batch(10, 3, 100)) // acknowledged, not durable
	if err != nil {
		t.Fatal(err)
	}
	gen := l.Generation()

	inj.K = inj.Count()
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush over a failing fsync: %v", err)
	}
	if l.EndOffset() != durable {
		t.Fatalf("readers are served up to %d after the failed fsync, want the durable %d", l.EndOffset(), durable)
	}
	if sl, err := l.Read(unflushed.BaseOffset, 1<<20, NoLimit); err != nil || sl.Size != 0 {
		t.Fatalf("read of records the failed fsync may have lost: %+v, %v; want nothing", sl, err)
	}
	if _, err := l.Read(unflushed.BaseOffset+1, 1<<20, NoLimit); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the durable end: %v", err)
	}
	m.check(t, l, 0, durable)

	if _, err := l.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if l.EndOffset() != durable || l.FlushedOffset() != durable {
		t.Fatalf("recovered log ends at %d (flushed %d), want %d", l.EndOffset(), l.FlushedOffset(), durable)
	}
	if l.Generation() != gen+1 || l.Survived(unflushed) {
		t.Fatalf("generation %d -> %d, survived %v: the cut went unrecorded", gen, l.Generation(), l.Survived(unflushed))
	}
	if err := l.FlushAppended(ctx, unflushed); !errors.Is(err, ErrCut) || !errors.Is(err, ErrFailed) {
		t.Fatalf("durable wait on cut records: %v", err)
	}
	res, err := m.append(t, l, batch(11, 1, 100))
	if err != nil || res.BaseOffset != durable {
		t.Fatalf("append after the cut: %+v, %v; want offset %d", res, err, durable)
	}
	if !l.Survived(res) {
		t.Fatal("a record appended after the cut counts as cut")
	}
	if err := l.FlushAppended(ctx, res); err != nil {
		t.Fatalf("durable wait after recovery: %v", err)
	}
	m.check(t, l, 0, res.NextOffset)
}

// A durable wait that began before the fsync failure, on records the last
// good fsync covered, still succeeds; one on records it did not fails.
func TestFaultSurvivedAcrossGenerations(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer l.Close()
	covered, err := l.Append(ctx, batch(1, 2, 100), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(covered.NextOffset); err != nil {
		t.Fatal(err)
	}
	var lost []AppendResult
	for range maxCuts + 3 { // more cuts than remembered
		res, err := l.Append(ctx, batch(2, 1, 100), 0)
		if err != nil {
			t.Fatal(err)
		}
		lost = append(lost, res)
		inj.K = inj.Count()
		if err := l.Flush(res.NextOffset); !errors.Is(err, ErrFailed) {
			t.Fatalf("flush: %v", err)
		}
		if _, err := l.Recover(); err != nil {
			t.Fatal(err)
		}
		if !l.Survived(covered) && len(lost) < maxCuts {
			t.Fatalf("records fsynced before the failure count as cut after %d cuts", len(lost))
		}
	}
	for i, res := range lost {
		if l.Survived(res) {
			t.Fatalf("append %d (%+v) was cut but counts as survived", i, res)
		}
	}
	if l.Survived(covered) {
		t.Fatal("an append older than every remembered cut must count as cut (the safe answer)")
	}
}

// Readers holding Slices across a recovery keep reading the bytes they were
// given; new reads see the recovered segments.
func TestFaultSliceHeldAcrossRecovery(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	fs, inj := faultFS(mem, faultPoints[0], faultModes[0])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer l.Close()
	m := newModel()
	for i := range 30 { // several segments
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	var held []Slice
	for _, off := range []int64{0, l.EndOffset() - 2} {
		sl, err := l.Read(off, 1<<20, NoLimit)
		if err != nil || sl.Size == 0 {
			t.Fatalf("read %d: %+v, %v", off, sl, err)
		}
		held = append(held, sl)
	}
	inj.K = inj.Count()
	if _, err := m.append(t, l, batch(99, 1, 100)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	inj.Clear()
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	for _, sl := range held {
		b, err := sl.Bytes()
		if err != nil {
			t.Fatalf("slice held across the recovery: %v", err)
		}
		if _, err := testbatch.Split(b); err != nil {
			t.Fatalf("slice held across the recovery serves a bad batch: %v", err)
		}
		sl.Release()
	}
	m.check(t, l, 0, m.acked)
	if _, err := m.append(t, l, batch(100, 1, 100)); err != nil {
		t.Fatal(err)
	}
	m.check(t, l, 0, m.acked)
}

// With RecoveryBackoff negative the log stays failed (the old behaviour)
// until Recover or a reopen.
func TestFaultNoAutomaticRecovery(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[0], faultModes[1])
	cfg := faultConfig(clk, flushpolicy.Never)
	cfg.RecoveryBackoff = -1
	l, _ := mustOpen(t, fs, cfg)
	defer l.Close()
	if _, err := l.Append(ctx, batch(1, 1, 100), 0); err != nil {
		t.Fatal(err)
	}
	inj.K = inj.Count()
	if _, err := l.Append(ctx, batch(2, 1, 100), 0); !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := l.Append(ctx, batch(3, 1, 100), 0); !errors.Is(err, ErrFailed) || l.Recoveries() != 0 {
		t.Fatalf("append with automatic recovery disabled: %v (recoveries %d)", err, l.Recoveries())
	}
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Append(ctx, batch(4, 1, 100), 0); err != nil || res.BaseOffset != 1 {
		t.Fatalf("append after Recover: %+v, %v", res, err)
	}
}

// HoldRecovery keeps a failed log failed past its backoff, the way a
// negative RecoveryBackoff does, until the hold is released (the next
// append then recovers) or Recover is called.
func TestFaultHoldRecovery(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[0], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer l.Close()
	if _, err := l.Append(ctx, batch(1, 1, 100), 0); err != nil {
		t.Fatal(err)
	}
	l.HoldRecovery(true)
	if !l.RecoveryHeld() {
		t.Fatal("RecoveryHeld after HoldRecovery(true)")
	}
	inj.K = inj.Count()
	if _, err := l.Append(ctx, batch(2, 1, 100), 0); !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	if l.RecoveryDue() {
		t.Fatal("RecoveryDue at once after the failure")
	}
	clk.Advance(time.Hour)
	if _, err := l.Append(ctx, batch(3, 1, 100), 0); !errors.Is(err, ErrFailed) || l.Recoveries() != 0 {
		t.Fatalf("append with recovery held: %v (recoveries %d)", err, l.Recoveries())
	}
	if err := l.RecoverIfDue(); !errors.Is(err, ErrFailed) || l.Recoveries() != 0 {
		t.Fatalf("RecoverIfDue with recovery held: %v (recoveries %d)", err, l.Recoveries())
	}
	if !l.RecoveryDue() {
		t.Fatal("RecoveryDue is false an hour after the failure")
	}
	l.HoldRecovery(false)
	res, err := l.Append(ctx, batch(4, 1, 100), 0)
	if err != nil || res.BaseOffset != 1 || l.Recoveries() != 1 {
		t.Fatalf("append once the hold is released: %+v, %v (recoveries %d)", res, err, l.Recoveries())
	}
	if l.RecoveryDue() {
		t.Fatal("RecoveryDue on a healthy log")
	}
}

// After a cut, a reader still holding a Slice of the cut records reads them
// or comes up short, never the records appended at their offsets since:
// the next append goes to a new file, whether the cut left the active
// segment with records or emptied it.
func TestFaultSliceOfCutRecords(t *testing.T) {
	for _, emptied := range []bool{false, true} {
		t.Run(map[bool]string{false: "partial", true: "emptied"}[emptied], func(t *testing.T) {
			clk := newClock()
			fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
			l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
			defer l.Close()
			for i := range 5 {
				if _, err := l.Append(ctx, batch(i, 2, 100), 0); err != nil {
					t.Fatal(err)
				}
			}
			if emptied { // roll, so that the unflushed records start a segment
				if _, err := l.Append(ctx, batch(50, 3, 1000), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(l.EndOffset()); err != nil {
				t.Fatal(err)
			}
			cut, err := l.Append(ctx, batch(100, 2, 300), 0)
			if err != nil {
				t.Fatal(err)
			}
			if emptied != (l.Segments()[len(l.Segments())-1].Base == cut.BaseOffset) {
				t.Fatalf("setup: segments %s, cut records at %d", segNames(l), cut.BaseOffset)
			}
			sl, err := l.Read(cut.BaseOffset, 1<<20, NoLimit)
			if err != nil || sl.Size == 0 {
				t.Fatalf("read: %+v %v", sl, err)
			}
			defer sl.Release()
			old, err := sl.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			inj.K = inj.Count()
			if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
				t.Fatalf("flush: %v", err)
			}
			if _, err := l.Recover(); err != nil {
				t.Fatal(err)
			}
			res, err := l.Append(ctx, batch(200, 2, 300), 0)
			if err != nil || res.BaseOffset != cut.BaseOffset {
				t.Fatalf("append after the cut: %+v, %v; want offset %d", res, err, cut.BaseOffset)
			}
			if b, err := sl.Bytes(); err == nil && string(b) != string(old) {
				t.Fatalf("a Slice of cut records now reads other bytes (segments %s)", segNames(l))
			}
			contiguous(t, l)
		})
	}
}
