package kgoadapt

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
)

// ErrNoCodec: a fetched batch carries a codec id the Decompressor was given
// no codec for (a custom id, 5-7, or an id outside 0-7).
var ErrNoCodec = errors.New("kgoadapt: no codec for the batch's compression id")

// DefaultMaxDecompress is the largest records section the Decompressor
// returns: 1 GiB, franz-go's default for its own decompressor
// (kgo.MaxDecompressBatchBytes does not apply to custom decompressors).
const DefaultMaxDecompress = 1 << 30

// Compressor adapts c for kgo.WithCompressor: franz-go hands it each batch's
// records section once, and it returns c's output with c's id, which the
// producer writes into the batch attributes (custom ids 5-7 included).
//
// If c fails, Compress returns the section unchanged with kgo.CodecNone, so
// the batch goes out uncompressed: franz-go's interface has no error return,
// and an uncompressed batch is always valid. Nothing is counted or logged;
// a consumer can tell from each record's Attrs.CompressionType. Likewise
// when c is the none codec, or c is zstd and franz-go says the broker is too
// old for it (kgo.CompressDisableZstd). franz-go keeps the compressed form
// only when it is smaller.
//
// The context passed to c is context.Background(): franz-go gives none.
func Compressor(c codec.Codec) kgo.Compressor {
	if c == nil {
		panic("kgoadapt: Compressor(nil)")
	}
	return compressor{c: c, id: c.ID()}
}

type compressor struct {
	c  codec.Codec
	id codec.ID
}

func (a compressor) Compress(_ *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	if a.id == codec.None {
		return src, kgo.CodecNone
	}
	if a.id == codec.Zstd {
		for _, f := range flags {
			if f == kgo.CompressDisableZstd {
				return src, kgo.CodecNone
			}
		}
	}
	resp, err := a.c.Compress(context.Background(), codec.CompressRequest{Records: src})
	if err != nil || resp.Compressed == nil {
		return src, kgo.CodecNone
	}
	return resp.Compressed, kgo.CompressionCodecType(a.id)
}

// Decompressor adapts codecs for kgo.WithDecompressor: each fetched batch
// goes to the codec registered for its id, one call per batch. A later codec
// with the same id replaces an earlier one. Ids 1-4 without a codec fall back
// to weir's built-ins (codec.Standard), which read every form Kafka clients
// write; custom ids 5-7 need their codec here, or the batch fails with an
// error wrapping ErrNoCodec that names the id.
//
// Output is bounded by DefaultMaxDecompress; use DecompressorWithLimit for
// another bound. Over the bound, the error wraps both codec.ErrTooLarge and
// kgo.ErrMaxDecompress, so franz-go stops the partition as it does for its
// own decompressor. It panics if a codec is nil or its id is outside 0-7.
func Decompressor(codecs ...codec.Codec) kgo.Decompressor {
	return DecompressorWithLimit(DefaultMaxDecompress, codecs...)
}

// DecompressorWithLimit is Decompressor with the output bounded by maxSize
// bytes (0: unbounded, which a consumer of untrusted topics should avoid).
func DecompressorWithLimit(maxSize int, codecs ...codec.Codec) kgo.Decompressor {
	d := &decompressor{maxSize: maxSize}
	for id := codec.None; id <= codec.Zstd; id++ {
		d.byID[id] = codec.Standard(id)
	}
	for _, c := range codecs {
		if c == nil {
			panic("kgoadapt: Decompressor: nil codec")
		}
		id := c.ID()
		if !id.Valid() {
			panic(fmt.Sprintf("kgoadapt: Decompressor: codec id %d outside 0-7", int8(id)))
		}
		d.byID[id] = c
	}
	return d
}

type decompressor struct {
	byID    [codec.MaxID + 1]codec.Codec
	maxSize int
}

func (d *decompressor) Decompress(src []byte, t kgo.CompressionCodecType) ([]byte, error) {
	if t == kgo.CodecNone {
		return src, nil // franz-go's contract: the input, as is
	}
	id := codec.ID(t)
	if t < 0 || !id.Valid() || d.byID[id] == nil {
		return nil, fmt.Errorf("%w: id %d (%s): pass its codec to kgoadapt.Decompressor", ErrNoCodec, int8(t), id)
	}
	resp, err := d.byID[id].Decompress(context.Background(), codec.DecompressRequest{Compressed: src, MaxSize: d.maxSize})
	if errors.Is(err, codec.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", kgo.ErrMaxDecompress, err)
	}
	if err != nil {
		return nil, err
	}
	return resp.Records, nil
}
