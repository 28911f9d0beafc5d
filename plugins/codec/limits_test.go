package codec_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/weir-broker/weir/plugins/codec"
)

// allocated returns the bytes the process allocated while f ran (TotalAlloc
// counts bytes, which testing.AllocsPerRun does not). These tests do not run
// in parallel, so the count is theirs up to noise; bounds leave a wide margin.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// zstdFrame is a zstd frame header with descriptor fhd (and a window
// descriptor wd, unless fhd marks a single segment), a content size field if
// fcs is not nil, and one last raw block holding content.
func zstdFrame(fhd byte, wd byte, fcs []byte, content []byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, fhd}
	if fhd&0x20 == 0 {
		f = append(f, wd)
	}
	f = append(f, fcs...)
	bh := uint32(len(content))<<3 | 1 // raw, last
	f = append(f, byte(bh), byte(bh>>8), byte(bh>>16))
	return append(f, content...)
}

// TestZstdHugeWindowAllocatesLittle: a 20-byte frame without a content size
// that declares a 128 MiB window decodes without allocating that window,
// whatever the limit, so pooled decoders keep nothing big either. (The
// streaming decoder allocated the window up front: 128 MiB for 11 bytes.)
func TestZstdHugeWindowAllocatesLittle(t *testing.T) {
	c := codec.Standard(codec.Zstd)
	hello := []byte("hello world")
	frames := map[string][]byte{
		"128 MiB window": append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88, 0x59, 0x00, 0x00}, hello...),
		"64 MiB window":  zstdFrame(0, 0x80, nil, hello),
	}
	if _, err := decompressCtx(t, c, frames["64 MiB window"], 0); err != nil { // build a pooled decoder first
		t.Fatal(err)
	}
	for name, in := range frames {
		for _, maxSize := range []int{1 << 20, 64 << 20, 0} {
			var got []byte
			var err error
			alloc := allocated(func() { got, err = decompressCtx(t, c, in, maxSize) })
			if err != nil || !bytes.Equal(got, hello) {
				t.Errorf("%s, MaxSize %d: %q, %v; want %q", name, maxSize, got, err, hello)
			}
			if alloc > 4<<20 {
				t.Errorf("%s, MaxSize %d: allocated %.1f MiB to decode 11 bytes", name, maxSize, float64(alloc)/(1<<20))
			}
		}
	}
	// A window over zstd's own limit (windowLog 28) is refused, as
	// libzstd and the JVM refuse it.
	if _, err := decompressCtx(t, c, zstdFrame(0, 0x90, nil, hello), 0); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("256 MiB window: %v, want ErrCorrupt", err)
	}
}

// TestZstdDeclaredSizeNotTrusted: a 2 KiB frame that declares 64 MiB (within
// the 32768x an RLE frame can reach) but holds 2100 bytes is refused having
// allocated about the up-front budget, not the 64 MiB it claims.
func TestZstdDeclaredSizeNotTrusted(t *testing.T) {
	c := codec.Standard(codec.Zstd)
	fcs := binary.LittleEndian.AppendUint32(nil, 64<<20)
	liar := zstdFrame(0xa0, 0, fcs, bytes.Repeat([]byte("x"), 2100)) // single segment, 4-byte size
	for _, maxSize := range []int{64 << 20, 0} {
		var err error
		alloc := allocated(func() { _, err = decompressCtx(t, c, liar, maxSize) })
		if !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("MaxSize %d: %v, want ErrCorrupt", maxSize, err)
		}
		if alloc > 8<<20 {
			t.Errorf("MaxSize %d: allocated %.1f MiB for a 2 KiB frame claiming 64 MiB", maxSize, float64(alloc)/(1<<20))
		}
	}
}

// TestZstdHighRatioFrames: honest frames whose declared size is over the
// up-front budget (zeros compress ~30000x) decode exactly, stop at the limit,
// and mix with other frames; the single-segment one has its window derived
// from its size, the other an 8 MiB window, both with checksums.
func TestZstdHighRatioFrames(t *testing.T) {
	c := codec.Standard(codec.Zstd)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	twoMiB := make([]byte, 2<<20)
	twoMiB[12345] = 7
	sixteenMiB := make([]byte, 16<<20)
	sixteenMiB[len(sixteenMiB)-1] = 9
	for name, data := range map[string][]byte{"2 MiB single segment": twoMiB, "16 MiB, 8 MiB window": sixteenMiB} {
		frame := enc.EncodeAll(data, nil)
		var h zstd.Header
		if err := h.Decode(frame); err != nil || !h.HasFCS || uint64(len(frame))*16+1<<20 > h.FrameContentSize {
			t.Fatalf("%s: frame of %d bytes, header %+v, %v: want a declared size over the up-front budget", name, len(frame), h, err)
		}
		if got, err := decompressCtx(t, c, frame, len(data)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
		if _, err := decompressCtx(t, c, frame, len(data)-1); !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("%s, MaxSize one short: %v, want ErrTooLarge", name, err)
		}
		small := compressCtx(t, c, []byte("first"))
		two := append(bytes.Clone(small), frame...)
		if got, err := decompressCtx(t, c, two, 0); err != nil || !bytes.Equal(got, append([]byte("first"), data...)) {
			t.Errorf("%s after a small frame: %d bytes, %v", name, len(got), err)
		}
		if _, err := decompressCtx(t, c, two, len(data)+4); !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("%s after a small frame, MaxSize one short: %v, want ErrTooLarge", name, err)
		}
		// A bit flipped in the content fails the checksum, which the
		// rewritten header keeps.
		bad := bytes.Clone(frame)
		bad[len(bad)-1] ^= 1
		if _, err := decompressCtx(t, c, bad, 0); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("%s with a bad checksum: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestGzipForgedSizeHint: the trailer's ISIZE, which the sender writes, sizes
// the first allocation only up to a few times the input: a 64 KiB member whose
// trailer claims 4 GiB used to allocate 1032 times its size (66 MiB) before
// the CRC check refused it.
func TestGzipForgedSizeHint(t *testing.T) {
	c := codec.Standard(codec.Gzip)
	data := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	var buf bytes.Buffer
	w := kgzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := buf.Bytes()
	if _, err := decompressCtx(t, c, in, 0); err != nil { // pools a reader
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(in[len(in)-4:], 0xfffffff0)
	var err error
	alloc := allocated(func() { _, err = decompressCtx(t, c, in, 0) })
	if !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("forged ISIZE: %v, want ErrCorrupt (the CRC and size do not match)", err)
	}
	if alloc > 4<<20 {
		t.Errorf("forged ISIZE on a %d KiB member: allocated %.1f MiB", len(in)>>10, float64(alloc)/(1<<20))
	}
}
