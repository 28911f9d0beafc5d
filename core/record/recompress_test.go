package record

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
)

func gzipSection(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzipSection(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// TestRecompress: none -> gzip -> none keeps every header field but the codec
// bits, length and CRC, and every record; the results pass Next's checks.
func TestRecompress(t *testing.T) {
	opts := DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 42, 3, 17
	opts.Transactional = true
	recs := []Record{
		{Key: []byte("k1"), Value: bytes.Repeat([]byte("v"), 500), Timestamp: 1000,
			Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: []byte("second"), Timestamp: 1007},
	}
	plain, err := Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(plain, 99)
	gz, err := Recompress(nil, plain, CodecGzip, nil, gzipSection)
	if err != nil {
		t.Fatalf("Recompress to gzip: %v", err)
	}
	h, n, err := Next(gz, len(gz))
	if err != nil || n != len(gz) {
		t.Fatalf("Next(gzip batch) = %d, %v", n, err)
	}
	if h.Codec() != CodecGzip || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 ||
		h.BaseSequence != 17 || h.BaseOffset != 99 || h.RecordCount != 2 || h.MaxTimestamp != 1007 {
		t.Fatalf("gzip header = %+v", h)
	}
	if len(gz) >= len(plain) {
		t.Errorf("gzip batch %d bytes, plain %d: repetitive value did not shrink", len(gz), len(plain))
	}
	got, err := Records(gz, func(_ Codec, s []byte) ([]byte, error) { return gunzipSection(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0].Value, recs[0].Value) || got[1].Key != nil || got[0].Headers[0].Key != "h" {
		t.Fatalf("records after recompression: %+v", got)
	}
	back, err := Recompress([]byte("prefix"), gz, CodecNone, gunzipSection, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back[len("prefix"):], plain) {
		t.Fatalf("gzip -> none is not the original batch")
	}
}

// TestRecompressErrors: a decompressor failure or a section that does not hold
// the header's records is ErrBadRecords (corrupt), nothing is appended to dst.
func TestRecompressErrors(t *testing.T) {
	plain, err := Build(DefaultBuildOptions(), []Record{{Value: []byte("v"), Timestamp: 1}})
	if err != nil {
		t.Fatal(err)
	}
	gz, err := Recompress(nil, plain, CodecGzip, nil, gzipSection)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	dst := []byte("keep")
	out, err := Recompress(dst, gz, CodecNone, func([]byte) ([]byte, error) { return nil, boom }, nil)
	if !errors.Is(err, ErrBadRecords) || !errors.Is(err, boom) || !errors.Is(err, ErrCorrupt) || string(out) != "keep" {
		t.Fatalf("decompress failure: %q, %v", out, err)
	}
	_, err = Recompress(nil, gz, CodecNone, func([]byte) ([]byte, error) { return []byte{1, 2, 3}, nil }, nil)
	if !errors.Is(err, ErrBadRecords) {
		t.Fatalf("garbage section: %v", err)
	}
	_, err = Recompress(nil, plain, CodecGzip, nil, func([]byte) ([]byte, error) { return nil, boom })
	if !errors.Is(err, ErrBuild) || !errors.Is(err, boom) {
		t.Fatalf("compress failure: %v", err)
	}
	if _, err := Recompress(nil, plain[:30], CodecNone, nil, nil); err == nil {
		t.Fatal("short batch accepted")
	}
}
