package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// offsetModel remembers every record appended, by offset, so that what a
// log says of each key can be checked against any prefix of it.
type offsetModel struct {
	recs map[int64]kv
}

func (m *offsetModel) add(base int64, recs []kv) {
	for i, r := range recs {
		m.recs[base+int64(i)] = r
	}
}

// upTo is what the log must say of every key if it holds the records below end.
func (m *offsetModel) upTo(end int64) keyModel {
	km := keyModel{}
	for off := int64(0); off < end; off++ {
		if r, ok := m.recs[off]; ok {
			km.apply(r)
		}
	}
	return km
}

// checkServed checks the records v served against what was appended below
// end, record by record: each is the record appended at its offset, and
// each record appended that is not served was one a pass may remove (a
// keyed record superseded by a later one of its key, or a tombstone). So
// whatever a crash left, every offset holds its record of the old log or
// of the cleaned one, never another's, and nothing else went: a group of
// segments half swapped (some old ones deleted, the cleaned one not in
// place) would lose records no pass removes, or serve records twice
// (readView).
func (m *offsetModel) checkServed(t testing.TB, v view, start, end int64) {
	t.Helper()
	served := map[int64]bool{}
	for _, r := range v.records {
		want, ok := m.recs[r.off]
		if !ok || !bytes.Equal(want.key, r.key) || !bytes.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) {
			t.Fatalf("offset %d serves %q=%q; %q=%q was appended there (%v)", r.off, r.key, r.value, want.key, want.value, ok)
		}
		served[r.off] = true
	}
	lastOf := map[string]int64{}
	for off := start; off < end; off++ {
		if r, ok := m.recs[off]; ok && r.key != nil {
			lastOf[string(r.key)] = off
		}
	}
	for off := start; off < end; off++ {
		r, ok := m.recs[off]
		if !ok || served[off] {
			continue
		}
		if r.key == nil || (r.value != nil && lastOf[string(r.key)] == off) {
			t.Fatalf("offset %d: %q=%q is gone, yet no pass removes it (neither superseded nor a tombstone)", off, r.key, r.value)
		}
	}
}

// cleanWorkload appends keyed batches (overwrites, tombstones, a few
// idempotent and compressed batches) with rolls, cleaning three times along
// the way, the last with no tombstone retention; clean runs each pass and
// tells onClean when one starts and ends.
func cleanWorkload(t testing.TB, fs vfs.FS, m *offsetModel, onOpen func(*Log), onClean func(bool)) error {
	clk := newClock()
	cfg := cleanConfig(clk)
	cfg.FlushPolicy = flushpolicy.EveryMessages(8)
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	rng := rand.New(rand.NewPCG(5, 5))
	seq := int32(0)
	for i := 0; i < 90; i++ {
		var recs []kv
		for j := 0; j <= i%3; j++ {
			k := keyName(rng.IntN(12))
			if rng.IntN(6) == 0 {
				recs = append(recs, del(k))
			} else {
				recs = append(recs, put(k, fmt.Sprintf("v%d.%d", i, j)))
			}
		}
		o := plain()
		switch i % 9 {
		case 4:
			o, seq = idempotent(3, seq), seq+int32(len(recs))
		case 7:
			o = zstdOpts(o)
		}
		res, err := l.Append(ctx, keyed(t, o, clk.Now().UnixMilli(), recs...), 2)
		if err != nil {
			return err
		}
		m.add(res.BaseOffset, recs)
		if i%10 == 9 {
			clk.Advance(cfg.SegmentAge) // the next append rolls
		}
		if i == 40 || i == 70 || i == 89 {
			o := withCodecs(CleanOptions{UpTo: NoLimit})
			if i == 89 {
				o.DeleteRetention = -1
				clk.Advance(cfg.SegmentAge)
				res, err := l.Append(ctx, keyed(t, plain(), clk.Now().UnixMilli(), unkeyed("last")), 2)
				if err != nil {
					return err
				}
				m.add(res.BaseOffset, []kv{unkeyed("last")})
			}
			onClean(true)
			_, err := l.Clean(ctx, o)
			onClean(false)
			if err != nil {
				return err
			}
		}
	}
	return l.Close()
}

// checkCleaned checks a log reopened after a crash or a failure: no
// temporary file of the cleaner left, whole batches with continuous
// offsets, nothing served twice, at least everything below mustHave, and
// every key as the records below the log end say; and the same after one
// more pass and an append.
func checkCleaned(t *testing.T, fs vfs.FS, l *Log, m *offsetModel, mustHave int64) {
	t.Helper()
	if left := cleanerFiles(t, fs); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if l.EndOffset() < mustHave {
		t.Fatalf("log ends at %d, below %d which was durable", l.EndOffset(), mustHave)
	}
	if p := l.cleaned.Load().point(); p > l.EndOffset() {
		t.Fatalf("cleaner point %d past the log end %d", p, l.EndOffset())
	}
	v := readView(t, l)
	m.upTo(l.EndOffset()).check(t, v)
	m.checkServed(t, v, l.StartOffset(), l.EndOffset())
	if _, err := l.Clean(ctx, withCodecs(CleanOptions{UpTo: NoLimit})); err != nil {
		t.Fatalf("clean after reopen: %v", err)
	}
	m.upTo(l.EndOffset()).check(t, readView(t, l))
	end := l.EndOffset()
	res, err := l.Append(ctx, keyed(t, plain(), 0, put("after", "1")), 3)
	if err != nil || res.BaseOffset != end {
		t.Fatalf("append after reopen: %+v %v, want base %d", res, err, end)
	}
}

// cleanOps returns the indexes of the file-system operations the workload
// makes inside Clean, and how many it makes in all.
func cleanOps(t *testing.T) ([]int, int) {
	var (
		mu      sync.Mutex
		n       int
		inClean bool
		ops     []int
	)
	fs := errorfs.Wrap(memFS(t), errorfs.InjectorFunc(func(errorfs.Op, string) error {
		mu.Lock()
		defer mu.Unlock()
		if inClean {
			ops = append(ops, n)
		}
		n++
		return nil
	}))
	err := cleanWorkload(t, fs, &offsetModel{recs: map[int64]kv{}}, func(*Log) {},
		func(in bool) { mu.Lock(); inClean = in; mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	return ops, n
}

// TestCleanCrashLoop cuts the power before every file-system operation a
// clean pass makes (its rewrite, its swap, the cleaner point), in turn, with
// and without torn writes: the log reopens with no temporary file left,
// every key as the surviving records say (so none of a cleaned group's
// records is lost, nor served twice), at least what was durable, and goes
// on cleaning and appending.
func TestCleanCrashLoop(t *testing.T) {
	ops, total := cleanOps(t)
	if len(ops) < 60 {
		t.Fatalf("the passes made only %d of %d operations", len(ops), total)
	}
	step := 1
	if testing.Short() {
		step = 5
	}
	finished := 0 // reopens that found a swap past its commit point
	defer func() {
		if !t.Failed() && finished == 0 {
			t.Error("no crash fell between a swap's commit point and its end")
		}
	}()
	for _, torn := range []bool{false, true} {
		for i := 0; i < len(ops); i += step {
			k := ops[i]
			var (
				mu      sync.Mutex
				log     *Log
				durable int64
			)
			c, fs := newCrasher(memFS(t), k, torn, 11, func() {
				mu.Lock()
				defer mu.Unlock()
				if log != nil {
					durable = log.FlushedOffset()
				}
			})
			m := &offsetModel{recs: map[int64]kv{}}
			if err := cleanWorkload(t, fs, m, func(l *Log) { mu.Lock(); log = l; mu.Unlock() }, func(bool) {}); err != nil {
				t.Fatalf("crash %d: workload: %v", k, err)
			}
			l, rep, err := Open(c.clone, dir, cleanConfig(newClock()))
			if err != nil {
				t.Fatalf("torn=%v crash before op %d: reopen: %v", torn, k, err)
			}
			finished += rep.CleanSwaps
			ok := t.Run(fmt.Sprintf("torn=%v/op=%d", torn, k), func(t *testing.T) {
				checkCleaned(t, c.clone, l, m, durable)
			})
			if !ok {
				t.Logf("torn=%v crash before op %d: durable %d, report %+v, segments %s", torn, k, durable, rep, segNames(l))
			}
			_ = l.Close()
			if !ok {
				return
			}
		}
	}
}

// armed fails file-system operations only while armed, with the FailAt it
// wraps counting only those, and remembers the first it failed and whether
// a swap had passed its commit point (its log renamed to .swap) by then.
type armed struct {
	mu        sync.Mutex
	on        bool
	f         *errorfs.FailAt
	failedOp  errorfs.Op
	failedAt  string
	committed bool // a .log.cleaned was renamed
	early     bool // the first failure came before any commit
}

func (a *armed) MaybeError(op errorfs.Op, path string) error {
	a.mu.Lock()
	on := a.on
	a.mu.Unlock()
	if !on {
		return nil
	}
	err := a.f.MaybeError(op, path)
	a.mu.Lock()
	switch {
	case err != nil && a.failedAt == "":
		a.failedOp, a.failedAt, a.early = op, path, !a.committed
	case err == nil && op == errorfs.OpRename && strings.HasSuffix(path, segment.LogSuffix+segment.CleanedTag):
		a.committed = true
	}
	a.mu.Unlock()
	return err
}

// beforeCommit tells whether the first operation failed came before a
// swap's commit point.
func (a *armed) beforeCommit() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.early
}

func (a *armed) set(on bool) { a.mu.Lock(); a.on = on; a.mu.Unlock() }

// TestCleanErrorLoop fails every file-system operation of a clean pass in
// turn (once, or a disk that stays full): the pass returns the error; unless
// it had passed its swap's commit point, the log is not failed and appends
// go on; otherwise the log is failed, and its recovery finishes the swap.
// Either way no record is lost, and after a reopen (or the next pass) no
// temporary file is left.
func TestCleanErrorLoop(t *testing.T) {
	for _, mode := range []string{"once", "disk-full"} {
		t.Run(mode, func(t *testing.T) {
			failedLogs := 0
			for k := 0; ; k++ {
				reached, failed := errorInClean(t, k, mode)
				if failed {
					failedLogs++
				}
				if !reached {
					if k < 40 || failedLogs == 0 {
						t.Fatalf("%d operations in the pass, %d failures failed the log", k, failedLogs)
					}
					return
				}
			}
		})
	}
}

// errorInClean runs the error loop's case k: reached is false once k is past
// the pass's last operation; failed tells that the failure failed the log.
func errorInClean(t *testing.T, k int, mode string) (reached, failed bool) {
	t.Helper()
	mem := memFS(t)
	inj := &armed{f: &errorfs.FailAt{K: k}}
	if mode == "disk-full" {
		inj.f.Sticky, inj.f.Err = true, syscall.ENOSPC
	}
	clk := newClock()
	cfg := cleanConfig(clk)
	cfg.RecoveryBackoff = -1
	l, _ := mustOpen(t, errorfs.Wrap(mem, inj), cfg)
	m := &offsetModel{recs: map[int64]kv{}}
	for i := 0; i < 120; i++ {
		recs := []kv{put(keyName(i%15), fmt.Sprint(i)), put(keyName(i%4+20), fmt.Sprint(i))}
		if i%11 == 0 {
			recs = append(recs, del(keyName(i%15+1)))
		}
		res, err := l.Append(ctx, keyed(t, plain(), clk.Now().UnixMilli(), recs...), 1)
		if err != nil {
			t.Fatal(err)
		}
		m.add(res.BaseOffset, recs)
		if i%30 == 29 {
			clk.Advance(cfg.SegmentAge)
		}
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	inj.set(true)
	res, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit, DeleteRetention: -1})
	inj.set(false)
	if !inj.f.Fired() {
		_ = l.Close()
		if err != nil {
			t.Fatalf("op %d not reached, yet: %v", k, err)
		}
		return false, false
	}
	defer func() {
		if t.Failed() {
			t.Logf("%s at op %d: clean %+v, %v; segments %s", mode, k, res, err, segNames(l))
		}
	}()
	// A failure the pass can do without may leave no error: a read that
	// segment.Read stops short at (the pass reads on from there), or a
	// temporary file it could not remove (the next pass does).
	if err != nil && !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("op %d: error does not carry its cause: %v", k, err)
	}
	if failed = l.Err() != nil; failed {
		if inj.beforeCommit() {
			t.Fatalf("op %d (%v %s), before the commit point, failed the log: %v", k, inj.failedOp, inj.failedAt, l.Err())
		}
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("op %d failed the log, and the pass said %v", k, err)
		}
		if _, rerr := l.Recover(); rerr != nil {
			t.Fatalf("op %d: recover: %v", k, rerr)
		}
	}
	v := readView(t, l)
	m.upTo(l.EndOffset()).check(t, v)
	m.checkServed(t, v, l.StartOffset(), l.EndOffset())
	if res2, err2 := l.Clean(ctx, CleanOptions{UpTo: NoLimit, DeleteRetention: -1}); err2 != nil {
		t.Fatalf("op %d: the next pass: %+v %v", k, res2, err2)
	}
	if left := cleanerFiles(t, mem); len(left) != 0 {
		t.Fatalf("op %d: left behind after the next pass: %v", k, left)
	}
	m.upTo(l.EndOffset()).check(t, readView(t, l))
	res3, aerr := l.Append(ctx, keyed(t, plain(), 0, put("after", "1")), 1)
	if aerr != nil {
		t.Fatalf("op %d: append: %v", k, aerr)
	}
	m.add(res3.BaseOffset, []kv{put("after", "1")})
	if err := l.Close(); err != nil {
		t.Fatalf("op %d: close: %v", k, err)
	}
	l, _ = mustOpen(t, mem, cleanConfig(clk))
	defer l.Close()
	m.upTo(l.EndOffset()).check(t, readView(t, l))
	return true, failed
}

// truncWorkload cleans a log at T0, then, two hours later, truncates it
// below the cleaner point and appends a tombstone for a key whose value lies
// below the cut, and a marker, telling onCut when the cut starts. pre and
// post are the records before and after the cut.
func cleanTruncWorkload(t testing.TB, fs vfs.FS, clk *fakeClock, pre, post *offsetModel, onOpen func(*Log), onCut func()) error {
	cfg := cleanConfig(clk)
	cfg.FlushPolicy = flushpolicy.EveryBatch()
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	add := func(m []*offsetModel, recs ...kv) error {
		res, err := l.Append(ctx, keyed(t, plain(), clk.Now().UnixMilli(), recs...), 1)
		for _, m := range m {
			m.add(res.BaseOffset, recs)
		}
		return err
	}
	both := []*offsetModel{pre, post}
	if err := add(both, put("k", "old")); err != nil {
		return err
	}
	for i := 0; i < 60; i++ {
		if err := add(both, put(keyName(i%5), fmt.Sprint(i))); err != nil {
			return err
		}
		if i%20 == 19 {
			clk.Advance(cfg.SegmentAge)
		}
	}
	res, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit, DeleteRetention: time.Hour})
	if err != nil {
		return err
	}
	clk.Advance(2 * time.Hour)
	onCut()
	if err := l.Truncate(res.CleanerPoint - 5); err != nil {
		return err
	}
	end := l.EndOffset()
	for off := range post.recs {
		if off >= end {
			delete(post.recs, off)
		}
	}
	if err := add([]*offsetModel{post}, del("k"), put("marker", "post")); err != nil {
		return err
	}
	for i := 0; i < 30; i++ {
		if err := add([]*offsetModel{post}, put(keyName(i%5), fmt.Sprint("p", i))); err != nil {
			return err
		}
		if i%10 == 9 {
			clk.Advance(cfg.SegmentAge)
		}
	}
	return l.Close()
}

// TestCleanCrashTruncateBelowCleanerPoint cuts the power at every operation
// from a truncation below the cleaner point on: whatever survives, the
// offsets the cut reused count as dirty, so the tombstone written at one of
// them is mapped (and its key's old value below the cut dropped) instead of
// being taken for one cleaned long ago and removed, which would bring the
// old value back.
func TestCleanCrashTruncateBelowCleanerPoint(t *testing.T) {
	var from int
	probe := &errorfs.FailAt{K: -1}
	err := cleanTruncWorkload(t, errorfs.Wrap(memFS(t), probe), newClock(), &offsetModel{recs: map[int64]kv{}},
		&offsetModel{recs: map[int64]kv{}}, func(*Log) {}, func() { from = probe.Count() })
	if err != nil {
		t.Fatal(err)
	}
	total := probe.Count()
	cuts := 0
	for _, torn := range []bool{false, true} {
		for k := from; k < total; k++ {
			clk := newClock()
			pre, post := &offsetModel{recs: map[int64]kv{}}, &offsetModel{recs: map[int64]kv{}}
			c, fs := newCrasher(memFS(t), k, torn, 3, func() {})
			if err := cleanTruncWorkload(t, fs, clk, pre, post, func(*Log) {}, func() {}); err != nil {
				t.Fatal(err)
			}
			l, rep, err := Open(c.clone, dir, cleanConfig(clk))
			if err != nil {
				t.Fatalf("crash before op %d: reopen: %v", k, err)
			}
			for pass := 0; pass < 2; pass++ {
				if _, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit, DeleteRetention: time.Hour}); err != nil {
					t.Fatalf("crash before op %d: clean: %v", k, err)
				}
			}
			v := readView(t, l)
			want := pre
			if _, ok := v.latest["marker"]; ok {
				want = post
				cuts++
			}
			ok := t.Run(fmt.Sprintf("torn=%v/op=%d", torn, k), func(t *testing.T) { want.upTo(l.EndOffset()).check(t, v) })
			_ = l.Close()
			if !ok {
				t.Fatalf("crash before op %d: report %+v", k, rep)
			}
		}
	}
	if cuts == 0 {
		t.Fatal("no crash left the records written after the cut")
	}
}
