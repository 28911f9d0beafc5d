package partlog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// TestEndOffsetForEpochTable checks endOffsetFor against the rows of Kafka
// 3.8's LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log
// end; an older epoch (known or not) answers the largest cached epoch at or
// below it and the start of the next cached one; an epoch below every
// cached one answers itself and the first cached start; an epoch above the
// latest, UNDEFINED_EPOCH or an empty cache answer UNDEFINED (-1, -1).
func TestEndOffsetForEpochTable(t *testing.T) {
	gappy := []EpochEntry{{0, 0}, {2, 10}, {4, 20}} // epochs 1 and 3 never led
	trimmed := []EpochEntry{{2, 10}, {4, 20}}       // retention removed epoch 0
	const end = 30
	undef := [2]int64{int64(UndefinedEpoch), UndefinedOffset}
	for _, tc := range []struct {
		name  string
		cache []EpochEntry
		req   int32
		want  [2]int64
	}{
		{"latest", gappy, 4, [2]int64{4, end}},
		{"older known", gappy, 2, [2]int64{2, 20}},
		{"oldest known", gappy, 0, [2]int64{0, 10}},
		{"older unknown between", gappy, 3, [2]int64{2, 20}},
		{"older unknown below a known", gappy, 1, [2]int64{0, 10}},
		{"above the latest", gappy, 5, undef},
		{"undefined epoch", gappy, UndefinedEpoch, undef},
		{"below every cached epoch", trimmed, 1, [2]int64{1, 10}},
		{"far below every cached epoch", trimmed, 0, [2]int64{0, 10}},
		{"trimmed latest", trimmed, 4, [2]int64{4, end}},
		{"trimmed between", trimmed, 3, [2]int64{2, 20}},
		{"empty cache", nil, 0, undef},
		{"empty cache, undefined epoch", nil, UndefinedEpoch, undef},
		{"one epoch, itself", []EpochEntry{{3, 5}}, 3, [2]int64{3, end}},
		{"one epoch, below", []EpochEntry{{3, 5}}, 2, [2]int64{2, 5}},
		{"one epoch, above", []EpochEntry{{3, 5}}, 4, undef},
	} {
		e, off := endOffsetFor(tc.cache, tc.req, end)
		if got := [2]int64{int64(e), off}; got != tc.want {
			t.Errorf("%s: endOffsetFor(%v, %d) = %v, want %v", tc.name, tc.cache, tc.req, got, tc.want)
		}
	}
}

// TestEpochTrims checks the two truncations against Kafka's: from the end
// every entry starting at or past the offset goes (so one starting exactly
// there too); from the start the entries at or below it go and the last of
// them comes back starting there (so an entry starting exactly there stays).
func TestEpochTrims(t *testing.T) {
	es := []EpochEntry{{0, 0}, {2, 10}, {4, 20}}
	for _, tc := range []struct {
		end  int64
		want []EpochEntry
	}{
		{30, es}, {21, es}, {20, es[:2]}, {11, es[:2]}, {10, es[:1]}, {1, es[:1]}, {0, nil},
	} {
		got, changed := epochsBelow(es, tc.end)
		if !slices.Equal(got, tc.want) || changed != (len(got) != len(es)) {
			t.Errorf("epochsBelow(%d) = %v (changed %v), want %v", tc.end, got, changed, tc.want)
		}
	}
	for _, tc := range []struct {
		start int64
		want  []EpochEntry
	}{
		{0, es}, {5, []EpochEntry{{0, 5}, {2, 10}, {4, 20}}}, {10, es[1:]}, {15, []EpochEntry{{2, 15}, {4, 20}}},
		{20, es[2:]}, {25, []EpochEntry{{4, 25}}},
	} {
		got, changed := epochsFrom(es, tc.start)
		if !slices.Equal(got, tc.want) || changed != !slices.Equal(got, es) {
			t.Errorf("epochsFrom(%d) = %v (changed %v), want %v", tc.start, got, changed, tc.want)
		}
	}
	if got, _ := epochsFrom(nil, 7); got != nil {
		t.Errorf("epochsFrom of an empty cache = %v", got)
	}
}

// appendEpochs appends n single-batch appends of 2 records stamped epoch.
func appendEpochs(t testing.TB, l *Log, epoch int32, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(ctx, batch(int(epoch)*1000+i, 2, 60), epoch); err != nil {
			t.Fatalf("append epoch %d: %v", epoch, err)
		}
	}
}

// logEpochs derives the epoch cache from the batches the log serves, as the
// package doc defines it: each epoch starts at its first batch, the first
// one at the log start.
func logEpochs(t testing.TB, l *Log) []EpochEntry {
	t.Helper()
	var es []EpochEntry
	for _, b := range readAll(t, l, 1<<20) {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if e := h.PartitionLeaderEpoch; e >= 0 && (len(es) == 0 || e > es[len(es)-1].Epoch) {
			es = append(es, EpochEntry{e, h.BaseOffset})
		}
	}
	if len(es) > 0 && es[0].StartOffset < l.StartOffset() {
		es[0].StartOffset = l.StartOffset()
	}
	return es
}

// fileEpochs reads the checkpoint file of the log in fsys.
func fileEpochs(t testing.TB, fsys vfs.FS) []EpochEntry {
	t.Helper()
	b, err := vfs.ReadFile(fsys, dir+"/"+epochCheckpointFile)
	if err != nil {
		t.Fatalf("read %s: %v", epochCheckpointFile, err)
	}
	es, err := parseEpochs(b)
	if err != nil {
		t.Fatalf("%s: %v: %q", epochCheckpointFile, err, b)
	}
	return es
}

func checkEpochs(t testing.TB, l *Log, want []EpochEntry) {
	t.Helper()
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
}

// TestAssignEpoch: a new leader's epoch is added at the log end before any
// of its records, durably; the latest epoch is a no-op, an older one and a
// start outside [latest start, log end] are refused; appends of its epoch
// then add nothing, an append of an older epoch is refused with nothing
// written, and one of a newer epoch adds it at its first offset.
func TestAssignEpoch(t *testing.T) {
	mem := memFS(t)
	l, _ := mustOpen(t, mem, Config{})
	defer func() { _ = l.Close() }()
	if e, ok := l.LatestEpoch(); ok || e != UndefinedEpoch {
		t.Fatalf("empty log: latest epoch %d, %v", e, ok)
	}
	if err := l.AssignEpoch(0, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("assign past the end of an empty log: %v", err)
	}
	appendEpochs(t, l, 0, 3) // [0, 6) in epoch 0
	checkEpochs(t, l, []EpochEntry{{0, 0}})

	if err := l.AssignEpoch(3, 6); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, []EpochEntry{{0, 0}, {3, 6}})
	if got := fileEpochs(t, mem.CrashClone()); !slices.Equal(got, l.Epochs()) {
		t.Fatalf("after AssignEpoch a power cut finds %v", got)
	}
	if e, off := l.EndOffsetForEpoch(0); e != 0 || off != 6 {
		t.Fatalf("end of epoch 0: %d, %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(3); e != 3 || off != 6 {
		t.Fatalf("end of epoch 3 (no records yet): %d, %d", e, off)
	}
	// A second election before any record: the newer epoch replaces the
	// one that has none.
	if err := l.AssignEpoch(4, 6); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, []EpochEntry{{0, 0}, {4, 6}})

	for _, tc := range []struct {
		name         string
		epoch        int32
		start        int64
		want, wantIs error
	}{
		{"latest", 4, 6, nil, nil},
		{"latest elsewhere", 4, 0, nil, nil},
		{"older", 3, 6, ErrStaleEpoch, nil},
		{"negative", -1, 6, errors.New("any"), nil},
		{"past the end", 5, 7, ErrOffsetOutOfRange, nil},
		{"before the latest start", 5, 5, ErrOffsetOutOfRange, nil},
	} {
		err := l.AssignEpoch(tc.epoch, tc.start)
		if (tc.want == nil) != (err == nil) || tc.want != nil && tc.want.Error() != "any" && !errors.Is(err, tc.want) {
			t.Errorf("%s: AssignEpoch(%d, %d) = %v, want %v", tc.name, tc.epoch, tc.start, err, tc.want)
		}
		checkEpochs(t, l, []EpochEntry{{0, 0}, {4, 6}})
	}

	appendEpochs(t, l, 4, 2) // [6, 10)
	checkEpochs(t, l, []EpochEntry{{0, 0}, {4, 6}})
	if _, err := l.Append(ctx, batch(1, 2, 60), 3); !errors.Is(err, ErrStaleEpoch) || l.EndOffset() != 10 {
		t.Fatalf("append of an older epoch: %v, end %d", err, l.EndOffset())
	}
	appendEpochs(t, l, 6, 1) // [10, 12): an epoch nobody assigned starts at its first batch
	checkEpochs(t, l, []EpochEntry{{0, 0}, {4, 6}, {6, 10}})
	if got := fileEpochs(t, mem.CrashClone()); !slices.Equal(got, l.Epochs()) {
		t.Fatalf("after an append of a new epoch a power cut finds %v", got)
	}
	if e, off := l.EndOffsetForEpoch(5); e != 4 || off != 10 {
		t.Fatalf("end of the unknown epoch 5: %d, %d; want 4, 10", e, off)
	}
	checkEpochs(t, l, logEpochs(t, l))
}

// TestEpochsTruncateRetention: Truncate drops the epochs starting at or past
// the new end (an epoch whose first batch held the offset too, and an
// assigned epoch at the end even when no record goes); retention moves the
// first epoch's start to the new log start. Reopening, cleanly or after a
// power cut, finds the same cache.
func TestEpochsTruncateRetention(t *testing.T) {
	mem := memFS(t)
	cfg := Config{SegmentBytes: 1024, RetentionBytes: 1, RetentionAge: -1, FlushPolicy: flushpolicy.EveryBatch()}
	l, _ := mustOpen(t, mem, cfg)
	appendEpochs(t, l, 1, 6) // [0, 12)
	appendEpochs(t, l, 2, 6) // [12, 24)
	appendEpochs(t, l, 5, 6) // [24, 36)
	appendEpochs(t, l, 7, 2) // [36, 40)
	if len(l.Segments()) < 4 {
		t.Fatalf("want several segments: %s", segNames(l))
	}
	checkEpochs(t, l, []EpochEntry{{1, 0}, {2, 12}, {5, 24}, {7, 36}})

	if err := l.Truncate(37); err != nil { // inside [36, 38): epoch 7 loses its first batch, so all of it
		t.Fatal(err)
	}
	checkEpochs(t, l, []EpochEntry{{1, 0}, {2, 12}, {5, 24}})
	if err := l.AssignEpoch(8, 36); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(36); err != nil { // nothing to cut, but epoch 8 starts there
		t.Fatal(err)
	}
	checkEpochs(t, l, []EpochEntry{{1, 0}, {2, 12}, {5, 24}})
	deleted, err := l.ApplyRetention()
	if err != nil || len(deleted) == 0 {
		t.Fatalf("retention: %v, %v", deleted, err)
	}
	start := l.StartOffset()
	want := logEpochs(t, l)
	if want[0].StartOffset != start || !slices.Equal(l.Epochs(), want) {
		t.Fatalf("after retention to %d: epochs %v, the log's %v", start, l.Epochs(), want)
	}
	if e, off := l.EndOffsetForEpoch(0); e != 0 || off != start {
		t.Fatalf("epoch 0, below every cached one: %d, %d; want 0, %d", e, off, start)
	}
	crash := mem.CrashClone()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, fsys := range map[string]vfs.FS{"clean": mem, "crash": crash} {
		l2, rep := mustOpen(t, fsys, cfg)
		if rep.EpochsRebuilt != nil {
			t.Errorf("%s: reopen rebuilt the cache: %v", name, rep.EpochsRebuilt)
		}
		if got := l2.Epochs(); !slices.Equal(got, want) {
			t.Errorf("%s: reopened with epochs %v, want %v", name, got, want)
		}
		_ = l2.Close()
	}
}

// TestEpochCheckpointRebuilt: a log without a checkpoint (as every log weir
// wrote before it kept epochs: all epoch 0), with a garbled one, or with one
// that disagrees with the batches opens with the cache the batches give,
// says so in the Report, and writes the checkpoint again; one that only
// claims epochs past the log end (a cut the crash interrupted) is trimmed,
// not rebuilt.
func TestEpochCheckpointRebuilt(t *testing.T) {
	build := func(t *testing.T, epochs ...int32) (*vfs.MemFS, []EpochEntry) {
		mem := memFS(t)
		l, _ := mustOpen(t, mem, Config{SegmentBytes: 1024})
		for _, e := range epochs {
			appendEpochs(t, l, e, 4)
		}
		want := l.Epochs()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return mem, want
	}
	write := func(t *testing.T, fsys vfs.FS, b string) {
		if err := vfs.WriteFileSynced(fsys, dir+"/"+epochCheckpointFile, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(t *testing.T, fsys vfs.FS) {
		if err := fsys.Remove(dir + "/" + epochCheckpointFile); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		epochs  []int32
		damage  func(*testing.T, vfs.FS)
		rebuilt bool
	}{
		{"old log, no file", []int32{0, 0, 0}, remove, true},
		{"no file, several epochs", []int32{0, 3, 3, 9}, remove, true},
		{"garbled", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n2\n2 0\n4 x\n") }, true},
		{"wrong version", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "1\n2\n2 0\n4 8\n") }, true},
		{"count disagrees", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n3\n2 0\n4 8\n") }, true},
		{"empty file", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "") }, true},
		{"wrong start", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n2\n2 0\n4 6\n") }, true},
		{"wrong epoch", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n2\n2 0\n5 8\n") }, true},
		{"an epoch missing", []int32{2, 4, 6}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n2\n2 0\n4 8\n") }, true},
		{"none for epochs", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n0\n") }, true},
		{"past the end", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n4\n2 0\n4 8\n6 16\n7 900\n") }, false},
		{"another log's", []int32{2, 4}, func(t *testing.T, fs vfs.FS) { write(t, fs, "0\n1\n9 0\n") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, want := build(t, tc.epochs...)
			tc.damage(t, mem)
			l, rep := mustOpen(t, mem, Config{SegmentBytes: 1024})
			defer func() { _ = l.Close() }()
			if (rep.EpochsRebuilt != nil) != tc.rebuilt {
				t.Errorf("EpochsRebuilt = %v, want rebuilt %v", rep.EpochsRebuilt, tc.rebuilt)
			}
			checkEpochs(t, l, want)
			checkEpochs(t, l, logEpochs(t, l))
			if got := fileEpochs(t, mem.CrashClone()); !slices.Equal(got, want) {
				t.Errorf("checkpoint after open: %v, want %v", got, want)
			}
		})
	}
	t.Run("new log", func(t *testing.T) {
		mem := memFS(t)
		l, rep := mustOpen(t, mem, Config{})
		defer func() { _ = l.Close() }()
		if rep.EpochsRebuilt != nil || len(l.Epochs()) != 0 {
			t.Fatalf("new log: rebuilt %v, epochs %v", rep.EpochsRebuilt, l.Epochs())
		}
	})
}

// TestEpochsAfterFailedFsync: a recovery that cuts back to FlushedOffset
// (an fsync failed) drops the epochs the cut records started.
func TestEpochsAfterFailedFsync(t *testing.T) {
	clk := newClock()
	fs, inj := faultFS(memFS(t), faultPoints[3], faultModes[1])
	l, _ := mustOpen(t, fs, faultConfig(clk, flushpolicy.Never))
	defer func() { _ = l.Close() }()
	appendEpochs(t, l, 1, 3)
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	flushed := l.EndOffset()
	appendEpochs(t, l, 2, 3)
	checkEpochs(t, l, []EpochEntry{{1, 0}, {2, flushed}})
	inj.K = inj.Count()
	if err := l.Flush(l.EndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush with a failing fsync: %v", err)
	}
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != flushed {
		t.Fatalf("recovered to %d, want %d", l.EndOffset(), flushed)
	}
	checkEpochs(t, l, []EpochEntry{{1, 0}})
	if e, off := l.EndOffsetForEpoch(2); e != UndefinedEpoch || off != UndefinedOffset {
		t.Fatalf("the cut epoch: %d, %d", e, off)
	}
}

// epochWorkload appends in several epochs, assigns epochs, truncates
// (inside a batch, at an epoch's start, at the end) and applies retention,
// telling cut when a truncation begins (its offset) and ends (-1).
func epochWorkload(fs vfs.FS, onOpen func(*Log), cut func(int64)) error {
	cfg := Config{SegmentBytes: 1500, IndexIntervalBytes: 300, RetentionBytes: 4000, RetentionAge: -1,
		FlushPolicy: flushpolicy.EveryMessages(5)}
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	epoch := int32(0)
	truncate := func(off int64) error {
		cut(off)
		defer cut(-1)
		return l.Truncate(off)
	}
	for i := 0; i < 36; i++ {
		if i%6 == 0 {
			epoch += 2
			if err := l.AssignEpoch(epoch, l.EndOffset()); err != nil {
				return err
			}
		}
		if _, err := l.Append(ctx, batch(i, 1+i%3, 90), epoch); err != nil {
			return err
		}
		switch i {
		case 10:
			if err := truncate(l.EndOffset() - 2); err != nil {
				return err
			}
		case 19: // back to where this epoch started
			es := l.Epochs()
			if err := truncate(es[len(es)-1].StartOffset); err != nil {
				return err
			}
		case 25:
			if err := l.AssignEpoch(epoch+1, l.EndOffset()); err != nil {
				return err
			}
			if err := truncate(l.EndOffset()); err != nil {
				return err
			}
		case 30:
			if _, err := l.ApplyRetention(); err != nil {
				return err
			}
		}
	}
	return l.Close()
}

// TestEpochCrashLoop cuts the power before every file-system operation of
// epochWorkload: the log opens, its cache is what its batches give, and it
// holds every offset that was durable (less what a truncation under way was
// removing).
func TestEpochCrashLoop(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := epochWorkload(errorfs.Wrap(memFS(t), probe), func(*Log) {}, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	total := probe.Count()
	for _, torn := range []bool{false, true} {
		for k := 0; k < total; k++ {
			var log *Log
			cutAt, durable := int64(-1), int64(0)
			c, fs := newCrasher(memFS(t), k, torn, 5, func() {
				if log != nil {
					durable = log.FlushedOffset()
					if cutAt >= 0 {
						durable = min(durable, cutAt-2) // the batch holding the cut goes whole (<= 3 records)
					}
				}
			})
			if err := epochWorkload(fs, func(l *Log) { log = l }, func(off int64) { cutAt = off }); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("torn=%v/crash=%d", torn, k)
			l, rep, err := Open(c.clone, dir, Config{SegmentBytes: 1500, IndexIntervalBytes: 300, RetentionAge: -1})
			if err != nil {
				t.Fatalf("%s: reopen: %v", name, err)
			}
			t.Run(name, func(t *testing.T) {
				contiguous(t, l)
				if l.EndOffset() < durable {
					t.Fatalf("end %d < durable %d; %+v %s", l.EndOffset(), durable, rep, segNames(l))
				}
				checkEpochs(t, l, logEpochs(t, l))
				if l.EndOffset() == l.StartOffset() {
					return // an empty log may have no checkpoint
				}
				if got := fileEpochs(t, c.clone); !slices.Equal(got, l.Epochs()) {
					t.Fatalf("checkpoint %v after open, cache %v", got, l.Epochs())
				}
			})
			_ = l.Close()
		}
	}
}

// TestEpochErrorLoop fails every operation of epochWorkload in turn: the
// error comes back, and a reopen has a cache that matches its batches.
func TestEpochErrorLoop(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := epochWorkload(errorfs.Wrap(memFS(t), probe), func(*Log) {}, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	for k := range probe.Count() {
		mem := memFS(t)
		inj := &errorfs.FailAt{K: k}
		var failed *Log
		err := epochWorkload(errorfs.Wrap(mem, inj), func(l *Log) { failed = l }, func(int64) {})
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d: error without its cause: %v", k, err)
		}
		if err != nil && failed != nil {
			_ = failed.Close()
		}
		l, _, oerr := Open(mem, dir, Config{SegmentBytes: 1500, IndexIntervalBytes: 300, RetentionAge: -1})
		if oerr != nil {
			t.Fatalf("op %d (%v): reopen: %v", k, err, oerr)
		}
		contiguous(t, l)
		checkEpochs(t, l, logEpochs(t, l))
		_ = l.Close()
	}
}

// FuzzEpochCheckpoint: parseEpochs never panics, accepts only what the log
// could have written (increasing epochs and starts, the count right), and
// what it accepts encodes back to a file it reads the same.
func FuzzEpochCheckpoint(f *testing.F) {
	for _, s := range []string{"", "0\n0\n", "0\n1\n0 0\n", "0\n2\n0 0\n3 150\n", "0\n2\n3 150\n0 0\n",
		"0\n1\n2147483648 0\n", "0\n1\n-1 0\n", "0\n1\n1 2 3\n", "0\n2\n0 0\n3 150\ngarbage", strings.Repeat("0\n", 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseEpochs(b)
		if err != nil {
			return
		}
		for i, e := range es {
			if e.Epoch < 0 || e.StartOffset < 0 || i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset <= es[i-1].StartOffset) {
				t.Fatalf("accepted %v from %q", es, b)
			}
		}
		again, err := parseEpochs(encodeEpochs(es))
		if err != nil || !slices.Equal(again, es) {
			t.Fatalf("round trip of %v: %v, %v", es, again, err)
		}
	})
}

// TestFence: after Fence(e) an Append stamped below e is ErrStaleEpoch with
// nothing written (an append of a term the log's user no longer leads, or
// one stamped with another leader's epoch), one at e or above goes in; the
// floor is never lowered; replicated appends, which carry their leader's
// epochs, are not fenced.
func TestFence(t *testing.T) {
	mem := memFS(t)
	l, _ := mustOpen(t, mem, Config{})
	defer func() { _ = l.Close() }()
	appendEpochs(t, l, 2, 1) // [0, 2) in epoch 2
	l.Fence(4)
	l.Fence(3) // lower: ignored
	for _, e := range []int32{2, 3} {
		if _, err := l.Append(ctx, batch(9, 2, 60), e); !errors.Is(err, ErrStaleEpoch) || l.EndOffset() != 2 {
			t.Fatalf("append at epoch %d under a fence at 4: %v, end %d", e, err, l.EndOffset())
		}
	}
	// A follower's copy of epoch 3 (its leader's) goes in.
	src, _ := mustOpen(t, memFS(t), Config{})
	defer func() { _ = src.Close() }()
	appendEpochs(t, src, 2, 1)
	appendEpochs(t, src, 3, 1)
	bs := readAll(t, src, 1<<20)
	if _, err := l.AppendReplicated(ctx, bs[1]); err != nil {
		t.Fatalf("replicated batch of epoch 3 under a fence at 4: %v", err)
	}
	appendEpochs(t, l, 4, 1) // the fence's own epoch
	checkEpochs(t, l, []EpochEntry{{2, 0}, {3, 2}, {4, 4}})
}
