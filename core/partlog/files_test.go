package partlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// TestLogsShareADescriptorBudget runs many logs of several segments each
// on the OS file system through one small file cache: appends, rolls,
// reads and a reopen of every log work, every log holds exactly what was
// appended, and the logs never hold more descriptors than the budget
// while nothing reads (idle logs hold none once the budget is needed).
func TestLogsShareADescriptorBudget(t *testing.T) {
	const logs, limit = 30, 8
	root := t.TempDir()
	files := filecache.New(limit)
	cfg := Config{SegmentBytes: 4096, Files: files}
	open := func(i int) *Log {
		l, _, err := Open(vfs.Default, filepath.Join(root, fmt.Sprint(i)), cfg)
		if err != nil {
			t.Fatalf("open log %d: %v", i, err)
		}
		return l
	}
	models := make([]*model, logs)
	ls := make([]*Log, logs)
	for i := range ls {
		if err := vfs.Default.MkdirAll(filepath.Join(root, fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
		ls[i], models[i] = open(i), newModel()
	}
	for round := range 12 { // about 3 segments per log
		for i, l := range ls {
			if _, err := models[i].append(t, l, batch(i*1000+round, 3, 300)); err != nil {
				t.Fatalf("log %d round %d: %v", i, round, err)
			}
			if st := files.Stats(); st.Open > limit {
				t.Fatalf("log %d round %d: %d files open, budget %d", i, round, st.Open, limit)
			}
		}
	}
	for i, l := range ls {
		if len(l.segments()) < 3 {
			t.Fatalf("log %d has %d segments; the test wants several", i, len(l.segments()))
		}
		models[i].check(t, l, 0, l.EndOffset())
	}
	st := files.Stats()
	if st.Open > limit || st.Evictions == 0 || st.Overflows != 0 {
		t.Fatalf("cache stats %+v: want at most %d open, evictions, no overflow", st, limit)
	}
	for i, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatalf("close log %d: %v", i, err)
		}
	}
	if n := files.Stats().Open; n != 0 {
		t.Fatalf("%d files open after every log closed", n)
	}
	for i := range ls {
		ls[i] = open(i)
		models[i].check(t, ls[i], 0, ls[i].EndOffset())
		if _, err := models[i].append(t, ls[i], batch(i*1000+99, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if n := files.Stats().Open; n > limit {
		t.Fatalf("%d files open after reopening, budget %d", n, limit)
	}
	for i, l := range ls {
		models[i].check(t, l, 0, l.EndOffset())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTryReadRefusedWhenTheBudgetIsHeld: a fetch-style read fails with
// filecache.ErrBudget, rather than open past the budget, while every file
// the budget allows is held by a Slice; Read (the log's own readers) goes
// through; once the Slices are released TryRead works again.
func TestTryReadRefusedWhenTheBudgetIsHeld(t *testing.T) {
	root := t.TempDir()
	files := filecache.New(2)
	var ls []*Log
	for i := range 3 {
		d := filepath.Join(root, fmt.Sprint(i))
		if err := vfs.Default.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		l, _, err := Open(vfs.Default, d, Config{Files: files})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Append(ctx, batch(i, 1, 10), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var held []Slice
	for _, l := range ls[:2] {
		sl, err := l.TryRead(0, 1<<20, NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, sl)
	}
	if _, err := ls[2].TryRead(0, 1<<20, NoLimit); !errors.Is(err, filecache.ErrBudget) {
		t.Fatalf("TryRead with the budget held: %v, want ErrBudget", err)
	}
	sl, err := ls[2].Read(0, 1<<20, NoLimit)
	if err != nil || sl.Size == 0 {
		t.Fatalf("Read with the budget held: %+v, %v", sl, err)
	}
	sl.Release()
	for i := range held {
		held[i].Release()
	}
	sl, err = ls[2].TryRead(0, 1<<20, NoLimit)
	if err != nil || sl.Size == 0 {
		t.Fatalf("TryRead once released: %+v, %v", sl, err)
	}
	sl.Release()
}

// TestCleanOpenWritesNothingUntilTheFirstChange: after a clean shutdown,
// Open and Close of a log nobody changed create, rename, remove, write and
// fsync nothing (a broker of many idle partitions starts and stops without
// touching them); the first append then does what Open skipped, and a crash
// after it recovers (the clean-shutdown marker is gone).
func TestCleanOpenWritesNothingUntilTheFirstChange(t *testing.T) {
	mem := memFS(t)
	var writes []string
	counting := false
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		switch op {
		case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpTruncate, errorfs.OpRemove,
			errorfs.OpRename, errorfs.OpSyncDir: // not Mkdir: MkdirAll of a directory that exists creates nothing
			if counting {
				writes = append(writes, op.String()+" "+path)
			}
		}
		return nil
	}))
	cfg := Config{SegmentBytes: 2000}
	m := newModel()
	l, _ := mustOpen(t, fsys, cfg)
	for i := range 10 {
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	counting = true
	for range 2 {
		l, rep := mustOpen(t, fsys, cfg)
		if !rep.Clean {
			t.Fatal("not opened as clean")
		}
		m.check(t, l, 0, l.EndOffset())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(writes) > 0 {
		t.Fatalf("opening and closing an unchanged log wrote: %q", writes)
	}
	counting = false
	l, _ = mustOpen(t, fsys, cfg)
	res, err := m.append(t, l, batch(99, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(res.NextOffset); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	_ = l.Close()
	l2, rep, err := Open(crashed, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rep.Clean {
		t.Fatal("a crash after an append reopened as clean: the marker outlived the change")
	}
	m.check(t, l2, 0, res.NextOffset)
}

// TestLazyOpenAfterCleanShutdown: a log a clean shutdown left opens
// without opening any segment file; the first read loads the segment it
// needs and serves it; appends go on where the log ended. A marker that
// misdescribes the log (edited by hand) is found out at the first read,
// and the log recovers from its files instead of serving a wrong end.
func TestLazyOpenAfterCleanShutdown(t *testing.T) {
	mem := memFS(t)
	var segOpens int
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpOpen && (strings.HasSuffix(path, ".log") || strings.HasSuffix(path, "index")) {
			segOpens++
		}
		return nil
	}))
	cfg := Config{SegmentBytes: 2000}
	m := newModel()
	l, _ := mustOpen(t, fsys, cfg)
	for i := range 30 {
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	end, segs := l.EndOffset(), len(l.segments())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segOpens = 0
	l, _ = mustOpen(t, fsys, cfg)
	if segOpens != 0 {
		t.Fatalf("opening a cleanly closed log of %d segments opened segment files %d times", segs, segOpens)
	}
	if l.EndOffset() != end || len(l.segments()) != segs {
		t.Fatalf("lazy open: end %d, %d segments; want %d and %d", l.EndOffset(), len(l.segments()), end, segs)
	}
	m.check(t, l, 0, end)
	if segOpens == 0 {
		t.Fatal("reading the log opened no segment file")
	}
	if _, err := m.append(t, l, batch(99, 1, 10)); err != nil {
		t.Fatal(err)
	}
	m.check(t, l, 0, end+1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A marker claiming a longer log than the files hold.
	b, err := vfs.ReadFile(mem, dir+"/"+cleanShutdownFile)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	nums := fmt.Sprintf("%d %s", end+1+5, f[2])
	if err := vfs.WriteFileSynced(mem, dir+"/"+cleanShutdownFile, []byte("v1 "+nums+" "+checksum(nums)+"\n")); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, fsys, cfg)
	defer l.Close()
	if l.EndOffset() != end+1+5 {
		t.Fatalf("the edited marker's end was not taken lazily: end %d", l.EndOffset())
	}
	m.check(t, l, 0, end+1) // reads recover the log: it ends where the files do
	if l.EndOffset() != end+1 || l.Recoveries() == 0 {
		t.Fatalf("after the first read: end %d (want %d), %d recoveries", l.EndOffset(), end+1, l.Recoveries())
	}
}

// TestDiscardFlushesNothing: Discard, the close of a log whose files are
// removed next (its topic deleted), syncs no file and writes no
// clean-shutdown marker; the log refuses appends after it, and its files,
// if a crash left them behind, are recovered like any unmarked log's.
func TestDiscardFlushesNothing(t *testing.T) {
	mem := memFS(t)
	var syncs, creates []string
	counting := false
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if counting && (op == errorfs.OpSync || op == errorfs.OpSyncDir) {
			syncs = append(syncs, op.String()+" "+path)
		}
		if counting && op == errorfs.OpCreate {
			creates = append(creates, path)
		}
		return nil
	}))
	m := newModel()
	l, _ := mustOpen(t, fsys, Config{SegmentBytes: 2000})
	for i := range 20 {
		if _, err := m.append(t, l, batch(i, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	end, segs := l.EndOffset(), len(l.segments())
	if segs < 2 {
		t.Fatalf("the test wants several segments, has %d", segs)
	}
	counting = true
	if err := l.Discard(); err != nil {
		t.Fatal(err)
	}
	counting = false
	if len(syncs) > 0 || len(creates) > 0 {
		t.Fatalf("Discard synced %q and created %q; want nothing", syncs, creates)
	}
	if _, err := l.Append(context.Background(), batch(99, 1, 10), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Discard: %v, want ErrClosed", err)
	}
	if err := l.Discard(); !errors.Is(err, ErrClosed) {
		t.Fatalf("a second Discard: %v, want ErrClosed", err)
	}
	l2, rep, err := Open(mem, dir, Config{SegmentBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rep.Clean {
		t.Fatal("a discarded log reopened as cleanly shut down")
	}
	m.check(t, l2, 0, end)
}
