package codec

import (
	"context"
	"fmt"

	"github.com/weir-broker/weir/plugins/spec"
)

// Factory builds a Codec from a spec's parameters, as split by New: keys and
// values are trimmed and non-empty, and each key appears once. params belongs
// to the factory. A factory must reject parameters it does not know and
// values out of range with an error that names the parameter; New adds the
// spec and wraps it with ErrInvalidSpec.
type Factory = spec.Factory[Codec]

// Info describes a registered codec for listings such as `weir codecs`.
type Info = spec.Info

var registry = spec.NewRegistry[Codec]("codec", ErrUnknownCodec, ErrInvalidSpec)

// Register makes a codec available to New under info.Name. It is meant to be
// called from init functions. It panics if the name is already registered,
// if f is nil, or if the name is empty or contains ':', ',', '=', '/' or
// white space (which the spec syntax reserves).
func Register(info Info, f Factory) { registry.Register(info, f) }

// Names returns the registered codec names, sorted.
func Names() []string { return registry.Names() }

// Infos returns the descriptions of the registered codecs, sorted by name.
func Infos() []Info { return registry.Infos() }

// New builds a Codec from a spec: a registered name alone, or the name, a
// colon and comma-separated key=value parameters. Examples:
//
//	none
//	gzip:level=9
//	snappy
//	lz4:level=0
//	zstd:level=4
//
// An unregistered name (including a path to an external plugin, which the
// plugin shim resolves, not New) returns an error wrapping ErrUnknownCodec
// that lists the known names; any other problem (syntax, unknown parameter,
// level out of range) returns an error wrapping ErrInvalidSpec that names
// the offending part.
func New(s string) (Codec, error) {
	c, err := registry.New(s)
	if err == nil && c == nil {
		return nil, fmt.Errorf("%w %q: factory returned no codec", ErrInvalidSpec, s)
	}
	if err == nil && !c.ID().Valid() {
		return nil, fmt.Errorf("%w %q: codec id %d outside 0..%d", ErrInvalidSpec, s, c.ID(), MaxID)
	}
	return c, err
}

// The built-ins at their default levels, as Standard returns them.
var standard = [...]Codec{
	None:   noneCodec{},
	Gzip:   gzipCodec{level: DefaultGzipLevel},
	Snappy: snappyCodec{},
	LZ4:    lz4Codec{level: DefaultLZ4Level},
	Zstd:   zstdCodec{level: DefaultZstdLevel},
}

// Standard returns the built-in codec for one of Kafka's ids (None, Gzip,
// Snappy, LZ4, Zstd) at its default level, or nil for any other id. The
// level only matters for compressing: every built-in decompresses whatever
// any level, and any Kafka client, produced. The result is shared and safe
// for concurrent use.
func Standard(id ID) Codec {
	if id < 0 || int(id) >= len(standard) {
		return nil
	}
	return standard[id]
}

// Decompress decompresses one batch's records section compressed with
// Kafka's codec id, using Standard(id). maxSize bounds the output as
// DecompressRequest.MaxSize does (0: no bound). Ids 5-7 belong to custom
// codecs, which only their Codec can decompress: they return an error
// wrapping ErrUnknownCodec, as do ids outside 0-7. The result belongs to the
// caller (a copy even for None).
func Decompress(ctx context.Context, id ID, compressed []byte, maxSize int) ([]byte, error) {
	c := Standard(id)
	if c == nil {
		return nil, fmt.Errorf("%w: id %d (%s) is not one of Kafka's codecs; decompress it with its own Codec", ErrUnknownCodec, int8(id), id)
	}
	resp, err := c.Decompress(ctx, DecompressRequest{Compressed: compressed, MaxSize: maxSize})
	return resp.Records, err
}
