package codec_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/golang/snappy"
	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
)

// specs are the built-ins as the conformance suite runs them, at their
// default levels. Levels change only the encoder's effort, not the format
// or the code paths around it; TestNewIDsAndStrings round-trips the
// extreme levels. (The suite at zstd level 4 alone takes ~10 s under -race.)
var specs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func mustNew(t testing.TB, s string) codec.Codec {
	t.Helper()
	c, err := codec.New(s)
	if err != nil {
		t.Fatalf("New(%q): %v", s, err)
	}
	return c
}

func TestConformance(t *testing.T) {
	for _, s := range specs {
		t.Run(s, func(t *testing.T) {
			codectest.Run(t, func(t *testing.T) codec.Codec { return mustNew(t, s) })
		})
	}
}

func TestNamesAndInfos(t *testing.T) {
	want := []string{"gzip", "lz4", "none", "snappy", "zstd"}
	if got := codec.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, info := range codec.Infos() {
		if info.Usage == "" || info.Example == "" || info.Summary == "" {
			t.Errorf("Info %q is missing a field: %+v", info.Name, info)
		}
		if _, err := codec.New(info.Example); err != nil {
			t.Errorf("Info %q: its example %q does not build: %v", info.Name, info.Example, err)
		}
	}
}

// TestNewIDsAndStrings: each spec builds the codec with the right id, and
// String gives back a spec that builds an equal codec (== on the value, and
// byte-identical output).
func TestNewIDsAndStrings(t *testing.T) {
	cases := []struct {
		spec, str string
		id        codec.ID
	}{
		{"none", "none", codec.None},
		{"gzip", "gzip:level=6", codec.Gzip},
		{" gzip : level = 1 ", "gzip:level=1", codec.Gzip},
		{"gzip:level=9", "gzip:level=9", codec.Gzip},
		{"snappy", "snappy", codec.Snappy},
		{"lz4", "lz4:level=0", codec.LZ4},
		{"lz4:level=9", "lz4:level=9", codec.LZ4},
		{"zstd", "zstd:level=2", codec.Zstd},
		{"zstd:level=1", "zstd:level=1", codec.Zstd},
		{"zstd:level=4", "zstd:level=4", codec.Zstd},
	}
	data := codectest.JSONLogPayload(1, 100<<10)
	for _, tc := range cases {
		c := mustNew(t, tc.spec)
		if c.ID() != tc.id {
			t.Errorf("New(%q).ID() = %v, want %v", tc.spec, c.ID(), tc.id)
		}
		str := c.(interface{ String() string }).String()
		if str != tc.str {
			t.Errorf("New(%q).String() = %q, want %q", tc.spec, str, tc.str)
			continue
		}
		again := mustNew(t, str)
		if again != c {
			t.Errorf("New(%q) = %#v, not equal to New(%q) = %#v", str, again, tc.spec, c)
		}
		a, b := compressCtx(t, c, data), compressCtx(t, again, data)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two equal codecs compress the same input differently", str)
		}
		if out, err := decompressCtx(t, c, a, len(data)); err != nil || !bytes.Equal(out, data) {
			t.Errorf("%s: round trip: %d bytes, %v", str, len(out), err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		spec string
		want error
		in   string // the message names this
	}{
		{"brotli", codec.ErrUnknownCodec, "brotli"},
		{"./plugins/weir-codec-s2", codec.ErrUnknownCodec, "weir-codec-s2"},
		{"", codec.ErrInvalidSpec, "no name"},
		{"gzip:level=0", codec.ErrInvalidSpec, "level"},
		{"gzip:level=10", codec.ErrInvalidSpec, "1..9"},
		{"gzip:level=fast", codec.ErrInvalidSpec, "fast"},
		{"gzip:lvl=3", codec.ErrInvalidSpec, "lvl"},
		{"lz4:level=-1", codec.ErrInvalidSpec, "0..9"},
		{"lz4:level=10", codec.ErrInvalidSpec, "0..9"},
		{"zstd:level=0", codec.ErrInvalidSpec, "1..4"},
		{"zstd:level=5", codec.ErrInvalidSpec, "1..4"},
		{"snappy:level=1", codec.ErrInvalidSpec, "takes none"},
		{"none:x=1", codec.ErrInvalidSpec, "takes none"},
		{"zstd:level=1,level=2", codec.ErrInvalidSpec, "twice"},
	}
	for _, tc := range cases {
		c, err := codec.New(tc.spec)
		if !errors.Is(err, tc.want) || c != nil {
			t.Errorf("New(%q) = %v, %v; want an error wrapping %v", tc.spec, c, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.in) {
			t.Errorf("New(%q): error %q does not mention %q", tc.spec, err, tc.in)
		}
	}
}

func TestRegisterCustom(t *testing.T) {
	codec.Register(codec.Info{Name: "test-custom7"}, func(map[string]string) (codec.Codec, error) {
		return idCodec{7}, nil
	})
	codec.Register(codec.Info{Name: "test-bad-id"}, func(map[string]string) (codec.Codec, error) {
		return idCodec{8}, nil
	})
	codec.Register(codec.Info{Name: "test-nil"}, func(map[string]string) (codec.Codec, error) {
		return nil, nil
	})
	if c, err := codec.New("test-custom7"); err != nil || c.ID() != 7 {
		t.Errorf("New(test-custom7) = %v, %v", c, err)
	}
	for _, s := range []string{"test-bad-id", "test-nil"} {
		if c, err := codec.New(s); !errors.Is(err, codec.ErrInvalidSpec) || c != nil {
			t.Errorf("New(%q) = %v, %v; want an error wrapping ErrInvalidSpec", s, c, err)
		}
	}
	if !slices.Contains(codec.Names(), "test-custom7") {
		t.Errorf("Names() = %v, missing test-custom7", codec.Names())
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	codec.Register(codec.Info{Name: "gzip"}, func(map[string]string) (codec.Codec, error) { return idCodec{1}, nil })
}

// idCodec is a stand-in with a chosen id; it does not compress.
type idCodec struct{ id codec.ID }

func (c idCodec) ID() codec.ID { return c.id }
func (idCodec) Compress(_ context.Context, r codec.CompressRequest) (codec.CompressResponse, error) {
	return codec.CompressResponse{Compressed: slices.Clone(r.Records)}, nil
}
func (idCodec) Decompress(_ context.Context, r codec.DecompressRequest) (codec.DecompressResponse, error) {
	return codec.DecompressResponse{Records: slices.Clone(r.Compressed)}, nil
}

func TestStandardAndDecompress(t *testing.T) {
	data := codectest.RecordsSection(1, 50)
	for id := codec.ID(0); id <= codec.Zstd; id++ {
		c := codec.Standard(id)
		if c == nil || c.ID() != id {
			t.Fatalf("Standard(%d) = %v", id, c)
		}
		def := mustNew(t, id.String())
		if c != def {
			t.Errorf("Standard(%v) = %v, want the default New(%q) = %v", id, c, id.String(), def)
		}
		out, err := codec.Decompress(context.Background(), id, compressCtx(t, c, data), len(data))
		if err != nil || !bytes.Equal(out, data) {
			t.Errorf("Decompress(%v): %d bytes, %v", id, len(out), err)
		}
	}
	for _, id := range []codec.ID{5, 6, 7, 8, -1} {
		if c := codec.Standard(id); c != nil {
			t.Errorf("Standard(%d) = %v, want nil", id, c)
		}
		if _, err := codec.Decompress(context.Background(), id, data, 0); !errors.Is(err, codec.ErrUnknownCodec) {
			t.Errorf("Decompress(id %d): %v, want an error wrapping ErrUnknownCodec", id, err)
		}
	}
	// Built-ins check ctx on entry: a cancelled ctx always fails.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for id := codec.ID(0); id <= codec.Zstd; id++ {
		if _, err := codec.Decompress(ctx, id, data, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("Decompress(%v) with a cancelled ctx: %v, want context.Canceled", id, err)
		}
		if _, err := codec.Standard(id).Compress(ctx, codec.CompressRequest{Records: data}); !errors.Is(err, context.Canceled) {
			t.Errorf("%v: Compress with a cancelled ctx: %v, want context.Canceled", id, err)
		}
	}
}

func compressCtx(t testing.TB, c codec.Codec, data []byte) []byte {
	t.Helper()
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: data})
	if err != nil {
		t.Fatalf("%v Compress: %v", c, err)
	}
	return resp.Compressed
}

func decompressCtx(t testing.TB, c codec.Codec, data []byte, maxSize int) ([]byte, error) {
	t.Helper()
	resp, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: data, MaxSize: maxSize})
	return resp.Records, err
}

// TestSnappyFormats: Compress writes xerial framing (magic, versions 1/1,
// 32 KiB blocks) that klauspost's xerial reader, the one sarama uses,
// decodes; Decompress reads both xerial (as sarama and the JVM write it) and
// raw snappy (as franz-go and librdkafka write it).
func TestSnappyFormats(t *testing.T) {
	c := codec.Standard(codec.Snappy)
	data := codectest.JSONLogPayload(3, 100<<10) // 4 blocks: 3 full, 1 partial
	comp := compressCtx(t, c, data)
	wantHeader := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(comp, wantHeader) {
		t.Fatalf("snappy output starts % x, want the xerial header % x", comp[:min(16, len(comp))], wantHeader)
	}
	blocks := 0
	for rem := comp[16:]; len(rem) > 0; blocks++ {
		n := binary.BigEndian.Uint32(rem)
		rem = rem[4+n:]
	}
	if blocks != 4 {
		t.Errorf("%d xerial blocks for %d bytes, want 4 of at most 32 KiB", blocks, len(data))
	}
	if got, err := xerial.Decode(comp); err != nil || !bytes.Equal(got, data) {
		t.Errorf("klauspost xerial.Decode of weir's output: %d bytes, %v", len(got), err)
	}

	for name, in := range map[string][]byte{
		"raw (franz-go, librdkafka)": rawSnappy(data),
		"xerial (sarama, JVM)":       xerial.Encode(nil, data),
		"xerial, one 100 KiB block":  xerialOneBlock(data),
	} {
		got, err := decompressCtx(t, c, in, len(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
		if _, err := decompressCtx(t, c, in, len(data)-1); !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("%s with MaxSize one short: %v, want ErrTooLarge", name, err)
		}
	}
	// Empty input compresses to raw snappy's one zero byte.
	if comp := compressCtx(t, c, nil); !bytes.Equal(comp, []byte{0}) {
		t.Errorf("snappy of nothing = % x, want 00", comp)
	}
	// A raw snappy preamble claiming far more than the input could hold is
	// corrupt before anything is allocated.
	claim := append(binary.AppendUvarint(nil, 1<<31), 0, 0, 0)
	for name, in := range map[string][]byte{"raw": claim, "xerial": append(binary.BigEndian.AppendUint32(bytes.Clone(wantHeader), uint32(len(claim))), claim...)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decompressCtx(t, c, in, 0)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("%s snappy claiming 2 GiB from 8 bytes: %v, want ErrCorrupt", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s snappy claiming 2 GiB from 8 bytes: allocated %d bytes before refusing", name, alloc)
		}
	}
}

// rawSnappy is one snappy block of everything, as franz-go's
// s2.EncodeSnappy and librdkafka write it.
func rawSnappy(data []byte) []byte { return snappy.Encode(nil, data) }

// xerialOneBlock frames data as one xerial block, whatever its size (the
// format allows it; writers cut at 32 KiB).
func xerialOneBlock(data []byte) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	block := snappy.Encode(nil, data)
	out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
	return append(out, block...)
}

// TestLZ4Frame: the frame descriptor is what the JVM reader accepts
// (version 1, independent blocks, no block checksum, content checksum, no
// content size, 64 KiB blocks), and Decompress reads pierrec's other
// settings (4 MiB blocks, block checksums, content size, no checksum) and
// concatenated frames.
func TestLZ4Frame(t *testing.T) {
	c := codec.Standard(codec.LZ4)
	data := codectest.JSONLogPayload(4, 200<<10)
	comp := compressCtx(t, c, data)
	if got := binary.LittleEndian.Uint32(comp); got != 0x184D2204 {
		t.Fatalf("lz4 magic %#x, want 0x184D2204", got)
	}
	if flg, bd := comp[4], comp[5]; flg != 0x64 || bd != 0x40 {
		t.Errorf("FLG %#02x BD %#02x, want 0x64 (v1, independent, content checksum) and 0x40 (64 KiB)", flg, bd)
	}
	other := func(opts ...lz4.Option) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(opts...); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	franz := other() // pierrec's defaults: 4 MiB blocks, content checksum
	for name, in := range map[string][]byte{
		"4 MiB blocks (franz-go)":     franz,
		"block checksums":             other(lz4.BlockChecksumOption(true), lz4.ChecksumOption(false)),
		"content size":                other(lz4.SizeOption(uint64(len(data)))),
		"two frames, split mid-input": append(lz4Frame(t, data[:1000]), lz4Frame(t, data[1000:])...),
	} {
		got, err := decompressCtx(t, c, in, len(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := decompressCtx(t, c, append(bytes.Clone(comp), 1, 2, 3, 4, 5, 6, 7, 8), 0); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("lz4 frame followed by garbage: %v, want ErrCorrupt", err)
	}
}

func lz4Frame(t *testing.T, data []byte) []byte {
	t.Helper()
	return compressCtx(t, codec.Standard(codec.LZ4), data)
}

// TestZstdFrames: Decompress reads a frame with its content size (as
// franz-go and sarama write it), a streamed frame without one (as the JVM
// writes it), and concatenated frames, and bounds each under MaxSize.
func TestZstdFrames(t *testing.T) {
	c := codec.Standard(codec.Zstd)
	data := codectest.JSONLogPayload(5, 300<<10)
	withSize := compressCtx(t, c, data)
	var h zstd.Header
	if err := h.Decode(withSize); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(data)) {
		t.Errorf("weir's zstd frame header %+v, %v: want content size %d", h, err, len(data))
	}
	streamed := zstdStream(t, data)
	if err := h.Decode(streamed); err != nil || h.HasFCS {
		t.Fatalf("streamed frame header %+v, %v: want no content size", h, err)
	}
	twoFrames := append(compressCtx(t, c, data[:1000]), compressCtx(t, c, data[1000:])...)
	for name, in := range map[string][]byte{"content size": withSize, "streamed": streamed, "two frames": twoFrames} {
		got, err := decompressCtx(t, c, in, len(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
		if _, err := decompressCtx(t, c, in, len(data)-1); !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("%s with MaxSize one short: %v, want ErrTooLarge", name, err)
		}
	}
	if _, err := decompressCtx(t, c, append(bytes.Clone(withSize), 1, 2, 3, 4, 5, 6, 7, 8), 0); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("zstd frame followed by garbage: %v, want ErrCorrupt", err)
	}
	// A frame header claiming 1 TiB (single segment, 8-byte content size)
	// with no limit is corrupt before the output is allocated.
	claim := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, 1<<40)
	claim = append(claim, 1, 0, 0) // an empty last raw block
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decompressCtx(t, c, claim, 0)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("zstd frame claiming 1 TiB: %v, want ErrCorrupt", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("zstd frame claiming 1 TiB: allocated %d bytes before refusing", alloc)
	}
}

func zstdStream(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipMembers: Decompress reads concatenated members (Java's
// GZIPInputStream does) and rejects trailing garbage.
func TestGzipMembers(t *testing.T) {
	c := codec.Standard(codec.Gzip)
	data := codectest.JSONLogPayload(6, 50<<10)
	var two bytes.Buffer
	for _, part := range [][]byte{data[:7000], data[7000:]} {
		w := kgzip.NewWriter(&two)
		if _, err := w.Write(part); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := decompressCtx(t, c, two.Bytes(), len(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("two gzip members: %d bytes, %v", len(got), err)
	}
	if _, err := decompressCtx(t, c, two.Bytes(), len(data)-1); !errors.Is(err, codec.ErrTooLarge) {
		t.Errorf("two gzip members, MaxSize one short: %v, want ErrTooLarge", err)
	}
	comp := compressCtx(t, c, data)
	if comp[0] != 0x1f || comp[1] != 0x8b || comp[2] != 8 {
		t.Errorf("gzip output starts % x, want 1f 8b 08 (RFC 1952, deflate)", comp[:3])
	}
	if _, err := decompressCtx(t, c, append(comp, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("gzip member followed by garbage: %v, want ErrCorrupt", err)
	}
}

// TestEmptyAndTruncated: an empty section, and every truncation of a small
// output, is ErrCorrupt for every compressing built-in, except a snappy
// stream cut between xerial blocks, which the format cannot tell from a
// shorter stream.
func TestEmptyAndTruncated(t *testing.T) {
	data := codectest.RecordsSection(7, 12)
	for id := codec.Gzip; id <= codec.Zstd; id++ {
		c := codec.Standard(id)
		if _, err := decompressCtx(t, c, nil, 0); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("%v: empty input: %v, want ErrCorrupt", id, err)
		}
		comp := compressCtx(t, c, data)
		// xerial framing has no end marker: a cut between blocks is a
		// shorter valid stream (the batch CRC catches such a tear).
		boundaries := map[int]bool{}
		if id == codec.Snappy {
			for at := 16; at < len(comp); at += 4 + int(binary.BigEndian.Uint32(comp[at:])) {
				boundaries[at] = true
			}
		}
		for cut := 1; cut < len(comp); cut++ {
			if boundaries[cut] {
				continue
			}
			if got, err := decompressCtx(t, c, comp[:cut], 0); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%v: output cut to %d of %d bytes: %d bytes out, error %v; want ErrCorrupt", id, cut, len(comp), len(got), err)
				break
			}
		}
	}
}

// TestBombsStopEarly: decompressing 16 MiB of zeros under a 1 MiB limit
// fails with ErrTooLarge having allocated a few MiB, not the whole output,
// for every codec and every way a client may have framed it.
func TestBombsStopEarly(t *testing.T) {
	zeros := make([]byte, 16<<20)
	bombs := map[string][]byte{
		"zstd streamed (no content size)": zstdStream(t, zeros),
		"snappy raw":                      rawSnappy(zeros),
	}
	for id := codec.Gzip; id <= codec.Zstd; id++ {
		bombs[id.String()] = compressCtx(t, codec.Standard(id), zeros)
	}
	zeros = nil
	for name, bomb := range bombs {
		id := map[string]codec.ID{"gzip": codec.Gzip, "snappy": codec.Snappy, "lz4": codec.LZ4, "zstd": codec.Zstd}[strings.Fields(name)[0]]
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := codec.Decompress(context.Background(), id, bomb, 1<<20)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("%s bomb (%d bytes): %v, want ErrTooLarge", name, len(bomb), err)
		}
		// Generous: the output up to the limit, growth slack, and a
		// decoder's tables if the pool had to build one.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
			t.Errorf("%s bomb: allocated %d MiB to refuse a 1 MiB limit", name, alloc>>20)
		}
	}
}
