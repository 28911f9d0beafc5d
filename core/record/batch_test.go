package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

// testRecords returns n records with varied keys, values and timestamps.
func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:       []byte{byte(i), byte(i >> 8)},
			Value:     bytes.Repeat([]byte{'v'}, i%300),
			Timestamp: 1_700_000_000_000 + int64(i%7)*13 - 40,
		}
		if i%3 == 0 {
			recs[i].Headers = []RecordHeader{{Key: "h", Value: []byte{byte(i)}}}
		}
	}
	return recs
}

func mustBuild(t testing.TB, opts BuildOptions, recs []Record) []byte {
	t.Helper()
	b, err := Build(opts, recs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

// fixCRC recomputes the CRC of the batch at the start of b after a test
// tampered with covered bytes.
func fixCRC(b []byte) {
	size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:size], crc32.MakeTable(crc32.Castagnoli)))
}

func TestParseHeaderAndNext(t *testing.T) {
	opts := DefaultBuildOptions()
	opts.BaseOffset = 1000
	valid := mustBuild(t, opts, testRecords(5))
	size := len(valid)

	put32 := func(off int, v int32, crc bool) func([]byte) []byte {
		return func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[off:], uint32(v))
			if crc {
				fixCRC(b)
			}
			return b
		}
	}
	tests := []struct {
		name      string
		mutate    func([]byte) []byte
		maxSize   int
		wantParse error // from ParseHeader
		wantNext  error // from Next
	}{
		{name: "valid", mutate: func(b []byte) []byte { return b }},
		{name: "valid at exact max size", mutate: func(b []byte) []byte { return b }, maxSize: size},
		{name: "empty", mutate: func(b []byte) []byte { return b[:0] }, wantParse: ErrShort, wantNext: ErrShort},
		{name: "one byte short of header", mutate: func(b []byte) []byte { return b[:HeaderSize-1] },
			wantParse: ErrShort, wantNext: ErrShort},
		{name: "header only", mutate: func(b []byte) []byte { return b[:HeaderSize] }, wantNext: ErrShort},
		{name: "one byte short of batch", mutate: func(b []byte) []byte { return b[:size-1] }, wantNext: ErrShort},
		{name: "magic 1", mutate: func(b []byte) []byte { b[16] = 1; return b }, wantParse: ErrBadMagic, wantNext: ErrBadMagic},
		{name: "magic 3", mutate: func(b []byte) []byte { b[16] = 3; return b }, wantParse: ErrBadMagic, wantNext: ErrBadMagic},
		{name: "crc flipped", mutate: func(b []byte) []byte { b[20] ^= 1; return b }, wantNext: ErrBadCRC},
		{name: "attributes flipped", mutate: func(b []byte) []byte { b[22] ^= 0x10; return b }, wantNext: ErrBadCRC},
		{name: "producer id flipped", mutate: func(b []byte) []byte { b[50] ^= 1; return b }, wantNext: ErrBadCRC},
		{name: "last record byte flipped", mutate: func(b []byte) []byte { b[size-1] ^= 0x80; return b }, wantNext: ErrBadCRC},
		{name: "length one below minimum", mutate: put32(8, HeaderSize-13, false), wantParse: ErrBadLength, wantNext: ErrBadLength},
		{name: "length zero", mutate: put32(8, 0, false), wantParse: ErrBadLength, wantNext: ErrBadLength},
		{name: "length negative", mutate: put32(8, -1, false), wantParse: ErrBadLength, wantNext: ErrBadLength},
		{name: "length min int32", mutate: put32(8, math.MinInt32, false), wantParse: ErrBadLength, wantNext: ErrBadLength},
		{name: "length beyond buffer", mutate: put32(8, int32(size-12+1), false), wantNext: ErrShort},
		{name: "length max int32", mutate: put32(8, math.MaxInt32, false), wantNext: ErrShort},
		{name: "length max int32 with limit", mutate: put32(8, math.MaxInt32, false), maxSize: 1 << 20, wantNext: ErrBadLength},
		{name: "batch over limit", mutate: func(b []byte) []byte { return b }, maxSize: size - 1, wantNext: ErrBadLength},
		{name: "length shorter than records", mutate: put32(8, int32(size-12-1), false), wantNext: ErrBadCRC},
		{name: "negative record count", mutate: put32(57, -1, true), wantParse: ErrBadRecords, wantNext: ErrBadRecords},
		{name: "negative last offset delta", mutate: put32(23, -5, true), wantParse: ErrBadRecords, wantNext: ErrBadRecords},
		{name: "leader epoch is not covered", mutate: put32(12, 77, false)},
		{name: "base offset is not covered", mutate: func(b []byte) []byte { b[3] = 0xff; return b }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(valid))

			h, err := ParseHeader(b)
			if !errors.Is(err, tc.wantParse) || (err == nil) != (tc.wantParse == nil) {
				t.Fatalf("ParseHeader error = %v, want %v", err, tc.wantParse)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Errorf("ParseHeader error %v is not ErrCorrupt", err)
			}
			if err == nil && h.Magic != Magic {
				t.Errorf("ParseHeader magic = %d", h.Magic)
			}

			h, n, err := Next(b, tc.maxSize)
			if !errors.Is(err, tc.wantNext) || (err == nil) != (tc.wantNext == nil) {
				t.Fatalf("Next error = %v, want %v", err, tc.wantNext)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("Next error %v is not ErrCorrupt", err)
				}
				if n != 0 {
					t.Errorf("Next n = %d on error, want 0", n)
				}
				return
			}
			if n != size || h.Size() != size {
				t.Errorf("Next n = %d, Size() = %d, want %d", n, h.Size(), size)
			}
		})
	}
}

func TestNextHeaderFields(t *testing.T) {
	opts := BuildOptions{
		BaseOffset: 1 << 40, PartitionLeaderEpoch: 7, Codec: CodecNone,
		ProducerID: 123456789, ProducerEpoch: 3, BaseSequence: 42,
		Transactional: true, LogAppendTime: true,
	}
	recs := []Record{{Timestamp: 500}, {Timestamp: 900}, {Timestamp: 100}}
	b := mustBuild(t, opts, recs)
	h, n, err := Next(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: 1 << 40, BatchLength: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2,
		CRC:        crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)),
		Attributes: 0x18, LastOffsetDelta: 2, BaseTimestamp: 500, MaxTimestamp: 900,
		ProducerID: 123456789, ProducerEpoch: 3, BaseSequence: 42, RecordCount: 3,
	}
	if h != want {
		t.Errorf("header\n got %+v\nwant %+v", h, want)
	}
	if n != len(b) {
		t.Errorf("n = %d, want %d", n, len(b))
	}
	if h.LastOffset() != 1<<40+2 || h.NextOffset() != 1<<40+3 {
		t.Errorf("LastOffset %d NextOffset %d", h.LastOffset(), h.NextOffset())
	}
	if h.Codec() != CodecNone || h.TimestampType() != LogAppendTime || !h.Transactional() || h.Control() {
		t.Errorf("codec %v type %v transactional %v control %v", h.Codec(), h.TimestampType(), h.Transactional(), h.Control())
	}
}

func TestHeaderAttributes(t *testing.T) {
	tests := []struct {
		attrs         int16
		codec         Codec
		tsType        TimestampType
		transactional bool
		control       bool
	}{
		{0x00, CodecNone, CreateTime, false, false},
		{0x01, CodecGzip, CreateTime, false, false},
		{0x02, CodecSnappy, CreateTime, false, false},
		{0x03, CodecLZ4, CreateTime, false, false},
		{0x04, CodecZstd, CreateTime, false, false},
		{0x07, 7, CreateTime, false, false},
		{0x08, CodecNone, LogAppendTime, false, false},
		{0x10, CodecNone, CreateTime, true, false},
		{0x20, CodecNone, CreateTime, false, true},
		{0x3c, CodecZstd, LogAppendTime, true, true},
		{-1, 7, LogAppendTime, true, true},
	}
	for _, tc := range tests {
		h := Header{Attributes: tc.attrs}
		if h.Codec() != tc.codec || h.TimestampType() != tc.tsType ||
			h.Transactional() != tc.transactional || h.Control() != tc.control {
			t.Errorf("attrs %#x: codec %v type %v txn %v control %v", tc.attrs,
				h.Codec(), h.TimestampType(), h.Transactional(), h.Control())
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{CodecNone.String(), "none"},
		{CodecGzip.String(), "gzip"},
		{CodecSnappy.String(), "snappy"},
		{CodecLZ4.String(), "lz4"},
		{CodecZstd.String(), "zstd"},
		{Codec(5).String(), "custom-5"},
		{Codec(7).String(), "custom-7"},
		{Codec(8).String(), "codec(8)"},
		{Codec(-1).String(), "codec(-1)"},
		{CreateTime.String(), "CreateTime"},
		{LogAppendTime.String(), "LogAppendTime"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestErrorCategories(t *testing.T) {
	for _, err := range []error{ErrShort, ErrBadLength, ErrBadMagic, ErrBadCRC, ErrBadRecords} {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v is not ErrCorrupt", err)
		}
		if errors.Is(ErrCorrupt, err) {
			t.Errorf("ErrCorrupt matches %v", err)
		}
	}
	for _, err := range []error{ErrCompressed, ErrBuild} {
		if errors.Is(err, ErrCorrupt) {
			t.Errorf("%v must not be ErrCorrupt", err)
		}
	}
	if errors.Is(ErrShort, ErrBadCRC) || errors.Is(ErrBadCRC, ErrShort) {
		t.Error("specific sentinels must differ")
	}
}

func TestValidateProduced(t *testing.T) {
	tests := []struct {
		name    string
		count   int32
		last    int32
		wantErr bool
	}{
		{"one record", 1, 0, false},
		{"many records", 1000, 999, false},
		{"empty batch", 0, 0, true},
		{"compacted gap", 2, 3, true},
		{"count above delta", 3, 1, true},
		{"max", math.MaxInt32, math.MaxInt32 - 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateProduced(Header{RecordCount: tc.count, LastOffsetDelta: tc.last})
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, ErrBadRecords) || !errors.Is(err, ErrCorrupt)) {
				t.Errorf("err = %v, want ErrBadRecords", err)
			}
		})
	}
}

func TestValidateStored(t *testing.T) {
	tests := []struct {
		name    string
		base    int64
		count   int32
		last    int32
		wantErr bool
	}{
		{"as produced", 0, 3, 2, false},
		{"compacted gap", 100, 2, 3, false},
		{"no records", 100, 0, 6, false},
		{"count above delta", 0, 3, 1, true},
		{"negative base", -1, 1, 0, true},
		{"last offset overflows", math.MaxInt64 - 1, 2, 1, true},
		{"last offset fits", math.MaxInt64 - 2, 2, 1, false},
		{"max", 0, math.MaxInt32, math.MaxInt32 - 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateStored(Header{BaseOffset: tc.base, RecordCount: tc.count, LastOffsetDelta: tc.last})
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, ErrBadRecords) || !errors.Is(err, ErrCorrupt)) {
				t.Errorf("err = %v, want ErrBadRecords", err)
			}
		})
	}
}

func TestNextReturnsOnlyFirstBatch(t *testing.T) {
	batch := mustBuild(t, DefaultBuildOptions(), testRecords(3))
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 40)
	b := append(bytes.Clone(batch), garbage...)

	h, n, err := Next(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(batch) || h.Size() != len(batch) {
		t.Fatalf("n = %d, Size() = %d, want %d", n, h.Size(), len(batch))
	}
	if _, _, err := Next(b[n:], 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Next on the garbage: %v, want ErrCorrupt", err)
	}
}

func TestWalkConcatenatedBatches(t *testing.T) {
	var buf []byte
	var wantBase []int64
	var wantCount []int32
	next := int64(0)
	for i, n := range []int{1, 7, 100, 2} {
		opts := DefaultBuildOptions()
		opts.BaseOffset = next
		var err error
		if buf, err = AppendBatch(buf, opts, testRecords(n)); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		wantBase = append(wantBase, next)
		wantCount = append(wantCount, int32(n))
		next += int64(n)
	}
	// A torn tail: the first 30 bytes of another batch.
	torn := mustBuild(t, DefaultBuildOptions(), testRecords(4))[:30]
	all := append(bytes.Clone(buf), torn...)

	b := all
	i := 0
	for len(b) > 0 {
		h, n, err := Next(b, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrShort) {
				t.Fatalf("at batch %d: %v, want ErrShort", i, err)
			}
			break
		}
		if i >= len(wantBase) || h.BaseOffset != wantBase[i] || h.RecordCount != wantCount[i] {
			t.Fatalf("batch %d: base %d count %d", i, h.BaseOffset, h.RecordCount)
		}
		recs, err := Records(b[:n], nil)
		if err != nil || len(recs) != int(wantCount[i]) {
			t.Fatalf("batch %d: Records: %d records, %v", i, len(recs), err)
		}
		b = b[n:]
		i++
	}
	if i != len(wantBase) || len(b) != len(torn) {
		t.Errorf("walked %d batches leaving %d bytes, want %d batches leaving %d", i, len(b), len(wantBase), len(torn))
	}
}

func TestSetBaseOffsetAndLeaderEpochKeepCRC(t *testing.T) {
	orig := mustBuild(t, DefaultBuildOptions(), testRecords(10))
	tests := []struct {
		offset int64
		epoch  int32
	}{
		{0, 0},
		{1, 1},
		{math.MaxInt64 - 9, math.MaxInt32},
		{-1, -1},
		{1 << 33, 12345},
	}
	for _, tc := range tests {
		b := bytes.Clone(orig)
		SetBaseOffset(b, tc.offset)
		SetPartitionLeaderEpoch(b, tc.epoch)
		h, n, err := Next(b, 0)
		if err != nil {
			t.Fatalf("offset %d epoch %d: %v", tc.offset, tc.epoch, err)
		}
		if h.BaseOffset != tc.offset || h.PartitionLeaderEpoch != tc.epoch || n != len(orig) {
			t.Errorf("got offset %d epoch %d n %d", h.BaseOffset, h.PartitionLeaderEpoch, n)
		}
		if !bytes.Equal(b[8:12], orig[8:12]) || !bytes.Equal(b[16:], orig[16:]) {
			t.Errorf("offset %d epoch %d: bytes other than @0 and @12 changed", tc.offset, tc.epoch)
		}
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	b := mustBuild(t, DefaultBuildOptions(), testRecords(50))
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		h, err := ParseHeader(b)
		if err != nil {
			panic(err)
		}
		h, n, err := Next(b, 1<<20)
		if err != nil {
			panic(err)
		}
		if err := ValidateProduced(h); err != nil {
			panic(err)
		}
		SetBaseOffset(b, h.BaseOffset+int64(n))
		SetPartitionLeaderEpoch(b, h.PartitionLeaderEpoch+1)
		sink += h.NextOffset()
	})
	if allocs != 0 {
		t.Errorf("hot path allocates %.1f times per run", allocs)
	}
	if sink == 0 {
		t.Error("loop did not run")
	}
}
