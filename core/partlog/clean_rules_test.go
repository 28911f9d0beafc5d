package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// compressedLog appends zstd batches of 4 records and plain batches, where
// later records overwrite most keys, then rolls: everything but the last
// record is cleanable.
func compressedLog(t *testing.T) (*Log, keyModel, [][]byte) {
	t.Helper()
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	m := keyModel{}
	var zbatches [][]byte
	ts := clk.Now().UnixMilli()
	for i := 0; i < 30; i++ {
		recs := []kv{put(keyName(i%6), fmt.Sprint("z", i)), put(keyName(100+i), "once"), put(keyName(i%6+10), fmt.Sprint("z", i)), del(keyName(i%3 + 20))}
		b := keyed(t, zstdOpts(plain()), ts, recs...)
		res, err := l.Append(ctx, b, 1)
		if err != nil {
			t.Fatal(err)
		}
		stored := bytes.Clone(b)
		record.SetBaseOffset(stored, res.BaseOffset)
		record.SetPartitionLeaderEpoch(stored, 1)
		zbatches = append(zbatches, stored)
		m.apply(recs...)
		recs = []kv{put(keyName(i%6), fmt.Sprint("p", i)), put(keyName(i%3+20), "back")}
		appendAll(t, l, keyed(t, plain(), ts, recs...))
		m.apply(recs...)
	}
	roll(t, l, clk)
	return l, m, zbatches
}

// With codec functions, compressed batches are rewritten under their own
// codec, keeping only what survives; without them they are kept byte for
// byte (and the rest is still cleaned); with Decompress alone their records
// still supersede older ones, but they are kept whole.
func TestCleanCompressed(t *testing.T) {
	t.Run("codecs", func(t *testing.T) {
		l, m, zs := compressedLog(t)
		defer l.Close()
		res := mustClean(t, l, withCodecs(CleanOptions{UpTo: NoLimit}))
		v := readView(t, l)
		m.check(t, v)
		rewritten := 0
		for _, h := range v.headers {
			if h.Codec() == record.CodecZstd && h.RecordCount > 0 && h.RecordCount < 4 {
				rewritten++
			}
			if h.Codec() != record.CodecZstd && h.RecordCount > 2 {
				t.Fatalf("batch at %d lost its codec: %+v", h.BaseOffset, h)
			}
		}
		if rewritten == 0 || res.RecordsRemoved == 0 {
			t.Fatalf("no compressed batch rewritten: %+v", res)
		}
		_ = zs
	})
	t.Run("no-codecs", func(t *testing.T) {
		l, m, zs := compressedLog(t)
		defer l.Close()
		res := mustClean(t, l, CleanOptions{UpTo: NoLimit})
		if res.RecordsRemoved == 0 {
			t.Fatalf("the plain batches were not cleaned: %+v", res)
		}
		var got [][]byte
		for _, b := range rawBatches(t, l) {
			if h, _ := record.ParseHeader(b); h.Codec() != record.CodecNone {
				got = append(got, b)
			}
		}
		if len(got) != len(zs) {
			t.Fatalf("%d compressed batches left, want all %d", len(got), len(zs))
		}
		for i := range got {
			if !bytes.Equal(got[i], zs[i]) {
				t.Fatalf("compressed batch %d changed", i)
			}
		}
		m.check(t, readView(t, l))
	})
	t.Run("decompress-only", func(t *testing.T) {
		l, m, zs := compressedLog(t)
		defer l.Close()
		o := withCodecs(CleanOptions{UpTo: NoLimit})
		o.Compress = nil
		mustClean(t, l, o)
		v := readView(t, l)
		m.check(t, v)
		n := 0
		for _, b := range rawBatches(t, l) {
			if h, _ := record.ParseHeader(b); h.Codec() != record.CodecNone {
				if !bytes.Equal(b, zs[n]) {
					t.Fatalf("compressed batch %d changed without Compress", n)
				}
				n++
			}
		}
		// key-010.. are written only by compressed batches; a plain
		// record is superseded by a compressed one when it comes later:
		// key-000's plain value at batch i is dropped when batch i+6 is
		// compressed and writes it again.
		for _, s := range v.records {
			if string(s.key) == keyName(0) && string(s.value) == "p0" {
				t.Fatal("a plain record superseded by a compressed one survived")
			}
		}
	})
}

// rawBatches returns every batch of the log as stored.
func rawBatches(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		sl, err := l.Read(off, 1<<20, NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bytes.Clone(b[:n]))
			b, off = b[n:], h.NextOffset()
		}
	}
	return out
}

// A tombstone stays DeleteRetention after the pass that first cleaned it,
// and goes at the first pass after that; one first cleaned later counts
// from then. A batch kept whole without its records being known (here
// transactional) holds up the removal of the tombstones after it.
func TestCleanTombstoneRetention(t *testing.T) {
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	defer l.Close()
	o := CleanOptions{UpTo: NoLimit, DeleteRetention: time.Hour}
	ts := clk.Now().UnixMilli()
	appendAll(t, l, keyed(t, plain(), ts, put("a", "1"), put("b", "1")), keyed(t, plain(), ts, del("a")))
	roll(t, l, clk)
	tombstones := func() []string {
		var ks []string
		for _, s := range readView(t, l).records {
			if s.tombstone() {
				ks = append(ks, string(s.key))
			}
		}
		return ks
	}
	res := mustClean(t, l, o)
	if res.RecordsRemoved != 1 || res.TombstonesRemoved != 0 || !slices.Equal(tombstones(), []string{"a"}) {
		t.Fatalf("first pass: %+v, tombstones %v", res, tombstones())
	}
	clk.Advance(30 * time.Minute)
	appendAll(t, l, keyed(t, plain(), ts, del("b")))
	roll(t, l, clk) // the pass at T+30m is b's tombstone's first
	if res := mustClean(t, l, o); res.TombstonesRemoved != 0 || !slices.Equal(tombstones(), []string{"a", "b"}) {
		t.Fatalf("pass at 30 min: %+v, tombstones %v", res, tombstones())
	}
	clk.Advance(29 * time.Minute)
	if res := mustClean(t, l, o); res.TombstonesRemoved != 0 {
		t.Fatalf("pass at 59 min removed a tombstone: %+v", res)
	}
	clk.Advance(time.Minute + time.Millisecond)
	if res := mustClean(t, l, o); res.TombstonesRemoved != 1 || !slices.Equal(tombstones(), []string{"b"}) {
		t.Fatalf("pass past an hour: %+v, tombstones %v, want only b's left", res, tombstones())
	}
	clk.Advance(30 * time.Minute)
	if res := mustClean(t, l, o); res.TombstonesRemoved != 1 || len(tombstones()) != 0 {
		t.Fatalf("pass an hour after b's first: %+v, tombstones %v", res, tombstones())
	}
	if v := readView(t, l); len(v.latest) != 0 {
		t.Fatalf("keys left: %v", v.latest)
	}

	// c's first value is in a transactional batch, which the cleaner keeps
	// whole: removing c's tombstone would bring that value back.
	txn := plain()
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Transactional = 3, 0, 0, true
	appendAll(t, l, keyed(t, txn, ts, put("c", "1")), keyed(t, plain(), ts, del("c")))
	roll(t, l, clk)
	mustClean(t, l, o)
	clk.Advance(2 * time.Hour)
	mustClean(t, l, o)
	if v := readView(t, l); !v.latest["c"].tombstone() {
		t.Fatalf("c's tombstone went, and c is back: %+v", v.latest["c"])
	}
}

// A key map too small for all the dirty keys cleans up to the segment where
// it filled, and the next passes go on from there; one too small for the
// first dirty segment refuses, changing nothing.
func TestCleanMapBound(t *testing.T) {
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	defer l.Close()
	m := keyModel{}
	for i := 0; i < 400; i++ {
		recs := []kv{put(keyName(i), "1"), put(keyName(i/2), fmt.Sprint(i))}
		appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), recs...))
		m.apply(recs...)
	}
	roll(t, l, clk)
	segs := l.Segments()
	if len(segs) < 6 {
		t.Fatalf("only %d segments", len(segs))
	}
	perKey := int64(len(keyName(0)) + keyMapOverhead)
	before := rawBatches(t, l)
	if res, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit, MaxMapBytes: 3 * perKey}); !errors.Is(err, ErrCleanMapFull) || res.SegmentsWritten != 0 {
		t.Fatalf("tiny map: %+v, %v", res, err)
	}
	if !slices.EqualFunc(rawBatches(t, l), before, bytes.Equal) {
		t.Fatal("a refused pass changed the log")
	}
	o := CleanOptions{UpTo: NoLimit, MaxMapBytes: 120 * perKey}
	res := mustClean(t, l, o)
	if !res.MapFull || res.CleanerPoint >= segs[len(segs)-2].Next || !slices.ContainsFunc(l.Segments(), func(s SegmentInfo) bool { return s.Next == res.CleanerPoint }) {
		t.Fatalf("first pass: %+v, segments %s", res, segNames(l))
	}
	m.check(t, readView(t, l))
	for pass := 0; res.MapFull; pass++ {
		if pass > 10 {
			t.Fatalf("no end to the passes: %+v", res)
		}
		prev := res.CleanerPoint
		res = mustClean(t, l, o)
		if res.CleanerPoint <= prev {
			t.Fatalf("pass %d did not move on: %+v", pass, res)
		}
		m.check(t, readView(t, l))
	}
	if d, _ := l.CleanableRatio(NoLimit); d != 0 {
		t.Fatalf("%d dirty bytes left", d)
	}
}

// Damaged input is refused with an error that says where, and the pass
// changes nothing: a batch whose CRC fails (bit rot in a sealed segment),
// and a batch whose CRC is right but whose records do not parse.
func TestCleanRefusesCorruptInput(t *testing.T) {
	for _, tc := range []string{"bad-crc", "bad-records"} {
		t.Run(tc, func(t *testing.T) {
			clk := newClock()
			mem := memFS(t)
			l, _ := mustOpen(t, mem, cleanConfig(clk))
			defer l.Close()
			for i := 0; i < 40; i++ {
				appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), put(keyName(i%5), fmt.Sprint(i))))
			}
			if tc == "bad-records" {
				b := keyed(t, plain(), clk.Now().UnixMilli(), put("x", "1"), put("y", "2"))
				b[record.HeaderSize+3] ^= 0x7f // inside the first record
				h, _ := record.ParseHeader(b)
				record.PutHeader(b, h)
				appendAll(t, l, b)
			}
			roll(t, l, clk)
			name := segment.Name(dir, 0, segment.LogSuffix)
			if tc == "bad-crc" {
				data, err := vfs.ReadFile(mem, name)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 1
				if err := vfs.WriteFileSynced(mem, name, data); err != nil {
					t.Fatal(err)
				}
			}
			files := func() map[string]string {
				out := map[string]string{}
				names, _ := mem.List(dir)
				for _, n := range names {
					b, _ := vfs.ReadFile(mem, dir+"/"+n)
					out[n] = string(b)
				}
				return out
			}
			was := files()
			res, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit})
			if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), "segment 0") {
				t.Fatalf("clean: %+v, %v; want ErrCorrupt naming the segment", res, err)
			}
			if now := files(); fmt.Sprint(now) != fmt.Sprint(was) {
				t.Fatalf("the refused pass changed files:\nwas %v\nnow %v", keys(was), keys(now))
			}
			if l.Err() != nil {
				t.Fatalf("the log failed: %v", l.Err())
			}
			appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), put("after", "1")))
		})
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s(%d)", k, len(v)))
	}
	slices.Sort(ks)
	return ks
}

// The cleaner point survives a reopen; a damaged file is logged and counts
// as a log never cleaned (and is replaced); a truncation below the point
// moves it back, in the file too.
func TestCleanerPointFile(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	var logs bytes.Buffer
	cfg := cleanConfig(clk)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, _ := mustOpen(t, mem, cfg)
	for i := 0; i < 100; i++ {
		appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), put(keyName(i%7), fmt.Sprint(i))))
	}
	roll(t, l, clk)
	res := mustClean(t, l, CleanOptions{UpTo: NoLimit})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, mem, cfg)
	if d, total := l.CleanableRatio(NoLimit); d != 0 || total == 0 || l.cleaned.Load().point() != res.CleanerPoint {
		t.Fatalf("after reopen: dirty %d of %d, point %d, want 0 dirty and %d", d, total, l.cleaned.Load().point(), res.CleanerPoint)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	if err := vfs.WriteFileSynced(mem, dir+"/"+cleanerPointFile, []byte("v1 1 999 5 deadbeef\n")); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, mem, cfg)
	if d, total := l.CleanableRatio(NoLimit); d != total || total == 0 {
		t.Fatalf("damaged point: dirty %d of %d, want all", d, total)
	}
	if !strings.Contains(logs.String(), "cleaner point damaged") || !strings.Contains(logs.String(), cleanerPointFile) {
		t.Fatalf("no log line naming the file: %s", logs.String())
	}
	if b, _ := vfs.ReadFile(mem, dir+"/"+cleanerPointFile); !bytes.Equal(b, (&cleanHistory{}).encode()) {
		t.Fatalf("damaged file not replaced: %q", b)
	}
	res = mustClean(t, l, CleanOptions{UpTo: NoLimit})
	cut := res.CleanerPoint - 10
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	end := l.EndOffset()
	if p := l.cleaned.Load().point(); p > end || end > cut {
		t.Fatalf("point %d after truncating to %d (end %d)", p, cut, end)
	}
	h, damaged, err := l.readCleanHistory()
	if err != nil || damaged != nil || h.point() > end {
		t.Fatalf("file after truncation: %+v %v %v", h, damaged, err)
	}
	// What comes after the cut is dirty.
	appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), put(keyName(1), "new")))
	roll(t, l, clk)
	if d, _ := l.CleanableRatio(NoLimit); d == 0 {
		t.Fatal("records appended after the truncation count as clean")
	}
	_ = l.Close()
}

// A pass stops cleanly when its context ends or Close comes: its temporary
// files go, the log is as it was, and Close returns once the pass is gone.
func TestCleanCancelAndClose(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			clk := newClock()
			mem := memFS(t)
			var (
				mu      sync.Mutex
				l       *Log
				trigger func()
			)
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
				mu.Lock()
				f := trigger
				if op == errorfs.OpWrite && strings.HasSuffix(path, segment.CleanedTag) && f != nil {
					trigger = nil
				} else {
					f = nil
				}
				mu.Unlock()
				if f != nil {
					f()
				}
				return nil
			}))
			l, _ = mustOpen(t, fs, cleanConfig(clk))
			m := keyModel{}
			for i := 0; i < 200; i++ {
				recs := []kv{put(keyName(i%9), fmt.Sprint(i))}
				appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), recs...))
				m.apply(recs...)
			}
			roll(t, l, clk)
			before := rawBatches(t, l)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			closed := make(chan error, 1)
			mu.Lock()
			trigger = cancel
			if how == "close" {
				trigger = func() {
					go func() { closed <- l.Close() }()
					for !l.stopClean.Load() { // Close's first step; then it waits for the pass
						runtime.Gosched()
					}
				}
			}
			mu.Unlock()
			res, err := l.Clean(cctx, CleanOptions{UpTo: NoLimit})
			want := context.Canceled
			if how == "close" {
				want = ErrClosed
			}
			if !errors.Is(err, want) || res.SegmentsWritten != 0 {
				t.Fatalf("clean: %+v, %v; want %v", res, err, want)
			}
			if left := cleanerFiles(t, mem); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
			if how == "close" {
				if err := <-closed; err != nil {
					t.Fatalf("close: %v", err)
				}
				if _, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit}); !errors.Is(err, ErrClosed) {
					t.Fatalf("clean after close: %v", err)
				}
				l, _ = mustOpen(t, mem, cleanConfig(clk))
			}
			defer l.Close()
			if !slices.EqualFunc(rawBatches(t, l), before, bytes.Equal) {
				t.Fatal("the stopped pass changed the log")
			}
			m.check(t, readView(t, l))
		})
	}
}

// A Truncate into a segment the pass has read, and appends that refill the
// cut offsets before the log rolls again: the swap must see the cut and
// refuse, or the truncated records would come back and the new ones go.
// (Before Truncate started a new file after a cut, the refill went into the
// cut segment itself, restoring its shape with other records; now it goes
// to a new segment, and the check must hold all the same.)
func TestCleanRefusesSwapAfterCut(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	var (
		mu   sync.Mutex
		hook func()
	)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		f := hook
		if op == errorfs.OpWrite && strings.HasSuffix(path, segment.LogSuffix+segment.CleanedTag) {
			hook = nil
		} else {
			f = nil
		}
		mu.Unlock()
		if f != nil {
			f()
		}
		return nil
	}))
	l, _ := mustOpen(t, fs, cleanConfig(clk))
	defer l.Close()
	m := &offsetModel{recs: map[int64]kv{}}
	add := func(recs ...kv) {
		res, err := l.Append(ctx, keyed(t, plain(), clk.Now().UnixMilli(), recs...), 1)
		if err != nil {
			t.Fatal(err)
		}
		m.add(res.BaseOffset, recs)
	}
	for i := 0; i < 30; i++ {
		add(put(keyName(i%4), fmt.Sprint("old", i)))
	}
	clk.Advance(l.cfg.SegmentAge)
	add(unkeyed("next"))
	end := l.Segments()[0].Next
	mu.Lock()
	hook = func() {
		if err := l.Truncate(end - 3); err != nil {
			t.Error(err)
			return
		}
		for i := 0; i < 3; i++ {
			add(put(keyName(i), "new"))
		}
		clk.Advance(l.cfg.SegmentAge)
		add(unkeyed("rolled again"))
		if segs := l.Segments(); len(segs) != 3 || segs[0].Next != end-3 || segs[1].Next != end {
			t.Errorf("the refill did not go to a new segment after the cut: %s", segNames(l))
		}
	}
	mu.Unlock()
	res, err := l.Clean(ctx, CleanOptions{UpTo: NoLimit})
	if !errors.Is(err, ErrLogChanged) || res.SegmentsWritten != 0 {
		t.Fatalf("clean across a cut: %+v, %v; want ErrLogChanged", res, err)
	}
	m.upTo(l.EndOffset()).check(t, readView(t, l))
	mustClean(t, l, CleanOptions{UpTo: NoLimit})
	v := readView(t, l)
	m.upTo(l.EndOffset()).check(t, v)
	if got := string(v.latest[keyName(0)].value); got != "new" {
		t.Fatalf("key 0 is %q, want the value appended after the cut", got)
	}
}

// The cleaner-point parser takes any bytes without panicking; what it
// accepts has ordered marks and encodes back to the same line.
func FuzzCleanHistory(f *testing.F) {
	ok := (&cleanHistory{marks: []cleanMark{{10, 5}, {20, 5}, {35, 9}}}).encode()
	f.Add([]byte{})
	f.Add((&cleanHistory{}).encode())
	f.Add(ok)
	f.Add(append(bytes.Clone(ok), "garbage"...))
	f.Add([]byte("v1 1 999 5 deadbeef\n"))
	f.Add([]byte("v1 2 20 5 10 5 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseCleanHistory(b)
		if err != nil {
			return
		}
		for i, m := range h.marks {
			if m.end <= 0 || i > 0 && (m.end <= h.marks[i-1].end || m.at < h.marks[i-1].at) {
				t.Fatalf("accepted marks out of order: %+v", h.marks)
			}
		}
		again, err := parseCleanHistory(h.encode())
		if err != nil || !slices.Equal(again.marks, h.marks) {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, h.marks)
		}
	})
}

// Marks stay bounded, ordered and conservative: adding one never makes an
// offset count as first cleaned earlier than it did, and clamping never
// leaves the point past the cut.
func TestCleanHistoryMarks(t *testing.T) {
	h := &cleanHistory{}
	for i := int64(1); i <= 500; i++ {
		prev := h
		h = h.add(i*10, i*7, 0)
		if len(h.marks) > maxCleanMarks || h.point() != i*10 {
			t.Fatalf("after %d: %d marks, point %d", i, len(h.marks), h.point())
		}
		for off := int64(0); off < prev.point(); off += 3 {
			was, _ := prev.firstCleaned(off)
			now, ok := h.firstCleaned(off)
			if !ok || now < was {
				t.Fatalf("offset %d first cleaned at %d, now at %d", off, was, now)
			}
		}
	}
	if _, ok := h.firstCleaned(h.point()); ok {
		t.Fatal("the cleaner point itself counts as cleaned")
	}
	for _, cut := range []int64{4999, 2500, 10, 0} {
		c, changed := h.clampTo(cut)
		if !changed || c.point() > cut || (cut > 0 && c.point() != cut) {
			t.Fatalf("clamp to %d: point %d, changed %v", cut, c.point(), changed)
		}
		was, _ := h.firstCleaned(cut - 1)
		if now, _ := c.firstCleaned(cut - 1); cut > 0 && now != was {
			t.Fatalf("clamp to %d changed when %d was first cleaned: %d, was %d", cut, cut-1, now, was)
		}
	}
	if r := h.add(h.point()+5, 1, 4000); r.marks[0].end <= 4000 {
		t.Fatalf("marks below the log start kept: %+v", r.marks[0])
	}
}
