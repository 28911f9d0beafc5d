package codec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdCodec is id 4: one zstd frame (klauspost/compress/zstd) holding the
// content size, as franz-go and sarama write it. Decompress also takes
// frames without a content size (librdkafka and the JVM producer stream
// them) and concatenated or skippable frames.
type zstdCodec struct{ level int }

func (zstdCodec) ID() ID           { return Zstd }
func (c zstdCodec) String() string { return "zstd:level=" + strconv.Itoa(c.level) }

// zstdMaxWindow bounds the window a frame may ask the decoder to keep:
// 128 MiB, zstd's own default limit (windowLogMax 27), which the JVM's
// zstd-jni and librdkafka apply too.
const zstdMaxWindow = 1 << 27

// Encoders and decoders are costly to build and hold megabytes of tables, so
// they are pooled: encoders per level, decoders once. A cleanup closes a
// pooled coder once the pool drops it.
var (
	zstdEncoders [5]sync.Pool // index: level 1..4; *zstdEncoder
	zstdDecoders sync.Pool    // *zstdDecoder
)

type zstdEncoder struct{ e *zstd.Encoder }
type zstdDecoder struct{ d *zstd.Decoder }

func getZstdEncoder(level int) (*zstdEncoder, error) {
	if e, ok := zstdEncoders[level].Get().(*zstdEncoder); ok {
		return e, nil
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevel(level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true), // empty input still makes a frame
	)
	if err != nil {
		return nil, fmt.Errorf("%w: zstd level %d: %w", ErrInvalidSpec, level, err)
	}
	e := &zstdEncoder{enc}
	runtime.AddCleanup(e, func(enc *zstd.Encoder) { _ = enc.Close() }, enc)
	return e, nil
}

func getZstdDecoder() (*zstdDecoder, error) {
	if d, ok := zstdDecoders.Get().(*zstdDecoder); ok {
		return d, nil
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1), // synchronous: no goroutines
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
		// DecodeAll writes no further than dst's capacity, which
		// Decompress sets to the frame's declared size.
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		return nil, fmt.Errorf("codec: zstd decoder: %w", err)
	}
	d := &zstdDecoder{dec}
	runtime.AddCleanup(d, func(dec *zstd.Decoder) { dec.Close() }, dec)
	return d, nil
}

var zstdScratch = sync.Pool{New: func() any { return new([]byte) }}

func (c zstdCodec) Compress(ctx context.Context, req CompressRequest) (CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return CompressResponse{}, err
	}
	e, err := getZstdEncoder(c.level)
	if err != nil {
		return CompressResponse{}, err
	}
	p := zstdScratch.Get().(*[]byte)
	out := e.e.EncodeAll(req.Records, (*p)[:0])
	zstdEncoders[c.level].Put(e)
	res := bytes.Clone(out)
	*p = out
	zstdScratch.Put(p)
	return CompressResponse{Compressed: res}, nil
}

func (zstdCodec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	in := req.Compressed
	if len(in) == 0 {
		return DecompressResponse{}, corrupt("zstd", errEmpty)
	}
	limit := limitOf(req.MaxSize)
	var h zstd.Header
	if err := h.Decode(in); err != nil {
		return DecompressResponse{}, corrupt("zstd", err)
	}
	d, err := getZstdDecoder()
	if err != nil {
		return DecompressResponse{}, err
	}
	defer zstdDecoders.Put(d)

	if h.HasFCS && !h.Skippable {
		if h.FrameContentSize > uint64(limit) {
			return DecompressResponse{}, tooLarge("zstd", req.MaxSize)
		}
		// The densest zstd block, RLE, turns 4 bytes into at most
		// 128 KiB: a frame claiming more than 32768 times its input is
		// corrupt, and refused before the output is allocated.
		if h.FrameContentSize > 32768*uint64(len(in)) {
			return DecompressResponse{}, corrupt("zstd", fmt.Errorf("frame of %d bytes claims to decode to %d", len(in), h.FrameContentSize))
		}
		// The usual case: one frame that declares its size. Decode it in
		// one call into exactly that much room.
		out, err := d.d.DecodeAll(in, make([]byte, 0, h.FrameContentSize))
		if err == nil {
			return DecompressResponse{Records: out}, nil
		}
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return DecompressResponse{}, corrupt("zstd", err)
		}
		// More frames follow the first: stream them under the limit.
	}
	// No declared size (a streamed frame): stream under the limit, so a
	// bomb stops at limit+1 bytes.
	if err := d.d.Reset(bytes.NewReader(in)); err != nil {
		return DecompressResponse{}, corrupt("zstd", err)
	}
	defer d.d.Reset(nil) // drops the reference to in
	out, err := readAllLimited(d.d, 4*len(in), limit)
	switch {
	case errors.Is(err, errOverLimit):
		return DecompressResponse{}, tooLarge("zstd", req.MaxSize)
	case err != nil:
		return DecompressResponse{}, corrupt("zstd", err)
	}
	return DecompressResponse{Records: out}, nil
}
