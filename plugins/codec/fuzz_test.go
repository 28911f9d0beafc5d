package codec_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
)

// FuzzDecompress feeds every built-in untrusted bytes, as a broker or
// consumer receives them. Invariants: no panic; an error wraps ErrCorrupt or
// ErrTooLarge and nothing else; a success stays within MaxSize, and its
// output survives a round trip through the same codec.
//
//	go test -fuzz FuzzDecompress -fuzztime 1m ./plugins/codec
func FuzzDecompress(f *testing.F) {
	section := codectest.RecordsSection(1, 8)
	for id := codec.None; id <= codec.Zstd; id++ {
		comp := compressCtx(f, codec.Standard(id), section)
		f.Add(uint8(id), []byte{}, uint16(0))
		f.Add(uint8(id), []byte{0}, uint16(0))
		f.Add(uint8(id), comp, uint16(0))
		f.Add(uint8(id), comp, uint16(len(section)))
		f.Add(uint8(id), comp, uint16(len(section)-1))
		f.Add(uint8(id), comp[:len(comp)/2], uint16(0))
		f.Add(uint8(id), append(bytes.Clone(comp), 0xde, 0xad, 0xbe, 0xef), uint16(0))
		f.Add(uint8(id), bytes.Repeat([]byte{0xff}, 64), uint16(0))
	}
	f.Add(uint8(codec.Snappy), rawSnappy(section), uint16(0))
	f.Add(uint8(codec.Zstd), zstdStream(f, section), uint16(100))

	f.Fuzz(func(t *testing.T, rawID uint8, in []byte, maxSize uint16) {
		c := codec.Standard(codec.ID(rawID % 5))
		ctx := context.Background()
		resp, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: in, MaxSize: int(maxSize)})
		if err != nil {
			if !errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("%v: error %v wraps neither ErrCorrupt nor ErrTooLarge", c.ID(), err)
			}
			return
		}
		out := resp.Records
		if maxSize > 0 && len(out) > int(maxSize) {
			t.Fatalf("%v: %d bytes out with MaxSize %d", c.ID(), len(out), maxSize)
		}
		again, err := c.Compress(ctx, codec.CompressRequest{Records: out})
		if err != nil {
			t.Fatalf("%v: recompressing %d bytes: %v", c.ID(), len(out), err)
		}
		back, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: again.Compressed})
		if err != nil || !bytes.Equal(back.Records, out) {
			t.Fatalf("%v: round trip of a decoded input: %d bytes, %v", c.ID(), len(back.Records), err)
		}
	})
}
