package producers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"

	"github.com/weir-broker/weir/core/record"
)

// push records batches of one producer as a partition would, in order.
func push(ps *Table, id int64, epoch int16, used int64, bs ...Batch) {
	e := ps.Lock(id)
	for _, b := range bs {
		e.State.Push(epoch, b)
	}
	e.Used = used
	ps.Unlock(id, e)
}

// sampleTable has three producers: one with more batches than are
// remembered, one whose sequences wrap, one that moved to a new epoch.
func sampleTable(order []int) *Table {
	var ps Table
	fill := map[int]func(){
		0: func() {
			var bs []Batch
			for i := range 7 {
				bs = append(bs, Batch{FirstSeq: int32(2 * i), LastSeq: int32(2*i + 1), Base: int64(10 * i), Next: int64(10*i + 2)})
			}
			push(&ps, 7, 3, 1000, bs...)
		},
		1: func() {
			push(&ps, 2, 0, 2000, Batch{FirstSeq: math.MaxInt32 - 1, LastSeq: 1, Base: 100, Next: 104})
		},
		2: func() {
			push(&ps, 40, 0, 3000, Batch{FirstSeq: 0, LastSeq: 4, Base: 200, Next: 205})
			push(&ps, 40, 1, 3001, Batch{FirstSeq: 0, LastSeq: 0, Base: 300, Next: 301})
		},
	}
	for _, i := range order {
		fill[i]()
	}
	return &ps
}

func header(id int64, epoch int16, first int32, n int) record.Header {
	return record.Header{ProducerID: id, ProducerEpoch: epoch, BaseSequence: first, LastOffsetDelta: int32(n - 1), RecordCount: int32(n)}
}

// TestSnapshotRoundTrip: a restored table answers as the one snapshotted
// (duplicates with their offsets, the next sequence, the epoch), keeps the
// expiry times, and encodes to the same bytes; the encoding does not depend
// on the order producers arrived in.
func TestSnapshotRoundTrip(t *testing.T) {
	b := sampleTable([]int{0, 1, 2}).AppendSnapshot(nil, 400)
	if again := sampleTable([]int{2, 0, 1}).AppendSnapshot(nil, 400); !bytes.Equal(b, again) {
		t.Fatal("the same producers in another order encode differently")
	}
	var ps Table
	push(&ps, 99, 0, 1, Batch{Base: 1, Next: 2}) // replaced by the restore
	off, err := ps.Restore(b)
	if err != nil || off != 400 {
		t.Fatalf("Restore: %d, %v", off, err)
	}
	if got := ps.AppendSnapshot(nil, 400); !bytes.Equal(got, b) {
		t.Fatal("the restored table encodes differently")
	}
	if ps.Count() != 3 {
		t.Fatalf("%d producers, want 3", ps.Count())
	}
	for _, tc := range []struct {
		name string
		h    record.Header
		v    Verdict
		dup  Batch
		err  error
	}{
		{"retry of a remembered batch", header(7, 3, 8, 2), Duplicate, Batch{FirstSeq: 8, LastSeq: 9, Base: 40, Next: 42}, nil},
		{"retry of the last", header(7, 3, 12, 2), Duplicate, Batch{FirstSeq: 12, LastSeq: 13, Base: 60, Next: 62}, nil},
		{"forgotten batch", header(7, 3, 0, 2), 0, Batch{}, ErrDuplicateSequence},
		{"next in sequence", header(7, 3, 14, 1), AppendBatch, Batch{}, nil},
		{"older epoch", header(7, 2, 14, 1), 0, Batch{}, ErrInvalidProducerEpoch},
		{"after the wrap", header(2, 0, 2, 1), AppendBatch, Batch{}, nil},
		{"epoch moved on", header(40, 0, 5, 1), 0, Batch{}, ErrInvalidProducerEpoch},
		{"unknown", header(99, 0, 3, 1), 0, Batch{}, ErrUnknownProducerID},
	} {
		e := ps.Lock(tc.h.ProducerID)
		v, dup, err := e.State.Check(tc.h)
		ps.Unlock(tc.h.ProducerID, e)
		if v != tc.v || dup != tc.dup || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: %v %+v %v, want %v %+v %v", tc.name, v, dup, err, tc.v, tc.dup, tc.err)
		}
	}
	if n := ps.Expire(2500); n != 2 { // producers 7 and 2 were last used before 2500
		t.Errorf("Expire(2500) forgot %d producers, want 2", n)
	}
	// As of an earlier offset: producer 40 is left out (its remembered
	// batch ends at 301), producer 7 keeps the batches ending by 45.
	if _, err := ps.Restore(sampleTable([]int{0, 1, 2}).AppendSnapshot(nil, 45)); err != nil {
		t.Fatal(err)
	}
	if ps.Count() != 1 {
		t.Fatalf("as of 45: %d producers, want producer 7 alone", ps.Count())
	}
	e := ps.Lock(7)
	last, ok := e.State.Last()
	ps.Unlock(7, e)
	if !ok || last != (Batch{FirstSeq: 8, LastSeq: 9, Base: 40, Next: 42}) {
		t.Fatalf("as of 45: producer 7's last batch %+v", last)
	}
	empty := (&Table{}).AppendSnapshot(nil, 0)
	if off, err := ps.Restore(empty); err != nil || off != 0 || ps.Count() != 0 {
		t.Fatalf("restore of an empty table: %d, %v, %d producers", off, err, ps.Count())
	}
}

// recrc rewrites a snapshot's CRC after a test changed its fields.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// TestSnapshotRejects: every cut, every flipped bit and every field out of
// range is ErrBadSnapshot, and a failed Restore leaves the table as it was.
func TestSnapshotRejects(t *testing.T) {
	good := sampleTable([]int{0, 1, 2}).AppendSnapshot(nil, 400)
	check := func(name string, b []byte) {
		t.Helper()
		ps := sampleTable([]int{1})
		before := ps.AppendSnapshot(nil, 1)
		if _, err := ps.Restore(b); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s: Restore = %v, want ErrBadSnapshot", name, err)
		}
		if after := ps.AppendSnapshot(nil, 1); !bytes.Equal(before, after) {
			t.Fatalf("%s: a failed Restore changed the table", name)
		}
	}
	for n := range len(good) {
		check("cut", good[:n])
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		check("flip", b)
	}
	// Fields out of range, with a valid CRC. The first producer (id 2) is
	// at 18 (flags at 36, coordinator epoch 37, transaction start 41,
	// batch count 49); its batch at 50; the second producer (id 7) at 74.
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"version", func(b []byte) { b[5] = 3 }},
		{"negative offset", func(b []byte) { b[6] = 0x80 }},
		{"count too high", func(b []byte) { binary.BigEndian.PutUint32(b[14:], 4) }},
		{"count too low", func(b []byte) { binary.BigEndian.PutUint32(b[14:], 2) }},
		{"ids not ascending", func(b []byte) { binary.BigEndian.PutUint64(b[74:], 2) }},
		{"negative epoch", func(b []byte) { binary.BigEndian.PutUint16(b[26:], 0xffff) }},
		{"unknown flag", func(b []byte) { b[36] = 4 }},
		{"transaction at the offset", func(b []byte) { b[36] = flagTxn; binary.BigEndian.PutUint64(b[41:], 400) }},
		{"transaction start without a transaction", func(b []byte) { binary.BigEndian.PutUint64(b[41:], 5) }},
		{"no batches", func(b []byte) { b[49] = 0 }},
		{"too many batches", func(b []byte) { b[49] = Remembered + 1 }},
		{"negative sequence", func(b []byte) { binary.BigEndian.PutUint32(b[50:], 0x80000000) }},
		{"empty batch", func(b []byte) { binary.BigEndian.PutUint64(b[66:], 100) }},
		{"batch past the offset", func(b []byte) { binary.BigEndian.PutUint64(b[6:], 103) }},
		{"batches out of order", func(b []byte) {
			// producer 7's second batch starts before its first ends
			binary.BigEndian.PutUint64(b[74+32+24+8:], 1)
		}},
	} {
		b := bytes.Clone(good)
		tc.edit(b)
		check(tc.name, recrc(b))
	}
}

// FuzzSnapshot: Restore never panics, and what it accepts encodes back to
// the same bytes.
func FuzzSnapshot(f *testing.F) {
	good := sampleTable([]int{0, 1, 2}).AppendSnapshot(nil, 400)
	f.Add([]byte{})
	f.Add(good)
	f.Add((&Table{}).AppendSnapshot(nil, 0))
	f.Add(append(bytes.Clone(good), 0, 1, 2))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ps Table
		off, err := ps.Restore(b)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v is not ErrBadSnapshot", err)
			}
			return
		}
		if got := ps.AppendSnapshot(nil, off); !bytes.Equal(got, b) {
			t.Fatalf("accepted %x, encodes as %x", b, got)
		}
	})
}
