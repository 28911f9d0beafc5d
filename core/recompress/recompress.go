// Package recompress rewrites a topic's incoming batches under the codec its
// compression.type names, as Kafka's broker does: a batch already under the
// target codec id is kept byte for byte; the others are decompressed
// (bounded, against decompression bombs), checked record by record and
// recompressed keeping every header field (record.Recompress). The codec may
// be an external plugin: it is built on first use and, while building fails,
// retried at most every 5 s, so a plugin that comes back is picked up without
// a restart, and appends fail with ErrCodecUnavailable meanwhile.
package recompress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// ErrUnsupportedCompression: a topic with a compression.type must recompress a
// batch whose codec the broker cannot decompress (a custom id 5-7 that is not
// the topic's own codec). Kafka: UNSUPPORTED_COMPRESSION_TYPE.
var ErrUnsupportedCompression = errors.New("recompress: unsupported compression type")

// ErrCodecUnavailable: the topic's compression.type names a codec that could
// not be built (a plugin missing since the topic was created); its appends
// fail until it is back, other topics are unaffected.
var ErrCodecUnavailable = errors.New("recompress: codec unavailable")

// ErrClosed: the recompressor was closed (its topic is closing).
var ErrClosed = errors.New("recompress: closed")

// MaxDecompressedBatch bounds what recompression decompresses from one batch,
// so a small compressed batch cannot make the broker allocate without limit
// (a decompression bomb): 64 MiB or 64 times max.message.bytes, the larger.
const maxDecompressedFloor = 64 << 20

// RetryInterval is how long a topic whose codec could not be built waits before
// trying again: a plugin that failed to start (a timeout on a busy machine, a
// binary being replaced) comes back without a broker restart, and a missing
// one is not restarted on every produce.
const RetryInterval = 5 * time.Second

// Recompressor rewrites a partition's incoming batches under the topic's
// codec (compression.type other than producer). It is shared by the topic's
// partitions and safe for concurrent use; the codec is built on first use
// and, while building fails, retried at most every RetryInterval.
type Recompressor struct {
	spec    string // as configured, for errors
	build   func() (codec.Codec, error)
	now     func() time.Time
	maxSize int // decompression limit per batch

	mu      sync.Mutex
	closed  bool        // the topic closed: build nothing more
	to      codec.Codec // nil until built
	err     error       // the last build failure, returned until retryAt
	retryAt time.Time
}

// New returns the recompressor to codec spec (as compression.type names it,
// for errors), whose codec build makes, for a topic whose batches may be up
// to maxBatch bytes; now is the clock of build retries.
func New(spec string, build func() (codec.Codec, error), now func() time.Time, maxBatch int) *Recompressor {
	return &Recompressor{spec: spec, build: build, now: now, maxSize: max(maxDecompressedFloor, 64*maxBatch)}
}

// codec returns the target codec, building it if it is not built yet and no
// recent attempt failed.
func (rc *Recompressor) codec() (codec.Codec, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.to != nil {
		return rc.to, nil
	}
	if rc.closed {
		return nil, ErrClosed
	}
	now := rc.now()
	if rc.err != nil && now.Before(rc.retryAt) {
		return nil, rc.err
	}
	c, err := rc.build()
	if err != nil {
		rc.err = fmt.Errorf("%w: compression.type=%q: %w", ErrCodecUnavailable, rc.spec, err)
		rc.retryAt = now.Add(RetryInterval)
		return nil, rc.err
	}
	rc.to, rc.err = c, nil
	return c, nil
}

// Close releases the codec (an external plugin's instance); later Applies
// fail with ErrClosed.
func (rc *Recompressor) Close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.closed = true
	if rc.to != nil {
		if c, ok := rc.to.(io.Closer); ok {
			_ = c.Close()
		}
		rc.to = nil
	}
}

// standardCodecs decompress batches under Kafka's ids 1-4.
var standardCodecs = sync.OnceValue(func() map[codec.ID]codec.Codec {
	m := make(map[codec.ID]codec.Codec)
	for _, id := range []codec.ID{codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd} {
		if c, err := codec.New(id.String()); err == nil {
			m[id] = c
		}
	}
	return m
})

// Apply returns records with every batch not already under the target codec
// recompressed (batches that are stay byte for byte, as Kafka keeps them), or
// records itself when nothing needed it. Errors: ErrCodecUnavailable,
// ErrUnsupportedCompression, record.ErrCorrupt for a section that does not
// decompress to the batch's records, or the codec's own.
func (rc *Recompressor) Apply(ctx context.Context, records []byte) ([]byte, error) {
	to, err := rc.codec()
	if err != nil {
		return nil, err
	}
	target := to.ID()
	need := false
	for b := records; len(b) > 0; {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return records, nil // malformed: the log rejects it with its precise error
		}
		need = need || codec.ID(h.Codec()) != target
		b = b[h.Size():]
	}
	if !need {
		return records, nil
	}
	out := make([]byte, 0, len(records))
	for b := records; len(b) > 0; {
		h, n, err := record.Next(b, len(b))
		if err != nil {
			return nil, err
		}
		batch := b[:n]
		b = b[n:]
		src := codec.ID(h.Codec())
		if src == target {
			out = append(out, batch...)
			continue
		}
		from := standardCodecs()[src]
		if src == target {
			from = to
		}
		if from == nil && src != codec.None {
			return nil, fmt.Errorf("%w: batch compressed with %s, topic recompresses to %s", ErrUnsupportedCompression, src, rc.spec)
		}
		// Only bad input is the producer's fault (CORRUPT_MESSAGE); a
		// request that timed out, or a codec plugin that failed, is not.
		var codecErr error
		decompress := func(section []byte) ([]byte, error) {
			resp, err := from.Decompress(ctx, codec.DecompressRequest{Compressed: section, MaxSize: rc.maxSize})
			if err != nil && !errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, codec.ErrTooLarge) {
				codecErr = err
			}
			return resp.Records, err
		}
		compress := func(section []byte) ([]byte, error) {
			resp, err := to.Compress(ctx, codec.CompressRequest{Records: section})
			codecErr = err
			return resp.Compressed, err
		}
		out, err = record.Recompress(out, batch, record.Codec(target), decompress, compress)
		switch {
		case err == nil:
		case codecErr != nil:
			return nil, fmt.Errorf("recompress to %s: %w", rc.spec, codecErr)
		default:
			return nil, fmt.Errorf("recompress to %s: %w", rc.spec, err)
		}
	}
	return out, nil
}
