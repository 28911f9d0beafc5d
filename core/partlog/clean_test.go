package partlog

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/record"
)

// Random keyed appends (overwrites, tombstones, unkeyed records, batches of
// several records), a cleaning pass after each round: the log read back
// always says what the model says of every key, keeps every offset in
// place, and ends up much smaller than what was written.
func TestCleanDedupeAgainstModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := newClock()
			mem := memFS(t)
			l, _ := mustOpen(t, mem, cleanConfig(clk))
			m := keyModel{}
			var written int64
			var unkeyedOffs []int64
			opts := CleanOptions{UpTo: NoLimit, DeleteRetention: time.Hour}
			var prev CleanResult
			for round := 0; round < 30; round++ {
				for i := 0; i < 40; i++ {
					var recs []kv
					for j := 0; j <= rng.IntN(3); j++ {
						k := keyName(rng.IntN(50))
						switch p := rng.IntN(20); {
						case p == 0:
							recs = append(recs, unkeyed(fmt.Sprintf("u-%d-%d", round, i)))
						case p < 4:
							recs = append(recs, del(k))
						default:
							recs = append(recs, put(k, fmt.Sprintf("v-%d-%d-%d", round, i, j)))
						}
					}
					b := keyed(t, plain(), clk.Now().UnixMilli(), recs...)
					res, err := l.Append(ctx, b, int32(round/10))
					if err != nil {
						t.Fatal(err)
					}
					for j, r := range recs {
						if r.key == nil {
							unkeyedOffs = append(unkeyedOffs, res.BaseOffset+int64(j))
						}
					}
					written += int64(len(b))
					m.apply(recs...)
				}
				clk.Advance(time.Duration(rng.IntN(40)) * time.Minute)
				res := mustClean(t, l, opts)
				if res.CleanerPoint < prev.CleanerPoint || res.BytesAfter > res.BytesBefore {
					t.Fatalf("round %d: %+v after %+v", round, res, prev)
				}
				prev = res
				withinSegmentBytes(t, l)
				v := readView(t, l)
				m.check(t, v)
				for _, off := range unkeyedOffs {
					if _, ok := slices.BinarySearchFunc(v.records, off, func(s seen, off int64) int { return int(s.off - off) }); !ok {
						t.Fatalf("round %d: the unkeyed record at %d is gone", round, off)
					}
				}
			}
			if size := l.Size(); size*3 > written {
				t.Fatalf("log is %d bytes after cleaning, %d were written: not much smaller", size, written)
			}
			// Long after: tombstones cleaned before the last pass go.
			clk.Advance(2 * time.Hour)
			before := mustClean(t, l, opts).CleanerPoint
			clk.Advance(2 * time.Hour)
			res := mustClean(t, l, opts)
			v := readView(t, l)
			m.check(t, v)
			for _, s := range v.records {
				if s.tombstone() && s.off < before {
					t.Fatalf("tombstone at %d survived (cleaner point %d two hours before, %+v)", s.off, before, res)
				}
			}
			// A reopen sees the same.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, _ = mustOpen(t, mem, cleanConfig(clk))
			defer l.Close()
			m.check(t, readView(t, l))
			if again := mustClean(t, l, opts); again.SegmentsWritten != 0 || again.RecordsRemoved != 0 {
				t.Fatalf("a pass over a clean log changed it: %+v", again)
			}
		})
	}
}

// withinSegmentBytes fails if a segment is larger than SegmentBytes (the appends of
// these tests never make one).
func withinSegmentBytes(t testing.TB, l *Log) {
	t.Helper()
	for _, s := range l.Segments() {
		if s.Size > l.cfg.SegmentBytes {
			t.Fatalf("segment %d is %d bytes, more than SegmentBytes %d", s.Base, s.Size, l.cfg.SegmentBytes)
		}
	}
}

// Every record that stays keeps its offset, every offset the leader epoch it
// was written in, and a read at any offset, one whose record was removed
// included, is served the batches from the one covering it, whose first
// record at or past it is the next record kept.
func TestCleanKeepsOffsets(t *testing.T) {
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	defer l.Close()
	idem := int32(0)
	for i := 0; i < 300; i++ {
		o := plain()
		if i%7 == 3 {
			o, idem = idempotent(9, idem), idem+2
		}
		b := keyed(t, o, clk.Now().UnixMilli(), put(keyName(i%20), fmt.Sprint(i)), put(keyName((i*7)%31), fmt.Sprint(-i)))
		if _, err := l.Append(ctx, b, int32(i/40)); err != nil { // a new leader epoch every 40 batches
			t.Fatal(err)
		}
	}
	before := readView(t, l)
	epochs := epochsByOffset(before)
	res := mustClean(t, l, CleanOptions{UpTo: NoLimit})
	after := readView(t, l)
	if res.RecordsRemoved == 0 || len(after.records) >= len(before.records) {
		t.Fatalf("nothing removed: %+v", res)
	}
	byOff := map[int64]seen{}
	for _, s := range before.records {
		byOff[s.off] = s
	}
	for _, s := range after.records {
		if b, ok := byOff[s.off]; !ok || !bytes.Equal(b.key, s.key) || !bytes.Equal(b.value, s.value) {
			t.Fatalf("record at %d is %q=%q, was %q=%q", s.off, s.key, s.value, b.key, b.value)
		}
	}
	if got := epochsByOffset(after); !maps.Equal(got, epochs) {
		for off, e := range epochs {
			if got[off] != e {
				t.Fatalf("offset %d is in a batch of leader epoch %d, was %d", off, got[off], e)
			}
		}
	}
	for off := l.StartOffset(); off <= l.EndOffset(); off++ {
		want := int64(-1)
		if i, _ := slices.BinarySearchFunc(after.records, off, func(s seen, off int64) int { return int(s.off - off) }); i < len(after.records) {
			want = after.records[i].off
		}
		if got := firstRecordFrom(t, l, off); got != want {
			t.Fatalf("a consumer reading from %d first gets the record at %d, want %d", off, got, want)
		}
	}
}

// epochsByOffset maps every offset of the log to the leader epoch of the
// batch covering it.
func epochsByOffset(v view) map[int64]int32 {
	m := map[int64]int32{}
	for _, h := range v.headers {
		for off := h.BaseOffset; off < h.NextOffset(); off++ {
			m[off] = h.PartitionLeaderEpoch
		}
	}
	return m
}

// firstRecordFrom reads from off as a consumer does (each read from the end
// of the last) and returns the offset of the first record at or past off, -1
// if there is none up to the log end. The first read must be served the
// batch covering off.
func firstRecordFrom(t testing.TB, l *Log, off int64) int64 {
	t.Helper()
	for next := off; next < l.EndOffset(); {
		sl, err := l.Read(next, 1<<20, NoLimit)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		if next == off && (sl.FirstOffset > off || sl.NextOffset <= off) {
			t.Fatalf("read %d served [%d, %d)", off, sl.FirstOffset, sl.NextOffset)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := record.Records(b[:n], decompress)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if o := h.BaseOffset + int64(r.OffsetDelta); o >= off {
					return o
				}
			}
			b = b[n:]
		}
		next = sl.NextOffset
	}
	return -1
}

// Idempotent batches keep their exact offsets, producer id, epoch and
// sequence, whatever they lose; a gap before one is covered by a batch of no
// records (it cannot be lowered); a producer's last batch in a segment
// stays, empty, when all its records went; a plain batch is lowered over the
// gap before it.
func TestCleanIdempotentBatchesKeepBounds(t *testing.T) {
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	defer l.Close()
	ts := clk.Now().UnixMilli()
	appendAll(t, l,
		keyed(t, idempotent(5, 0), ts, put("a", "1"), put("x", "1"), put("c", "1")), // [0,3): a and c go
		keyed(t, plain(), ts, put("a", "2")),                                        // [3,4): goes
		keyed(t, idempotent(5, 3), ts, put("a", "3"), put("d", "1")),                // [4,6): goes, not producer 5's last
		keyed(t, idempotent(6, 0), ts, put("e", "1")),                               // [6,7): emptied, producer 6's last
		keyed(t, idempotent(5, 5), ts, put("f", "1"), put("a", "4")),                // [7,9): kept
		keyed(t, plain(), ts, put("b", "2"), put("c", "2"), put("d", "2"), put("e", "2")),
		keyed(t, plain(), ts, put("g", "1")), // [13,14): goes, covered by widening the batch before
		keyed(t, plain(), ts, put("g", "2")),
	)
	roll(t, l, clk)
	res := mustClean(t, l, CleanOptions{UpTo: NoLimit})
	v := readView(t, l)
	type hdr struct {
		base, next int64
		pid        int64
		epoch      int16
		seq, recs  int32
	}
	var got []hdr
	for _, h := range v.headers[:len(v.headers)-1] {
		got = append(got, hdr{h.BaseOffset, h.NextOffset(), h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.RecordCount})
	}
	want := []hdr{
		{0, 3, 5, 0, 0, 1},      // exact bounds, one record left (x, offset delta 1)
		{3, 6, -1, -1, -1, 0},   // a filler over [3,6): the batch after it is idempotent
		{6, 7, 6, 0, 0, 0},      // producer 6's last batch, empty
		{7, 9, 5, 0, 5, 2},      // untouched
		{9, 13, -1, -1, -1, 4},  // untouched
		{13, 15, -1, -1, -1, 1}, // g=2, lowered over g=1's batch
	}
	if !slices.Equal(got, want) {
		t.Fatalf("batches after cleaning:\n got %+v\nwant %+v\n(%+v)", got, want, res)
	}
	if x := v.records[0]; string(x.key) != "x" || x.off != 1 {
		t.Fatalf("first record %q at %d, want x at 1", x.key, x.off)
	}
	if g := v.records[len(v.records)-2]; string(g.key) != "g" || g.off != 14 {
		t.Fatalf("g's record %q at %d, want it at 14", g.key, g.off)
	}
	keyModel{"a": []byte("4"), "x": []byte("1"), "b": []byte("2"), "c": []byte("2"), "d": []byte("2"),
		"e": []byte("2"), "f": []byte("1"), "g": []byte("2")}.check(t, v)
}

// roll makes the active segment roll, so that everything before it may be
// cleaned: the clock passes SegmentAge and an unkeyed record is appended.
func roll(t testing.TB, l *Log, clk *fakeClock) {
	t.Helper()
	clk.Advance(l.cfg.SegmentAge)
	appendAll(t, l, keyed(t, plain(), clk.Now().UnixMilli(), unkeyed("roll")))
	if n := len(l.Segments()); l.Segments()[n-1].Next-l.Segments()[n-1].Base != 1 {
		t.Fatalf("no roll: %s", segNames(l))
	}
}

// Control batches stay as they are, and so do transactional batches: the
// cleaner cannot tell committed from aborted, so a transactional record
// neither supersedes an older value nor is superseded.
func TestCleanKeepsControlAndTransactional(t *testing.T) {
	clk := newClock()
	l, _ := mustOpen(t, memFS(t), cleanConfig(clk))
	defer l.Close()
	ts := clk.Now().UnixMilli()
	txn := plain()
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Transactional = 4, 0, 0, true
	ctl := txn
	ctl.Control, ctl.BaseSequence = true, -1
	marker := keyed(t, ctl, ts, kv{key: []byte{0, 0, 0, 1}, value: []byte{0, 0, 0, 0, 0, 0}}) // a COMMIT marker
	appendAll(t, l,
		keyed(t, plain(), ts, put("c", "plain-1")),
		keyed(t, txn, ts, put("c", "txn-2"), put("d", "txn-1")),
		marker,
		keyed(t, plain(), ts, put("d", "plain-2")),
		keyed(t, plain(), ts, put("e", "1")), keyed(t, plain(), ts, put("e", "2")),
	)
	roll(t, l, clk)
	before := rawBatches(t, l)
	res := mustClean(t, l, CleanOptions{UpTo: NoLimit})
	after := rawBatches(t, l)
	if res.RecordsRemoved != 1 || len(after) != len(before)-1 {
		t.Fatalf("want only e's first value gone: %+v, %d batches of %d", res, len(after), len(before))
	}
	for i := 0; i < 4; i++ {
		if !bytes.Equal(after[i], before[i]) {
			t.Fatalf("batch %d changed", i)
		}
	}
	if v := readView(t, l); string(v.records[0].value) != "plain-1" {
		t.Fatalf("the plain value before a transactional one went: %q", v.records[0].value)
	}
}
