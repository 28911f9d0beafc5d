package logs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// values decodes a stored batch with the built-in codecs.
func values(t *testing.T, b []byte) []string {
	t.Helper()
	recs, err := record.Records(b, func(c record.Codec, s []byte) ([]byte, error) {
		cd, err := codec.New(codec.ID(c).String())
		if err != nil {
			return nil, err
		}
		resp, err := cd.Decompress(ctx, codec.DecompressRequest{Compressed: s})
		return resp.Records, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// compressed builds a batch of n records under codec spec.
func compressed(t *testing.T, spec, tag string, n int) []byte {
	t.Helper()
	c, err := codec.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := record.Recompress(nil, testbatch.Tagged(tag, n), record.Codec(c.ID()), nil, func(s []byte) ([]byte, error) {
		resp, err := c.Compress(ctx, codec.CompressRequest{Records: s})
		return resp.Compressed, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompressionType: a topic's compression.type recompresses batches under
// other codecs, keeps batches already under its own byte for byte, and
// "producer" keeps everything as sent.
func TestCompressionType(t *testing.T) {
	clock := newClock()
	m := newManager(t, vfs.NewMem(), clock)
	for i, tc := range []struct {
		ctype string
		want  codec.ID
	}{
		{"gzip", codec.Gzip}, {"zstd:level=4", codec.Zstd}, {"uncompressed", codec.None}, {"producer", codec.Snappy},
		{"lz4", codec.LZ4}, {"snappy", codec.Snappy},
	} {
		topic := "t-" + fmt.Sprint(i)
		p := openPartition(t, m, topic, topicConfig(t, clock, nil, map[string]string{topicconfig.CompressionType: tc.ctype}, false))
		inputs := [][]byte{testbatch.Tagged("plain", 3), compressed(t, "snappy", "snappy", 2), compressed(t, "gzip", "gz", 1)}
		for _, in := range inputs {
			if _, err := p.Append(ctx, bytes.Clone(in)); err != nil {
				t.Fatalf("%s: append: %v", tc.ctype, err)
			}
		}
		got := logtest.Batches(t, p.Log())
		if len(got) != 3 {
			t.Fatalf("%s: %d batches stored", tc.ctype, len(got))
		}
		wantVals := [][]string{{"plain-0", "plain-1", "plain-2"}, {"snappy-0", "snappy-1"}, {"gz-0"}}
		for i, b := range got {
			h, _ := record.ParseHeader(b)
			want := tc.want
			if tc.ctype == "producer" {
				h0, _ := record.ParseHeader(inputs[i])
				want = codec.ID(h0.Codec())
			}
			if codec.ID(h.Codec()) != want {
				t.Errorf("%s: batch %d stored under %s, want %s", tc.ctype, i, codec.ID(h.Codec()), want)
			}
			if v := values(t, b); fmt.Sprint(v) != fmt.Sprint(wantVals[i]) {
				t.Errorf("%s: batch %d values %v, want %v", tc.ctype, i, v, wantVals[i])
			}
			// A batch already under the target id is kept byte for byte
			// (but for its offset and leader epoch).
			if h0, _ := record.ParseHeader(inputs[i]); h0.Codec() == h.Codec() && !bytes.Equal(b[record.HeaderSize:], inputs[i][record.HeaderSize:]) {
				t.Errorf("%s: batch %d under its target codec was rewritten", tc.ctype, i)
			}
		}
	}
}

// TestCompressionTypeErrors: a bad compression.type is refused when the
// topic's configs are validated; a batch the broker cannot decompress
// (custom id, garbage) appends nothing.
func TestCompressionTypeErrors(t *testing.T) {
	if _, err := topicconfig.Normalize(map[string]string{topicconfig.CompressionType: "zsdt"}, topicconfig.BuiltinPlugins{}); !errors.Is(err, topicconfig.ErrInvalidConfig) {
		t.Fatalf("compression.type=zsdt: %v", err)
	}
	p := topicPartition(t, nil, newClock(), map[string]string{topicconfig.CompressionType: "gzip"})
	custom := testbatch.Tagged("x", 1)
	custom[22] |= 5 // attributes low byte: codec id 5
	fixCRC(custom)
	if _, err := p.Append(ctx, custom); !errors.Is(err, recompress.ErrUnsupportedCompression) {
		t.Fatalf("custom codec id into a gzip topic: %v", err)
	}
	garbage := testbatch.Tagged("y", 1)
	garbage[22] |= byte(codec.Snappy)
	fixCRC(garbage)
	if _, err := p.Append(ctx, garbage); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("snappy batch whose section is not snappy: %v", err)
	}
	if end := p.Log().EndOffset(); end != 0 {
		t.Fatalf("end offset %d after refused appends", end)
	}
}

// fixCRC recomputes a batch's CRC after a test edited its attributes.
func fixCRC(b []byte) {
	sum := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], sum)
}

// flakyPlugins fails every spec once broken is set: a plugin that is gone.
type flakyPlugins struct{ broken bool }

func (f *flakyPlugins) FlushPolicy(spec string) (flushpolicy.Policy, error) {
	if f.broken {
		return nil, errors.New("plugin binary missing")
	}
	return flushpolicy.New(spec)
}

func (f *flakyPlugins) Codec(spec string) (codec.Codec, error) {
	if f.broken {
		return nil, errors.New("plugin binary missing")
	}
	return codec.New(spec)
}

// TestPluginGoneAtReopen: a topic whose plugins cannot be built when its
// partitions reopen (through a new Manager on the same FS) still opens, its
// data stays readable; appends fsync every batch (flush policy) or fail with
// recompress.ErrCodecUnavailable (codec).
func TestPluginGoneAtReopen(t *testing.T) {
	fsys := vfs.NewMem()
	clock := newClock()
	pl := &flakyPlugins{}
	zConfigs := map[string]string{topicconfig.CompressionType: "zstd"}
	fConfigs := map[string]string{topicconfig.FlushPolicy: "never"}
	m := newManager(t, fsys, clock)
	z := openPartition(t, m, "z", topicConfig(t, clock, pl, zConfigs, false))
	f := openPartition(t, m, "f", topicConfig(t, clock, pl, fConfigs, false))
	if _, err := z.Append(ctx, testbatch.Tagged("a", 2)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Partition{z, f} {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	pl.broken = true
	m = newManager(t, fsys, clock)
	z = openPartition(t, m, "z", topicConfig(t, clock, pl, zConfigs, true))
	f = openPartition(t, m, "f", topicConfig(t, clock, pl, fConfigs, true))
	if _, err := z.Append(ctx, testbatch.Tagged("b", 1)); !errors.Is(err, recompress.ErrCodecUnavailable) {
		t.Fatalf("append with the codec gone: %v", err)
	}
	if got := logtest.Batches(t, z.Log()); len(got) != 1 || fmt.Sprint(values(t, got[0])) != "[a-0 a-1]" {
		t.Fatalf("data written before the restart: %d batches", len(got))
	}
	// The plugin comes back: within recompress.RetryInterval appends still fail fast,
	// after it the codec is built again and appends work.
	pl.broken = false
	if _, err := z.Append(ctx, testbatch.Tagged("b", 1)); !errors.Is(err, recompress.ErrCodecUnavailable) {
		t.Fatalf("append right after the plugin came back (retry not due): %v", err)
	}
	clock.Advance(recompress.RetryInterval)
	if _, err := z.Append(ctx, testbatch.Tagged("b", 1)); err != nil {
		t.Fatalf("append after the retry delay: %v", err)
	}
	res, err := f.Append(ctx, testbatch.Tagged("c", 1))
	if err != nil {
		t.Fatal(err)
	}
	if f.Log().FlushedOffset() < res.NextOffset {
		t.Fatalf("flush policy gone: append not fsynced (flushed %d, end %d)", f.Log().FlushedOffset(), res.NextOffset)
	}
}

// failingCodec fails every call with err; its id is gzip's.
type failingCodec struct{ err error }

func (failingCodec) ID() codec.ID { return codec.Gzip }
func (c failingCodec) Compress(context.Context, codec.CompressRequest) (codec.CompressResponse, error) {
	return codec.CompressResponse{}, c.err
}
func (c failingCodec) Decompress(context.Context, codec.DecompressRequest) (codec.DecompressResponse, error) {
	return codec.DecompressResponse{}, c.err
}

type fixedCodecPlugins struct{ c codec.Codec }

func (fixedCodecPlugins) FlushPolicy(spec string) (flushpolicy.Policy, error) {
	return flushpolicy.New(spec)
}
func (p fixedCodecPlugins) Codec(string) (codec.Codec, error) { return p.c, nil }

// TestRecompressCodecFailureIsNotCorruption: a codec that fails (a plugin
// crashed, the request timed out) is not the producer's bad input, so the
// error is the codec's, not record.ErrCorrupt (CORRUPT_MESSAGE), and nothing
// is appended.
func TestRecompressCodecFailureIsNotCorruption(t *testing.T) {
	for _, cause := range []error{codec.ErrPluginFailed, context.DeadlineExceeded} {
		clock := newClock()
		pl := fixedCodecPlugins{failingCodec{cause}}
		p := openPartition(t, newManager(t, vfs.NewMem(), clock), "t",
			topicConfig(t, clock, pl, map[string]string{topicconfig.CompressionType: "whatever"}, false))
		_, err := p.Append(ctx, testbatch.Tagged("a", 1))
		if !errors.Is(err, cause) || errors.Is(err, record.ErrCorrupt) {
			t.Errorf("codec failing with %v: append error %v", cause, err)
		}
		if p.Log().EndOffset() != 0 {
			t.Errorf("codec failing with %v: something was appended", cause)
		}
		p.Close()
	}
}
