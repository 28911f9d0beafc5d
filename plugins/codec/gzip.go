package codec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipCodec is id 1: one RFC 1952 gzip stream (klauspost/compress/gzip,
// byte-compatible with compress/gzip and faster). Decompress accepts several
// concatenated members, as Java's GZIPInputStream and every client do.
type gzipCodec struct{ level int }

func (gzipCodec) ID() ID           { return Gzip }
func (c gzipCodec) String() string { return "gzip:level=" + strconv.Itoa(c.level) }

// Writers hold ~1 MiB of state each, so they are pooled per level; readers
// and output buffers are pooled once.
var (
	gzipWriters [10]sync.Pool // index: level 1..9
	gzipReaders sync.Pool     // *gzip.Reader
	outBuffers  = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func (c gzipCodec) Compress(ctx context.Context, req CompressRequest) (CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return CompressResponse{}, err
	}
	buf := outBuffers.Get().(*bytes.Buffer)
	defer outBuffers.Put(buf)
	buf.Reset()
	buf.Grow(len(req.Records)/2 + 64)

	w, _ := gzipWriters[c.level].Get().(*gzip.Writer)
	if w == nil {
		var err error
		if w, err = gzip.NewWriterLevel(buf, c.level); err != nil {
			return CompressResponse{}, fmt.Errorf("%w: gzip level %d: %w", ErrInvalidSpec, c.level, err)
		}
	} else {
		w.Reset(buf)
	}
	_, err := w.Write(req.Records)
	if err == nil {
		err = w.Close()
	}
	w.Reset(nil)
	gzipWriters[c.level].Put(w)
	if err != nil {
		return CompressResponse{}, err // writing to a bytes.Buffer does not fail
	}
	return CompressResponse{Compressed: bytes.Clone(buf.Bytes())}, nil
}

// Bounds of the first output allocation Decompress makes from the trailer's
// ISIZE: at most gzipHintRatio times the input plus gzipHintBase.
const (
	gzipHintRatio = 4
	gzipHintBase  = 64 << 10
)

func (gzipCodec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	in := req.Compressed
	if len(in) == 0 {
		return DecompressResponse{}, corrupt("gzip", errEmpty)
	}
	limit := limitOf(req.MaxSize)
	src := bytes.NewReader(in)
	r, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if r == nil {
		r, err = gzip.NewReader(src)
	} else {
		err = r.Reset(src)
	}
	if err != nil {
		return DecompressResponse{}, corrupt("gzip", err)
	}
	defer gzipReaders.Put(r)
	// The trailer's ISIZE is the last member's size mod 2^32: for the
	// single member every client writes, the exact size, so one
	// allocation fits. But it is the sender's word, read before anything
	// is checked, so it sizes the first allocation only up to what real
	// batches need (deflate rarely beats 4x on records) plus 64 KiB; a
	// larger output grows as it arrives, and the limit is enforced on
	// that.
	hint := 0
	if len(in) >= 18 {
		hint = min(int(binary.LittleEndian.Uint32(in[len(in)-4:])), gzipHintRatio*len(in)+gzipHintBase)
	}
	out, err := readAllLimited(r, hint, limit)
	switch {
	case errors.Is(err, errOverLimit):
		return DecompressResponse{}, tooLarge("gzip", req.MaxSize)
	case err != nil:
		return DecompressResponse{}, corrupt("gzip", err)
	}
	return DecompressResponse{Records: out}, nil
}
