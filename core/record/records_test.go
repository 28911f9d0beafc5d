package record

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// equalRecord compares what survives a round trip, telling nil from empty.
func equalRecord(a, b Record) bool {
	sameBytes := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	if a.Attributes != b.Attributes || a.Timestamp != b.Timestamp ||
		!sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func checkRoundTrip(t *testing.T, opts BuildOptions, in []Record, decompress func(Codec, []byte) ([]byte, error)) []Record {
	t.Helper()
	b := mustBuild(t, opts, in)
	h, n, err := Next(b, 0)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if n != len(b) || h.RecordCount != int32(len(in)) || h.LastOffsetDelta != int32(len(in)-1) {
		t.Fatalf("n %d/%d count %d lastOffsetDelta %d", n, len(b), h.RecordCount, h.LastOffsetDelta)
	}
	if err := ValidateProduced(h); err != nil {
		t.Fatalf("ValidateProduced: %v", err)
	}
	if h.Codec() != opts.Codec || h.BaseTimestamp != in[0].Timestamp {
		t.Fatalf("codec %v baseTimestamp %d", h.Codec(), h.BaseTimestamp)
	}
	maxTs := in[0].Timestamp
	for _, r := range in {
		maxTs = max(maxTs, r.Timestamp)
	}
	if h.MaxTimestamp != maxTs {
		t.Fatalf("maxTimestamp %d, want %d", h.MaxTimestamp, maxTs)
	}
	out, err := Records(b, decompress)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records, want %d", len(out), len(in))
	}
	for i := range in {
		want := in[i]
		if opts.LogAppendTime {
			want.Timestamp = maxTs
		}
		if !equalRecord(out[i], want) {
			t.Fatalf("record %d\n got %+v\nwant %+v", i, out[i], want)
		}
		if out[i].OffsetDelta != int32(i) || out[i].TimestampDelta != in[i].Timestamp-in[0].Timestamp {
			t.Fatalf("record %d: offsetDelta %d timestampDelta %d", i, out[i].OffsetDelta, out[i].TimestampDelta)
		}
	}
	return out
}

func TestBuildRecordsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		opts func() BuildOptions
		recs []Record
	}{
		{name: "one record", recs: []Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1}}},
		{name: "null key and value", recs: []Record{{Timestamp: 5}}},
		{name: "empty key and value", recs: []Record{{Key: []byte{}, Value: []byte{}}}},
		{name: "null key empty value", recs: []Record{{Value: []byte{}}, {Key: []byte{}}}},
		{name: "headers", recs: []Record{{
			Key: []byte("key"), Value: []byte("value"),
			Headers: []RecordHeader{
				{Key: "a", Value: []byte("1")},
				{Key: "", Value: []byte("empty key")},
				{Key: "null", Value: nil},
				{Key: "empty", Value: []byte{}},
			},
		}}},
		{name: "negative timestamp deltas", recs: []Record{
			{Timestamp: 1_700_000_000_000}, {Timestamp: 1_699_999_999_000}, {Timestamp: 1_700_000_000_500}, {Timestamp: 0},
		}},
		{name: "extreme timestamps", recs: []Record{
			{Timestamp: math.MaxInt64}, {Timestamp: math.MinInt64}, {Timestamp: -1},
		}},
		{name: "record attributes", recs: []Record{{Attributes: -128}, {Attributes: 5}}},
		{name: "large value", recs: []Record{{Value: bytes.Repeat([]byte("x"), 300_000)}}},
		{name: "1000 records", recs: testRecords(1000)},
		{name: "producer fields and flags", opts: func() BuildOptions {
			return BuildOptions{BaseOffset: 99, ProducerID: 5, ProducerEpoch: 2, BaseSequence: 17, Transactional: true}
		}, recs: testRecords(3)},
		{name: "control", opts: func() BuildOptions {
			o := DefaultBuildOptions()
			o.Control = true
			return o
		}, recs: []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}},
		{name: "log append time", opts: func() BuildOptions {
			o := DefaultBuildOptions()
			o.LogAppendTime = true
			return o
		}, recs: []Record{{Timestamp: 10}, {Timestamp: 30}, {Timestamp: 20}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultBuildOptions()
			if tc.opts != nil {
				opts = tc.opts()
			}
			checkRoundTrip(t, opts, tc.recs, nil)
			b := mustBuild(t, opts, tc.recs)
			h, _ := ParseHeader(b)
			if h.BaseOffset != opts.BaseOffset || h.ProducerID != opts.ProducerID ||
				h.ProducerEpoch != opts.ProducerEpoch || h.BaseSequence != opts.BaseSequence ||
				h.PartitionLeaderEpoch != opts.PartitionLeaderEpoch || h.Transactional() != opts.Transactional ||
				h.Control() != opts.Control || (h.TimestampType() == LogAppendTime) != opts.LogAppendTime {
				t.Errorf("header %+v does not match options %+v", h, opts)
			}
		})
	}
}

func TestRecordsAliasBatch(t *testing.T) {
	b := mustBuild(t, DefaultBuildOptions(), []Record{{Key: []byte("key"), Value: []byte("value")}})
	recs, err := Records(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if cap(r.Key) != len(r.Key) || cap(r.Value) != len(r.Value) {
		t.Errorf("capacities not clipped: key %d/%d value %d/%d", len(r.Key), cap(r.Key), len(r.Value), cap(r.Value))
	}
	i := bytes.Index(b, []byte("value"))
	b[i] = 'V'
	if string(r.Value) != "Value" {
		t.Errorf("value %q does not alias the batch", r.Value)
	}
	k := bytes.Index(b, []byte("key"))
	after := b[k+3]
	_ = append(r.Key, '!')
	if b[k+3] != after {
		t.Error("appending to a key overwrote the batch")
	}
}

// reverse is a fake codec: its output differs from its input, and it is its
// own inverse.
func reverse(raw []byte) ([]byte, error) {
	out := bytes.Clone(raw)
	slices.Reverse(out)
	return out, nil
}

func TestCompressedRoundTrip(t *testing.T) {
	for _, codec := range []Codec{CodecGzip, CodecZstd, 5, 7} {
		t.Run(codec.String(), func(t *testing.T) {
			opts := DefaultBuildOptions()
			opts.Codec = codec
			opts.Compress = reverse
			recs := testRecords(50)
			var calls int
			decompress := func(c Codec, section []byte) ([]byte, error) {
				calls++
				if c != codec {
					t.Errorf("decompress got codec %v, want %v", c, codec)
				}
				return reverse(section)
			}
			checkRoundTrip(t, opts, recs, decompress)
			if calls != 1 {
				t.Errorf("decompress called %d times, want once per batch", calls)
			}

			b := mustBuild(t, opts, recs)
			plain := mustBuild(t, DefaultBuildOptions(), recs)
			if bytes.Equal(b[HeaderSize:], plain[HeaderSize:]) {
				t.Error("records section was not passed through Compress")
			}
			_, err := Records(b, nil)
			if !errors.Is(err, ErrCompressed) || errors.Is(err, ErrCorrupt) {
				t.Errorf("Records without decompressor: %v, want ErrCompressed and not ErrCorrupt", err)
			}
			boom := errors.New("plugin crashed")
			_, err = Records(b, func(Codec, []byte) ([]byte, error) { return nil, boom })
			if !errors.Is(err, boom) || !errors.Is(err, ErrBadRecords) {
				t.Errorf("Records with failing decompressor: %v, want both %v and ErrBadRecords", err, boom)
			}
			_, err = Records(b, func(_ Codec, s []byte) ([]byte, error) { return s, nil })
			if !errors.Is(err, ErrBadRecords) {
				t.Errorf("Records with a wrong decompressor: %v, want ErrBadRecords", err)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	boom := errors.New("compressor failed")
	tests := []struct {
		name    string
		opts    BuildOptions
		recs    []Record
		wantErr error
	}{
		{"no records", BuildOptions{}, nil, ErrBuild},
		{"codec out of range", BuildOptions{Codec: 8}, testRecords(1), ErrBuild},
		{"negative codec", BuildOptions{Codec: -1}, testRecords(1), ErrBuild},
		{"codec without compress", BuildOptions{Codec: CodecGzip}, testRecords(1), ErrBuild},
		{"compress fails", BuildOptions{Codec: CodecLZ4, Compress: func([]byte) ([]byte, error) { return nil, boom }},
			testRecords(1), boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("prefix")
			out, err := AppendBatch(dst, tc.opts, tc.recs)
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrBuild) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want %v within ErrBuild", err, tc.wantErr)
			}
			if string(out) != "prefix" {
				t.Errorf("dst changed on error: %q", out)
			}
		})
	}
}

func TestAppendBatchKeepsPrefix(t *testing.T) {
	recs := testRecords(4)
	want := mustBuild(t, DefaultBuildOptions(), recs)
	out, err := AppendBatch([]byte("abc"), DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if string(out[:3]) != "abc" || !bytes.Equal(out[3:], want) {
		t.Error("AppendBatch differs from Build after the prefix")
	}
	// Reusing a dirty buffer must give the same bytes.
	dirty := bytes.Repeat([]byte{0xff}, len(want)+10)[:0]
	out, err = AppendBatch(dirty, DefaultBuildOptions(), recs)
	if err != nil || !bytes.Equal(out, want) {
		t.Errorf("AppendBatch into a reused buffer differs (err %v)", err)
	}
}

// TestKnownBatchBytes pins the encoding against bytes written out by hand
// from the Kafka RecordBatch v2 specification, with the CRC computed here.
func TestKnownBatchBytes(t *testing.T) {
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, // baseOffset 0
		0, 0, 0, 58, // batchLength: 49 header bytes after this field + 9 record bytes
		0xff, 0xff, 0xff, 0xff, // partitionLeaderEpoch -1
		2,          // magic
		0, 0, 0, 0, // crc, filled below
		0, 0, // attributes
		0, 0, 0, 0, // lastOffsetDelta
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // baseTimestamp 1700000000000
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // maxTimestamp
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId -1
		0xff, 0xff, // producerEpoch -1
		0xff, 0xff, 0xff, 0xff, // baseSequence -1
		0, 0, 0, 1, // recordCount
		0x10,      // record length 8, zigzag
		0x00,      // attributes
		0x00,      // timestampDelta 0
		0x00,      // offsetDelta 0
		0x02, 'k', // key length 1, zigzag
		0x02, 'v', // value length 1
		0x00, // header count
	}
	binary.BigEndian.PutUint32(want[17:21], crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli)))

	got := mustBuild(t, DefaultBuildOptions(), []Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1_700_000_000_000}})
	if !bytes.Equal(got, want) {
		t.Fatalf("Build\n got % x\nwant % x", got, want)
	}
	if _, n, err := Next(want, 0); err != nil || n != len(want) {
		t.Fatalf("Next: n %d, %v", n, err)
	}
	recs, err := Records(want, nil)
	if err != nil || len(recs) != 1 || string(recs[0].Key) != "k" || string(recs[0].Value) != "v" ||
		recs[0].Timestamp != 1_700_000_000_000 {
		t.Fatalf("Records: %+v, %v", recs, err)
	}
}

// Batches encoded by another implementation (sarama's record_test.go), so the
// CRC range, polynomial and varints are checked against code that is not ours.
var (
	saramaHeader = []byte{
		0, 0, 0, 0, 0, 0, 0, 0, // baseOffset
		0, 0, 0, 70, // batchLength
		0, 0, 0, 0, // partitionLeaderEpoch
		2,                // magic
		84, 121, 97, 253, // crc
		0, 0, // attributes
		0, 0, 0, 0, // lastOffsetDelta
		0, 0, 1, 88, 141, 205, 89, 56, // baseTimestamp 1479847795000
		0, 0, 0, 0, 0, 0, 0, 0, // maxTimestamp
		0, 0, 0, 0, 0, 0, 0, 0, // producerId
		0, 0, // producerEpoch
		0, 0, 0, 0, // baseSequence
		0, 0, 0, 1, // recordCount
	}
	saramaRecord = []byte{
		40, 0, 10, 0, // length 20, attributes, timestampDelta 5, offsetDelta 0
		8, 1, 2, 3, 4, // key
		6, 5, 6, 7, // value
		2,           // one header
		6, 8, 9, 10, // header key
		4, 11, 12, // header value
	}
	saramaGzip = []byte{
		31, 139, 8, 0, 0, 9, 110, 136, 0, 255, 0, 21, 0, 234, 255, 40, 0, 10, 0, 8, 1, 2,
		3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12, 3, 0, 173, 201, 88, 103, 21, 0, 0, 0,
	}
	saramaEmpty = []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 2,
		89, 95, 183, 221, // crc
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
)

func TestThirdPartyBatches(t *testing.T) {
	wantRecord := Record{
		TimestampDelta: 5, Timestamp: 1479847795005,
		Key: []byte{1, 2, 3, 4}, Value: []byte{5, 6, 7},
		Headers: []RecordHeader{{Key: "\x08\x09\x0a", Value: []byte{11, 12}}},
	}

	plain := slices.Concat(saramaHeader, saramaRecord)
	gz := slices.Concat(saramaHeader, saramaGzip)
	binary.BigEndian.PutUint32(gz[8:], 95)
	copy(gz[17:], []byte{231, 74, 206, 165})
	gz[22] = byte(CodecGzip)
	gunzip := func(c Codec, section []byte) ([]byte, error) {
		if c != CodecGzip {
			return nil, errors.New("not gzip")
		}
		r, err := gzip.NewReader(bytes.NewReader(section))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}

	for name, b := range map[string][]byte{"uncompressed": plain, "gzip": gz} {
		t.Run(name, func(t *testing.T) {
			h, n, err := Next(b, 0)
			if err != nil || n != len(b) {
				t.Fatalf("Next: n %d of %d, %v", n, len(b), err)
			}
			if err := ValidateProduced(h); err != nil {
				t.Fatal(err)
			}
			recs, err := Records(b, gunzip)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || !equalRecord(recs[0], wantRecord) || recs[0].TimestampDelta != 5 {
				t.Fatalf("got %+v\nwant %+v", recs, wantRecord)
			}
		})
	}

	t.Run("empty", func(t *testing.T) {
		h, n, err := Next(saramaEmpty, 0)
		if err != nil || n != MinBatchSize {
			t.Fatalf("Next: n %d, %v", n, err)
		}
		if err := ValidateProduced(h); !errors.Is(err, ErrBadRecords) {
			t.Errorf("ValidateProduced on an empty batch: %v", err)
		}
		recs, err := Records(saramaEmpty, nil)
		if err != nil || len(recs) != 0 {
			t.Errorf("Records: %v, %v", recs, err)
		}
	})
}

// enc concatenates its parts: an int becomes a zigzag varint, a string or
// []byte is copied.
func enc(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b = binary.AppendVarint(b, int64(p))
		case string:
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		default:
			panic("enc: bad part")
		}
	}
	return b
}

// rec encodes a record with the given body, prefixing its true length.
func rec(body ...any) []byte {
	bb := enc(body...)
	return enc(len(bb), bb)
}

// batchOf wraps a records section in a valid header.
func batchOf(section []byte, count, lastOffsetDelta int32) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(section))
	b = append(b, section...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = Magic
	binary.BigEndian.PutUint32(b[23:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	fixCRC(b)
	return b
}

func TestRecordsMalformed(t *testing.T) {
	ok0 := rec("\x00", 0, 0, -1, -1, 0) // attributes, ts, offset 0, null key, null value, no headers
	ok1 := rec("\x00", 0, 1, -1, -1, 0)
	tests := []struct {
		name    string
		section []byte
		count   int32
		last    int32
		wantErr bool
	}{
		{"valid", slices.Concat(ok0, ok1), 2, 1, false},
		{"compacted gaps are fine", slices.Concat(rec("\x00", 0, 2, -1, -1, 0), rec("\x00", 0, 5, -1, -1, 0)), 2, 7, false},
		{"no records section", nil, 1, 0, true},
		{"fewer records than count", ok0, 2, 1, true},
		{"trailing byte", slices.Concat(ok0, []byte{0}), 1, 0, true},
		{"trailing record", slices.Concat(ok0, ok1), 1, 1, true},
		{"length beyond section", enc(20, "\x00", 0, 0, -1, -1, 0), 1, 0, true},
		{"negative length", enc(-1, "\x00", 0, 0, -1, -1, 0, "\x00"), 1, 0, true},
		{"length shorter than contents", enc(5, "\x00", 0, 0, -1, -1, 0, "\x00"), 1, 0, true},
		{"length longer than contents", enc(7, "\x00", 0, 0, -1, -1, 0, "\x00"), 1, 0, true},
		{"zero length", enc(0, 0, 0, 0, 0, 0, 0), 1, 0, true},
		{"key length -2", rec("\x00", 0, 0, -2, -1, 0), 1, 0, true},
		{"key beyond record", rec("\x00", 0, 0, 9, "k", -1, 0), 1, 0, true},
		{"value beyond record", rec("\x00", 0, 0, -1, 4, "v"), 1, 0, true},
		{"negative header count", rec("\x00", 0, 0, -1, -1, -1), 1, 0, true},
		{"huge header count", rec("\x00", 0, 0, -1, -1, math.MaxInt32), 1, 0, true},
		{"null header key", rec("\x00", 0, 0, -1, -1, 1, -1, -1), 1, 0, true},
		{"header key beyond record", rec("\x00", 0, 0, -1, -1, 1, 5, "k", -1), 1, 0, true},
		{"header value -2", rec("\x00", 0, 0, -1, -1, 1, 1, "k", -2), 1, 0, true},
		{"missing header", rec("\x00", 0, 0, -1, -1, 2, 1, "k", -1), 1, 0, true},
		{"repeated offset delta", slices.Concat(ok0, ok0), 2, 1, true},
		{"decreasing offset delta", slices.Concat(ok1, ok0), 2, 1, true},
		{"offset delta above last", slices.Concat(ok0, rec("\x00", 0, 2, -1, -1, 0)), 2, 1, true},
		{"negative offset delta", rec("\x00", 0, -1, -1, -1, 0), 1, 0, true},
		{"offset delta over int32", rec("\x00", 0, math.MaxInt32+1, -1, -1, 0), 1, 0, true},
		{"six-byte varint", rec("\x00", 0, "\x80\x80\x80\x80\x80\x00", -1, -1, 0), 1, 0, true},
		{"truncated varint", enc(2, "\x00\x80"), 1, 0, true},
		{"overlong varlong", rec("\x00", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 0, -1, -1, 0), 1, 0, true},
		{"count cannot fit", ok0, math.MaxInt32, math.MaxInt32, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := batchOf(tc.section, tc.count, tc.last)
			if _, _, err := Next(b, 0); err != nil {
				t.Fatalf("test batch invalid: %v", err)
			}
			recs, err := Records(b, nil)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrBadRecords) || !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "record: ") {
					t.Errorf("err = %v, want ErrBadRecords", err)
				}
				return
			}
			if len(recs) != int(tc.count) {
				t.Errorf("%d records, want %d", len(recs), tc.count)
			}
		})
	}
}

func TestRecordsBadHeader(t *testing.T) {
	b := mustBuild(t, DefaultBuildOptions(), testRecords(3))
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", b[:40], ErrShort},
		{"torn batch", b[:len(b)-1], ErrShort},
		{"bad magic", func() []byte { c := bytes.Clone(b); c[16] = 0; return c }(), ErrBadMagic},
	}
	for _, tc := range tests {
		if _, err := Records(tc.b, nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
