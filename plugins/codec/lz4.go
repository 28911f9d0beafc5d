package codec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Codec is id 3: the LZ4 frame format (pierrec/lz4), as Kafka >= 0.10
// writes it for magic 1 and 2 batches (with the header checksum computed
// correctly, unlike magic 0): 64 KiB independent blocks as the JVM producer
// and sarama write them, no block checksums, a content checksum as franz-go
// and sarama write it (the JVM reader skips it, librdkafka checks it).
// Decompress accepts any block size, checksum setting and concatenated
// frames.
type lz4Codec struct{ level int }

func (lz4Codec) ID() ID           { return LZ4 }
func (c lz4Codec) String() string { return "lz4:level=" + strconv.Itoa(c.level) }

// lz4Level maps weir's 0..9 to pierrec/lz4's levels: 0 is Fast, n is
// Level1..Level9 (1 << (8+n)).
func lz4Level(level int) lz4.CompressionLevel {
	if level == 0 {
		return lz4.Fast
	}
	return lz4.CompressionLevel(1 << (8 + level))
}

var (
	lz4Writers [10]sync.Pool // index: level 0..9
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

func (c lz4Codec) Compress(ctx context.Context, req CompressRequest) (CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return CompressResponse{}, err
	}
	buf := outBuffers.Get().(*bytes.Buffer)
	defer outBuffers.Put(buf)
	buf.Reset()
	buf.Grow(len(req.Records)/2 + 64)

	w, _ := lz4Writers[c.level].Get().(*lz4.Writer)
	if w == nil {
		w = lz4.NewWriter(buf)
		if err := w.Apply(
			lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.BlockChecksumOption(false),
			lz4.ChecksumOption(true),
			lz4.CompressionLevelOption(lz4Level(c.level)),
		); err != nil {
			return CompressResponse{}, fmt.Errorf("%w: lz4 level %d: %w", ErrInvalidSpec, c.level, err)
		}
	} else {
		w.Reset(buf) // keeps the options
	}
	_, err := w.Write(req.Records)
	if err == nil {
		err = w.Close()
	}
	w.Reset(nil)
	lz4Writers[c.level].Put(w)
	if err != nil {
		return CompressResponse{}, err
	}
	return CompressResponse{Compressed: bytes.Clone(buf.Bytes())}, nil
}

func (lz4Codec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	in := req.Compressed
	if len(in) == 0 {
		return DecompressResponse{}, corrupt("lz4", errEmpty)
	}
	r := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(r)
	defer r.Reset(nil)
	r.Reset(bytes.NewReader(in))
	// LZ4 expands at most ~255x; 4x is a typical records section.
	out, err := readAllLimited(r, 4*len(in), limitOf(req.MaxSize))
	switch {
	case errors.Is(err, errOverLimit):
		return DecompressResponse{}, tooLarge("lz4", req.MaxSize)
	case err != nil:
		return DecompressResponse{}, corrupt("lz4", err)
	}
	return DecompressResponse{Records: out}, nil
}
