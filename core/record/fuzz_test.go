package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

func FuzzNext(f *testing.F) {
	valid, err := Build(DefaultBuildOptions(), testRecords(3))
	if err != nil {
		f.Fatal(err)
	}
	huge := bytes.Clone(valid[:HeaderSize])
	binary.BigEndian.PutUint32(huge[8:], math.MaxInt32)
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
	f.Add(huge)
	f.Add(valid)
	f.Add(append(bytes.Clone(valid), 0xde, 0xad, 0xbe, 0xef))
	f.Add(append(bytes.Clone(valid), valid...))
	f.Add(saramaEmpty)

	table := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, b []byte) {
		ph, perr := ParseHeader(b)
		h, n, err := Next(b, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Next error %v is not ErrCorrupt", err)
			}
			if n != 0 {
				t.Fatalf("n = %d on error", n)
			}
			return
		}
		if perr != nil || ph != h {
			t.Fatalf("Next succeeded but ParseHeader gave %+v, %v", ph, perr)
		}
		if n != h.Size() || n > len(b) || n < MinBatchSize {
			t.Fatalf("n = %d, Size() = %d, len(b) = %d", n, h.Size(), len(b))
		}
		if sum := crc32.Checksum(b[21:n], table); sum != h.CRC {
			t.Fatalf("accepted CRC %#x, computed %#x", h.CRC, sum)
		}
		h2, n2, err := Next(b[:n], n)
		if err != nil || h2 != h || n2 != n {
			t.Fatalf("re-validating b[:n] with limit n: %+v, %d, %v", h2, n2, err)
		}
		if _, _, err := Next(b[:n], n-1); !errors.Is(err, ErrBadLength) {
			t.Fatalf("limit n-1: %v, want ErrBadLength", err)
		}
		// Decoding the records must not panic, whatever they hold.
		recs, err := Records(b[:n], func(_ Codec, s []byte) ([]byte, error) { return s, nil })
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Records error %v is not ErrCorrupt", err)
		}
		if err == nil && len(recs) != int(h.RecordCount) {
			t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
		}
	})
}

func FuzzRecords(f *testing.F) {
	valid, err := Build(DefaultBuildOptions(), testRecords(5))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{}, int32(0), int32(0), int16(0))
	f.Add(valid[HeaderSize:], int32(5), int32(4), int16(0))
	f.Add(valid[HeaderSize:], int32(5), int32(4), int16(CodecZstd|attrLogAppendTime))
	f.Add(saramaRecord, int32(1), int32(0), int16(0))
	f.Add(enc(rec("\x00", 0, 0, -1, -1, 1, 1, "k", -1)), int32(1), int32(0), int16(0))
	f.Add(make([]byte, 64), int32(9), int32(8), int16(0))

	f.Fuzz(func(t *testing.T, section []byte, count, last int32, attrs int16) {
		b := batchOf(section, count, last)
		binary.BigEndian.PutUint16(b[21:], uint16(attrs))
		fixCRC(b)
		h, _, err := Next(b, 0)
		if err != nil {
			if count >= 0 && last >= 0 {
				t.Fatalf("Next rejected a well-formed header: %v", err)
			}
			return
		}
		identity := func(_ Codec, s []byte) ([]byte, error) { return s, nil }
		recs, err := Records(b, identity)
		seen := 0
		ferr := ForEach(h, section, func(*Record, []byte) error { seen++; return nil })
		if (ferr == nil) != (err == nil) || (err == nil && seen != len(recs)) {
			t.Fatalf("ForEach saw %d records (%v), Records %d (%v)", seen, ferr, len(recs), err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Records error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(recs) != int(count) {
			t.Fatalf("%d records, header says %d", len(recs), count)
		}
		prev := int32(-1)
		for i, r := range recs {
			if r.OffsetDelta <= prev || r.OffsetDelta > last {
				t.Fatalf("record %d: offsetDelta %d after %d, last %d", i, r.OffsetDelta, prev, last)
			}
			prev = r.OffsetDelta
			want := h.BaseTimestamp + r.TimestampDelta
			if h.TimestampType() == LogAppendTime {
				want = h.MaxTimestamp
			}
			if r.Timestamp != want {
				t.Fatalf("record %d: timestamp %d, want %d", i, r.Timestamp, want)
			}
		}
		if count == 0 {
			return
		}
		// What decodes must re-encode to records that decode the same.
		again, err := Records(mustBuild(t, BuildOptions{}, recs), nil)
		if err != nil {
			t.Fatalf("re-decoding a rebuilt batch: %v", err)
		}
		for i := range recs {
			if !equalRecord(recs[i], again[i]) {
				t.Fatalf("record %d changed in a rebuild\n was %+v\n now %+v", i, recs[i], again[i])
			}
		}
	})
}

// AppendWithOffsetDelta takes any bytes without panicking; what it accepts
// comes out as one record whose length field matches, with the new delta,
// and every other byte kept.
func FuzzAppendWithOffsetDelta(f *testing.F) {
	valid, err := Build(DefaultBuildOptions(), testRecords(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid[HeaderSize:], int32(100_000))
	f.Add([]byte{}, int32(0))
	f.Add([]byte{2, 0}, int32(-1))
	f.Add(enc(rec("\x00", 0, 0, -1, -1, 0)), int32(math.MaxInt32))
	f.Fuzz(func(t *testing.T, raw []byte, delta int32) {
		out, err := AppendWithOffsetDelta(nil, raw, delta)
		if err != nil {
			if !errors.Is(err, ErrBadRecords) || out != nil {
				t.Fatalf("error %v with output %x", err, out)
			}
			return
		}
		length, n := readVarint32(out)
		if n == 0 || int(length) != len(out)-n {
			t.Fatalf("length field %d for %d bytes", length, len(out)-n)
		}
		body := out[n:]
		_, nts := binary.Varint(body[1:])
		got, _ := readVarint32(body[1+nts:])
		if got != delta {
			t.Fatalf("offset delta %d, want %d", got, delta)
		}
		// The same call on its own output gives it back: nothing else moved.
		again, err := AppendWithOffsetDelta(nil, out, delta)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %x vs %x (%v)", again, out, err)
		}
	})
}
