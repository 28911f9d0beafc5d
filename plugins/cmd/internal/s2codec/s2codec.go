// Package s2codec is the codec of the example plugin weir-codec-s2: S2
// (github.com/klauspost/compress/s2), a faster Snappy extension, in its block
// format. Kafka has no S2 id, so batches carry a custom one (5 by default):
// only readers that have the same plugin can read them, which suits topics
// consumed through weir or by franz-go clients given a matching
// kgo.WithDecompressor.
//
// Spec parameters (all optional):
//
//	id=5..7                  the attribute value batches carry (default 5)
//	level=fast|better|best   s2.Encode, s2.EncodeBetter or s2.EncodeBest (default fast)
//
// Example: bin/plugins/weir-codec-s2:id=6,level=better.
//
// A block starts with its decoded length, so Decompress checks MaxSize before
// allocating. Without a MaxSize the bound is pluginrpc.MaxMessageSize: no
// larger answer could cross back to the host anyway.
package s2codec

import (
	"context"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/s2"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

// DefaultID is the codec id without an id parameter.
const DefaultID codec.ID = 5

// Codec is the S2 codec. It is safe for concurrent use (it keeps no state).
type Codec struct {
	id    codec.ID
	level string
	enc   func(dst, src []byte) []byte
}

var encoders = map[string]func(dst, src []byte) []byte{
	"fast":   s2.Encode,
	"better": s2.EncodeBetter,
	"best":   s2.EncodeBest,
}

// New builds a codec from spec parameters (see the package doc).
func New(params map[string]string) (codec.Codec, error) {
	if err := spec.OnlyParams(params, "id", "level"); err != nil {
		return nil, err
	}
	c := &Codec{id: DefaultID, level: "fast"}
	if s, ok := params["id"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 5 || n > 7 {
			return nil, fmt.Errorf("id=%q: want 5, 6 or 7 (Kafka uses 0-4)", s)
		}
		c.id = codec.ID(n)
	}
	if s, ok := params["level"]; ok {
		if _, known := encoders[s]; !known {
			return nil, fmt.Errorf("level=%q: want fast, better or best", s)
		}
		c.level = s
	}
	c.enc = encoders[c.level]
	return c, nil
}

// ID returns the configured id.
func (c *Codec) ID() codec.ID { return c.id }

// String returns the codec's parameters in spec form.
func (c *Codec) String() string {
	return "s2:id=" + strconv.Itoa(int(c.id)) + ",level=" + c.level
}

// Compress encodes one records section as one S2 block.
func (c *Codec) Compress(ctx context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return codec.CompressResponse{}, err
	}
	return codec.CompressResponse{Compressed: c.enc(nil, req.Records)}, nil
}

// Decompress decodes one S2 block, refusing before it allocates when the
// block's declared length is over MaxSize.
func (c *Codec) Decompress(ctx context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return codec.DecompressResponse{}, err
	}
	n, err := s2.DecodedLen(req.Compressed)
	if err != nil {
		return codec.DecompressResponse{}, fmt.Errorf("%w: s2: %w", codec.ErrCorrupt, err)
	}
	limit := req.MaxSize
	if limit <= 0 {
		limit = pluginrpc.MaxMessageSize
	}
	if n > limit {
		return codec.DecompressResponse{}, fmt.Errorf("%w: s2: block declares %d bytes, over the limit of %d", codec.ErrTooLarge, n, limit)
	}
	out, err := s2.Decode(make([]byte, n), req.Compressed)
	if err != nil {
		return codec.DecompressResponse{}, fmt.Errorf("%w: s2: %w", codec.ErrCorrupt, err)
	}
	return codec.DecompressResponse{Records: out}, nil
}
