package segment

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// compacted returns batches as the log cleaner leaves them, from offset
// base on: a batch that kept records 0 and 2 of 4 (its deltas skip), a batch
// whose lastOffsetDelta reaches 10 offsets past its one record (those after
// it removed), a batch of no records over 5 offsets, and an ordinary batch.
// It returns the batches and their headers.
func compacted(t *testing.T, base int64) ([][]byte, []record.Header) {
	t.Helper()
	var out [][]byte
	var hs []record.Header
	add := func(b []byte, h record.Header) {
		h.BaseOffset = base
		record.PutHeader(b, h)
		h, _, err := record.Next(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, hs = append(out, b), append(hs, h)
		base = h.NextOffset()
	}
	keep := func(b []byte, idx ...int) ([]byte, record.Header) {
		h, _ := record.ParseHeader(b)
		nb := make([]byte, record.HeaderSize)
		i := 0
		if err := record.ForEach(h, b[record.HeaderSize:], func(_ *record.Record, raw []byte) error {
			if slices.Contains(idx, i) {
				nb = append(nb, raw...)
			}
			i++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		h.RecordCount = int32(len(idx))
		return nb, h
	}
	b, h := keep(testbatch.Make(1, 4, 50, 1000), 0, 2)
	add(b, h)
	b, h = keep(testbatch.Make(2, 1, 50, 1010), 0)
	h.LastOffsetDelta = 10
	add(b, h)
	add(make([]byte, record.HeaderSize), record.Header{LastOffsetDelta: 4, BaseTimestamp: 1020, MaxTimestamp: 1020,
		ProducerID: record.NoProducer, ProducerEpoch: record.NoProducer, BaseSequence: record.NoProducer})
	b = testbatch.Make(3, 2, 50, 1030)
	h, _ = record.ParseHeader(b)
	add(b, h)
	return out, hs
}

// Segments of compacted batches open in both modes without losing a byte,
// and a read at any offset, one whose record was removed included, returns
// the batch that covers it.
func TestCompactedBatchesOpenAndRead(t *testing.T) {
	for _, mode := range []Mode{Recover, Trust} {
		fs := newMem(t)
		s, err := Create(fs, dir, 500, Options{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		bs, hs := compacted(t, 500)
		if err := s.Append(bytes.Join(bs, nil), hs); err != nil {
			t.Fatal(err)
		}
		end := s.NextOffset()
		if end != 500+4+11+5+2 {
			t.Fatalf("end %d", end)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, rec, err := Open(fs, dir, 500, Options{IndexIntervalBytes: 64}, mode, end)
		if err != nil || rec.Truncated != 0 || s.NextOffset() != end {
			t.Fatalf("mode %d: open: %+v, %v, next %d", mode, rec, err, s.NextOffset())
		}
		for off := int64(500); off < end; off++ {
			sl, err := s.Read(off, 1, 1<<40)
			if err != nil {
				t.Fatalf("read %d: %v", off, err)
			}
			i := slices.IndexFunc(hs, func(h record.Header) bool { return h.BaseOffset <= off && off < h.NextOffset() })
			if got := readAll(t, sl); !bytes.Equal(got, bs[i]) {
				t.Fatalf("read %d: not the batch covering it (%d)", off, hs[i].BaseOffset)
			}
			sl.Release()
		}
		if off, err := s.OffsetForTimestamp(1020); err != nil || off != 515 {
			t.Fatalf("OffsetForTimestamp(1020) = %d, %v; want the empty batch at 515", off, err)
		}
		_ = s.Close()
	}
}

// A tagged segment lives entirely in tagged files: created, sealed, opened
// (rebuilding its indexes) and deleted, it never touches the untagged names,
// which may belong to the segment it is to replace.
func TestTaggedSegment(t *testing.T) {
	fs := newMem(t)
	plain, err := Create(fs, dir, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, plain, 3, 200)
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	before := files(t, fs)
	opts := Options{IndexIntervalBytes: 100, Tag: SwapTag}
	s, err := Create(fs, dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := fill(t, s, 5, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
		if _, err := fs.Stat(Name(dir, 0, suf) + SwapTag); err != nil {
			t.Fatalf("tagged %s: %v", suf, err)
		}
	}
	// The tagged indexes are damaged: a Trust open rebuilds them, in the
	// tagged files.
	if err := vfs.WriteFileSynced(fs, Name(dir, 0, IndexSuffix)+SwapTag, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	s, rec, err := Open(fs, dir, 0, opts, Trust, 15)
	if err != nil || !rec.IndexRebuilt || s.NextOffset() != 15 {
		t.Fatalf("open: %+v %v next %d", rec, err, s.NextOffset())
	}
	sl, err := s.Read(0, 1<<20, 1<<40)
	if err != nil || !bytes.Equal(readAll(t, sl), bytes.Join(want, nil)) {
		t.Fatalf("read tagged segment: %v", err)
	}
	sl.Release()
	var seen []int64
	if err := s.Headers(func(pos int64, h record.Header) bool { seen = append(seen, h.BaseOffset); return len(seen) < 4 }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int64{0, 3, 6, 9}) {
		t.Fatalf("Headers saw %v, want the first four batches", seen)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, fs); !slices.Equal(got, before) {
		t.Fatalf("files after deleting the tagged segment %v, want the untagged ones untouched %v", got, before)
	}
	if err := s.Headers(func(int64, record.Header) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Headers of a deleted segment: %v", err)
	}
}

func files(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		fi, err := fs.Stat(dir + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", n, fi.Size()))
	}
	return out
}
