package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// The shapes the log cleaner writes (see PutHeader): a batch that kept some
// of its records, whose offset deltas then skip; a batch whose
// lastOffsetDelta reaches past its last record kept (here further than the
// records it had: any reach must decode); a batch lowered over offsets
// before it (TestAppendWithOffsetDelta); and a batch with no records that
// only covers offsets. Every decoder must take them.

// keepRecords rewrites batch b keeping the records whose index keep selects,
// as the cleaner does: raw record bytes copied, header fields kept.
func keepRecords(t *testing.T, b []byte, keep func(i int) bool) []byte {
	t.Helper()
	h, _, err := Next(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, HeaderSize)
	i, kept := 0, int32(0)
	err = ForEach(h, b[HeaderSize:h.Size()], func(_ *Record, raw []byte) error {
		if keep(i) {
			out = append(out, raw...)
			kept++
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.RecordCount = kept
	PutHeader(out, h)
	return out
}

func TestCompactedBatchShapes(t *testing.T) {
	o := DefaultBuildOptions()
	o.BaseOffset, o.PartitionLeaderEpoch = 1000, 3
	orig := mustBuild(t, o, testRecords(6))
	oh, _ := ParseHeader(orig)

	// Records 0, 2 and 5 kept: deltas 0, 2, 5, lastOffsetDelta still 5.
	sparse := keepRecords(t, orig, func(i int) bool { return i == 0 || i == 2 || i == 5 })
	// Only record 1 kept, then widened over 20 more offsets.
	widened := keepRecords(t, orig, func(i int) bool { return i == 1 })
	wh, _ := ParseHeader(widened)
	wh.LastOffsetDelta += 20
	PutHeader(widened, wh)
	// No records at all, covering 7 offsets from 1006.
	empty := make([]byte, HeaderSize)
	PutHeader(empty, Header{BaseOffset: 1006, LastOffsetDelta: 6, PartitionLeaderEpoch: 3,
		BaseTimestamp: 5, MaxTimestamp: 5, ProducerID: NoProducer, ProducerEpoch: NoProducer, BaseSequence: NoProducer})

	for _, tc := range []struct {
		name       string
		b          []byte
		deltas     []int32
		next       int64
		wantValues []int
	}{
		{"sparse", sparse, []int32{0, 2, 5}, 1006, []int{0, 2, 5}},
		{"widened", widened, []int32{1}, 1026, []int{1}},
		{"empty", empty, nil, 1013, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := Next(tc.b, 0)
			if err != nil || n != len(tc.b) {
				t.Fatalf("Next: %d of %d bytes, %v", n, len(tc.b), err)
			}
			if h.NextOffset() != tc.next || h.RecordCount != int32(len(tc.deltas)) {
				t.Fatalf("next %d count %d, want %d %d", h.NextOffset(), h.RecordCount, tc.next, len(tc.deltas))
			}
			if err := ValidateProduced(h); err == nil {
				t.Fatal("ValidateProduced accepted a compacted batch: a producer may not send one")
			}
			if err := ValidateStored(h); err != nil {
				t.Fatalf("ValidateStored refused a compacted batch: %v", err)
			}
			recs, err := Records(tc.b, nil)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if len(recs) != len(tc.deltas) {
				t.Fatalf("%d records, want %d", len(recs), len(tc.deltas))
			}
			want := testRecords(6)
			for i, r := range recs {
				if r.OffsetDelta != tc.deltas[i] || !equalRecord(r, want[tc.wantValues[i]]) {
					t.Fatalf("record %d: delta %d %+v, want delta %d %+v", i, r.OffsetDelta, r, tc.deltas[i], want[tc.wantValues[i]])
				}
			}
			if tc.name != "empty" && (h.BaseTimestamp != oh.BaseTimestamp || h.MaxTimestamp != oh.MaxTimestamp ||
				h.PartitionLeaderEpoch != 3 || h.ProducerID != NoProducer) {
				t.Fatalf("header fields changed: %+v, was %+v", h, oh)
			}
		})
	}
}

// ForEach sees what Records sees, hands out the exact encoded bytes of each
// record, and fails where Records fails.
func TestForEachAgreesWithRecords(t *testing.T) {
	recs := testRecords(5)
	recs[2].Headers = []RecordHeader{{Key: "h", Value: []byte("v")}}
	b := mustBuild(t, DefaultBuildOptions(), recs)
	h, _ := ParseHeader(b)
	want, err := Records(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var joined []byte
	i := 0
	err = ForEach(h, b[HeaderSize:], func(r *Record, raw []byte) error {
		if !equalRecord(*r, want[i]) || r.OffsetDelta != want[i].OffsetDelta {
			t.Fatalf("record %d: %+v, want %+v", i, *r, want[i])
		}
		joined = append(joined, raw...)
		i++
		return nil
	})
	if err != nil || i != 5 || !bytes.Equal(joined, b[HeaderSize:]) {
		t.Fatalf("ForEach: %d records, %v; raw bytes joined equal the section: %v", i, err, bytes.Equal(joined, b[HeaderSize:]))
	}

	stop := errors.New("stop")
	calls := 0
	if err := ForEach(h, b[HeaderSize:], func(*Record, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls, want it returned as is after 1", err, calls)
	}
	for _, bad := range [][]byte{b[HeaderSize : len(b)-1], append(bytes.Clone(b[HeaderSize:]), 0)} {
		_, rerr := decodeRecords(h, bad)
		ferr := ForEach(h, bad, func(*Record, []byte) error { return nil })
		if rerr == nil || !errors.Is(ferr, ErrBadRecords) {
			t.Fatalf("malformed section: Records %v, ForEach %v", rerr, ferr)
		}
	}
}

func TestPutHeaderFields(t *testing.T) {
	want := Header{BaseOffset: 1 << 40, PartitionLeaderEpoch: -1, Attributes: int16(CodecZstd) | attrTransactional,
		LastOffsetDelta: 9, BaseTimestamp: -7, MaxTimestamp: 1 << 50, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 1 << 30,
		RecordCount: 0, BatchLength: 12345, CRC: 1, Magic: 9}
	b := append(make([]byte, HeaderSize), "section"...)
	PutHeader(b, want)
	got, n, err := Next(b, 0)
	if err != nil || n != len(b) {
		t.Fatalf("Next: %v", err)
	}
	want.BatchLength, want.CRC, want.Magic = int32(len(b)-12), got.CRC, Magic
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	a := WithCodec(want.Attributes, CodecNone)
	if (Header{Attributes: a}).Codec() != CodecNone || a&attrTransactional == 0 {
		t.Fatalf("WithCodec(none) = %#x", a)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("PutHeader on a short buffer did not panic")
		}
	}()
	PutHeader(make([]byte, HeaderSize-1), want)
}

func ExamplePutHeader() {
	// A batch covering offsets 100..109 with no records, as the log cleaner
	// writes where every record of a range was removed.
	b := make([]byte, HeaderSize)
	PutHeader(b, Header{BaseOffset: 100, LastOffsetDelta: 9, ProducerID: NoProducer, ProducerEpoch: NoProducer, BaseSequence: NoProducer})
	h, n, err := Next(b, 0)
	fmt.Println(n, h.RecordCount, h.NextOffset(), err)
	// Output: 61 0 110 <nil>
}

// A batch lowered over offsets before it: its records' offset deltas grow
// (their varints and length fields with them), everything else stays.
func TestAppendWithOffsetDelta(t *testing.T) {
	recs := testRecords(3)
	recs[1].Headers = []RecordHeader{{Key: "h", Value: []byte("v")}}
	b := mustBuild(t, DefaultBuildOptions(), recs)
	h, _ := ParseHeader(b)
	const shift = 100_000 // a 3-byte varint instead of a 1-byte one
	out := make([]byte, HeaderSize)
	err := ForEach(h, b[HeaderSize:], func(r *Record, raw []byte) error {
		var err error
		out, err = AppendWithOffsetDelta(out, raw, r.OffsetDelta+shift)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.BaseOffset -= shift
	h.LastOffsetDelta += shift
	PutHeader(out, h)
	got, err := Records(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Records(b, nil)
	for i := range got {
		if got[i].OffsetDelta != want[i].OffsetDelta+shift || !equalRecord(got[i], want[i]) || got[i].TimestampDelta != want[i].TimestampDelta {
			t.Fatalf("record %d: %+v, want %+v shifted", i, got[i], want[i])
		}
	}
	if len(out) <= len(b) {
		t.Fatalf("lowered batch %d bytes, was %d: the varints did not grow", len(out), len(b))
	}
	for _, bad := range [][]byte{nil, {0}, {2, 0}, b[HeaderSize : HeaderSize+3]} {
		if res, err := AppendWithOffsetDelta([]byte("x"), bad, 1); !errors.Is(err, ErrBadRecords) || string(res) != "x" {
			t.Fatalf("AppendWithOffsetDelta(%x) = %q, %v", bad, res, err)
		}
	}
}
