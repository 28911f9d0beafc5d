package topics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Plugins builds the flush policies and codecs that topic configs name by
// spec: a built-in ("interval:ms=50", "zstd:level=4") or an external plugin
// (a path, or a name in the plugin directory). *host.Host (plugins/host)
// implements it; BuiltinPlugins knows the built-ins only.
//
// FlushPolicy returns a new policy per call (one per partition). Codec may
// return a shared codec (codecs are safe for concurrent use). What either
// returns may implement io.Closer; the registry closes what it only built to
// validate a config.
type Plugins interface {
	FlushPolicy(spec string) (flushpolicy.Policy, error)
	Codec(spec string) (codec.Codec, error)
}

// BuiltinPlugins resolves specs to compiled-in implementations only.
type BuiltinPlugins struct{}

// FlushPolicy implements Plugins with flushpolicy.New.
func (BuiltinPlugins) FlushPolicy(spec string) (flushpolicy.Policy, error) {
	return flushpolicy.New(spec)
}

// Codec implements Plugins with codec.New.
func (BuiltinPlugins) Codec(spec string) (codec.Codec, error) { return codec.New(spec) }

func closePlugin(v any) {
	if c, ok := v.(io.Closer); ok {
		_ = c.Close()
	}
}

// ErrUnsupportedCompression: a topic with a compression.type must recompress a
// batch whose codec the broker cannot decompress (a custom id 5-7 that is not
// the topic's own codec). Kafka: UNSUPPORTED_COMPRESSION_TYPE.
var ErrUnsupportedCompression = errors.New("topics: unsupported compression type")

// ErrCodecUnavailable: the topic's compression.type names a codec that could
// not be built (a plugin missing since the topic was created); its appends
// fail until it is back, other topics are unaffected.
var ErrCodecUnavailable = errors.New("topics: codec unavailable")

// MaxDecompressedBatch bounds what recompression decompresses from one batch,
// so a small compressed batch cannot make the broker allocate without limit
// (a decompression bomb): 64 MiB or 64 times max.message.bytes, the larger.
const maxDecompressedFloor = 64 << 20

// recompressor rewrites a partition's incoming batches under the topic's
// codec (compression.type other than producer).
type recompressor struct {
	spec    string
	to      codec.Codec // nil when err is set
	err     error       // why the codec could not be built
	maxSize int         // decompression limit per batch
}

// topicCodec builds the recompressor for a topic's effective configs, or nil
// for compression.type=producer (or unset). A codec that cannot be built is
// logged and kept as an error that fails the topic's appends.
func (r *Registry) topicCodec(topic string, eff map[string]string, maxBatch int) *recompressor {
	spec, ok := eff[ConfigCompressionType]
	if !ok || spec == CompressionProducer {
		return nil
	}
	rc := &recompressor{spec: spec, maxSize: max(maxDecompressedFloor, 64*maxBatch)}
	if spec == CompressionUncompressed {
		spec = codec.None.String()
	}
	c, err := r.o.Plugins.Codec(spec)
	if err != nil {
		r.o.Logger.Error("topic codec unavailable; appends to the topic fail until it is back",
			"topic", topic, "compression.type", rc.spec, "err", err)
		rc.err = fmt.Errorf("%w: %s=%q: %w", ErrCodecUnavailable, ConfigCompressionType, rc.spec, err)
		return rc
	}
	rc.to = c
	return rc
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

// apply returns records with every batch not already under the target codec
// recompressed (batches that are stay byte for byte, as Kafka keeps them), or
// records itself when nothing needed it.
func (rc *recompressor) apply(ctx context.Context, records []byte) ([]byte, error) {
	if rc.err != nil {
		return nil, rc.err
	}
	target := rc.to.ID()
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
		if src == rc.to.ID() {
			from = rc.to
		}
		if from == nil && src != codec.None {
			return nil, fmt.Errorf("%w: batch compressed with %s, topic recompresses to %s", ErrUnsupportedCompression, src, rc.spec)
		}
		decompress := func(section []byte) ([]byte, error) {
			resp, err := from.Decompress(ctx, codec.DecompressRequest{Compressed: section, MaxSize: rc.maxSize})
			return resp.Records, err
		}
		compress := func(section []byte) ([]byte, error) {
			resp, err := rc.to.Compress(ctx, codec.CompressRequest{Records: section})
			return resp.Compressed, err
		}
		out, err = record.Recompress(out, batch, record.Codec(target), decompress, compress)
		if err != nil {
			return nil, fmt.Errorf("recompress to %s: %w", rc.spec, err)
		}
	}
	return out, nil
}
