package codec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
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

// zstdMaxWindow bounds the window a frame may declare: 128 MiB, zstd's own
// default limit (windowLogMax 27), which the JVM's zstd-jni and librdkafka
// apply too. A larger declared window is corrupt input. (A frame whose
// content size is declared has that as its window instead; it is bounded by
// MaxSize.)
const zstdMaxWindow = 1 << 27

// A frame's declared content size is trusted for one up-front allocation of
// at most zstdUpFrontBase + zstdUpFrontRatio times the frame's length. Real
// batches compress 2-10x, so they decode in one exactly sized call; a larger
// claim is decoded as if undeclared, the output growing only as it arrives.
const (
	zstdUpFrontBase  = 1 << 20
	zstdUpFrontRatio = 16
)

// Encoders and decoders are costly to build and hold megabytes of tables, so
// they are pooled: encoders per level, decoders once. A cleanup closes a
// pooled coder once the pool drops it. A pooled decoder never streams (see
// Decompress), so it holds no window-sized buffer between calls.
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

// Decompress decodes the frames in turn (skipping skippable ones), each with
// DecodeAll, whose only history is the output itself: the streaming decoder
// would allocate the declared window up front (128 MiB for a 20-byte frame
// that asks for it), however little the frame holds. A frame with a
// plausible declared size decodes into exactly that room. Any other frame
// (no size, a size over the up-front budget, or a window over the limit) is
// decoded with its header rewritten to declare no size and a window of at
// most the limit, so the output grows as it arrives and stops at the limit;
// the declared size is then checked against what came out.
func (zstdCodec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	in := req.Compressed
	if len(in) == 0 {
		return DecompressResponse{}, corrupt("zstd", errEmpty)
	}
	limit := limitOf(req.MaxSize)
	d, err := getZstdDecoder()
	if err != nil {
		return DecompressResponse{}, err
	}
	defer zstdDecoders.Put(d)
	out := []byte{}
	for len(in) > 0 {
		var h zstd.Header
		if err := h.Decode(in); err != nil {
			return DecompressResponse{}, corrupt("zstd", err)
		}
		if h.Skippable {
			n := uint64(h.HeaderSize) + uint64(h.SkippableSize)
			if n > uint64(len(in)) {
				return DecompressResponse{}, corrupt("zstd", fmt.Errorf("skippable frame of %d bytes cut at %d", n, len(in)))
			}
			in = in[n:]
			continue
		}
		n, err := zstdFrameLen(in, &h)
		if err != nil {
			return DecompressResponse{}, corrupt("zstd", err)
		}
		if out, err = d.frame(in[:n], &h, out, limit); errors.Is(err, errOverLimit) {
			return DecompressResponse{}, tooLarge("zstd", req.MaxSize)
		} else if err != nil {
			return DecompressResponse{}, corrupt("zstd", err)
		}
		in = in[n:]
	}
	return DecompressResponse{Records: out}, nil
}

// frame appends the decoded frame (whose header h describes) to out, which
// may hold at most limit bytes. Errors: errOverLimit, or why it is corrupt.
func (d *zstdDecoder) frame(frame []byte, h *zstd.Header, out []byte, limit int) ([]byte, error) {
	room := uint64(limit - len(out))
	if !h.SingleSegment && h.WindowSize > zstdMaxWindow {
		return nil, fmt.Errorf("window of %d bytes, over zstd's limit of %d", h.WindowSize, zstdMaxWindow)
	}
	window := h.WindowSize // what the frame needs; a single segment's is its size
	size := h.FrameContentSize
	if h.HasFCS {
		switch {
		case size > room:
			return nil, errOverLimit
		// The densest zstd block, RLE, turns 4 bytes into at most
		// 128 KiB: a frame claiming more than 32768 times its length is
		// corrupt, and refused before the output is allocated.
		case size > 32768*uint64(len(frame)):
			return nil, fmt.Errorf("frame of %d bytes claims to decode to %d", len(frame), size)
		case size <= zstdUpFrontBase+zstdUpFrontRatio*uint64(len(frame)):
			// The usual case: decode into exactly the declared room;
			// the cap limit refuses a frame that makes more.
			if h.SingleSegment {
				window = max(size, zstd.MinWindowSize)
			}
			if err := d.d.ResetWithOptions(nil, zstd.WithDecoderMaxWindow(window),
				zstd.WithDecoderMaxMemory(1<<62), zstd.WithDecodeAllCapLimit(true)); err != nil {
				return nil, err
			}
			return d.d.DecodeAll(frame, slices.Grow(out, int(size)))
		}
		if h.SingleSegment {
			window = max(size, zstd.MinWindowSize)
		}
	}
	// Otherwise the output grows as it arrives: the header is rewritten to
	// declare no size, and a window no larger than the output may grow
	// (but at least a block, so block sizes are checked as before), as no
	// back-reference of a frame that stays within the limit reaches
	// further. The decoder stops within a block of the larger of the two.
	rewrite := h.HasFCS
	if w := max(room, 128<<10); window > w {
		window, rewrite = w, true
	}
	if rewrite {
		var wd byte
		wd, window = zstdWindowDescriptor(window)
		frame = zstdStreamHeader(frame, h, wd)
	}
	if err := d.d.ResetWithOptions(nil, zstd.WithDecoderMaxWindow(window),
		zstd.WithDecoderMaxMemory(max(room, window)), zstd.WithDecodeAllCapLimit(false)); err != nil {
		return nil, err
	}
	before := len(out)
	hint := min(room, 4*uint64(len(frame))+512)
	if h.HasFCS {
		hint = min(size, zstdUpFrontBase+zstdUpFrontRatio*uint64(len(frame)))
	}
	out, err := d.d.DecodeAll(frame, slices.Grow(out, int(hint)))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, errOverLimit
	case err != nil:
		return nil, err
	}
	switch got := uint64(len(out) - before); {
	case got > room:
		return nil, errOverLimit
	case h.HasFCS && got != size:
		return nil, fmt.Errorf("frame declares %d bytes and decodes to %d", size, got)
	}
	return out, nil
}

// zstdFrameLen returns the length of the frame at the start of in, whose
// header h describes, by walking its block headers: the header, each block
// (3-byte header and contents) to the last, and the checksum.
func zstdFrameLen(in []byte, h *zstd.Header) (int, error) {
	pos := h.HeaderSize
	for last := false; !last; {
		if len(in)-pos < 3 {
			return 0, fmt.Errorf("frame cut at %d bytes, in a block header", len(in))
		}
		bh := int(in[pos]) | int(in[pos+1])<<8 | int(in[pos+2])<<16
		pos += 3
		last = bh&1 == 1
		size := bh >> 3
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte, repeated size times
			size = 1
		case 3:
			return 0, zstd.ErrReservedBlockType
		}
		if len(in)-pos < size {
			return 0, fmt.Errorf("frame cut at %d bytes, in a block of %d", len(in), size)
		}
		pos += size
	}
	if h.HasCheckSum {
		if len(in)-pos < 4 {
			return 0, fmt.Errorf("frame cut at %d bytes, in its checksum", len(in))
		}
		pos += 4
	}
	return pos, nil
}

// zstdWindowDescriptor returns the smallest Window_Descriptor (RFC 8878
// 3.1.1.1.2) whose window is at least w, and that window.
func zstdWindowDescriptor(w uint64) (byte, uint64) {
	for exp := range 32 {
		base := uint64(1) << (10 + exp)
		for mantissa := range uint64(8) {
			if v := base + base/8*mantissa; v >= w {
				return byte(exp<<3) | byte(mantissa), v
			}
		}
	}
	return 0xff, 1<<41 + 7<<38 // unreachable: callers pass at most 1 TiB
}

// zstdStreamHeader returns a copy of frame whose header declares no content
// size, is not a single segment, and has window descriptor wd; the checksum
// flag, dictionary id and blocks are kept. The checksum covers the content
// only, so it still holds.
func zstdStreamHeader(frame []byte, h *zstd.Header, wd byte) []byte {
	fhd := frame[4]
	dictAt := 5
	if !h.SingleSegment {
		dictAt = 6 // after the old window descriptor
	}
	dictLen := [4]int{0, 1, 2, 4}[fhd&3]
	out := make([]byte, 0, len(frame)+1)
	out = append(out, frame[:4]...)  // magic
	out = append(out, fhd&0b111, wd) // checksum and dictionary id flags
	out = append(out, frame[dictAt:dictAt+dictLen]...)
	return append(out, frame[h.HeaderSize:]...)
}
