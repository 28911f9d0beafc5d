package codec

import (
	"context"
	"errors"
	"fmt"
)

// ID is the compression id a batch carries in attributes bits 0-2. Kafka
// defines 0-4; 5, 6 and 7 are unused by Kafka and free for custom codecs.
type ID int8

// Kafka's codec ids.
const (
	None   ID = 0
	Gzip   ID = 1
	Snappy ID = 2
	LZ4    ID = 3
	Zstd   ID = 4
	// MaxID is the largest id the three attribute bits can hold.
	MaxID ID = 7
)

// String returns Kafka's name for a standard id ("none", "gzip", "snappy",
// "lz4", "zstd") and "custom-N" for the others.
func (id ID) String() string {
	switch id {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("custom-%d", int8(id))
}

// Valid reports whether id fits the attribute bits (0-7).
func (id ID) Valid() bool { return id >= 0 && id <= MaxID }

// CompressRequest asks for one batch's records section to be compressed.
type CompressRequest struct {
	// Records is the encoded records section of one batch (everything after
	// the 61-byte batch header), uncompressed. It belongs to the caller and
	// must not be kept after Compress returns.
	Records []byte
}

// CompressResponse carries the compressed records section. Compressed belongs
// to the caller once Compress returns (a codec must not reuse it).
type CompressResponse struct {
	Compressed []byte
}

// DecompressRequest asks for one batch's compressed records section to be
// decompressed.
type DecompressRequest struct {
	// Compressed is the batch's records section as stored. It belongs to the
	// caller and must not be kept after Decompress returns.
	Compressed []byte
	// MaxSize, when positive, bounds the decompressed size: a codec must stop
	// and return an error wrapping ErrTooLarge rather than produce more, so a
	// small malicious input cannot exhaust memory (a decompression bomb).
	MaxSize int
}

// DecompressResponse carries the decompressed records section, which belongs
// to the caller once Decompress returns.
type DecompressResponse struct {
	Records []byte
}

// Codec compresses and decompresses the records section of record batches,
// one batch per call (never one record per call: an external codec costs a
// process round trip per call).
//
// Implementations are safe for concurrent use: a producer compresses batches
// for several partitions at once.
//
// Errors: Compress and Decompress return errors wrapping ErrCorrupt for input
// they cannot decode, ErrTooLarge when MaxSize would be exceeded, and ctx's
// error when ctx ends first. External codecs add errors wrapping
// ErrPluginFailed.
type Codec interface {
	// ID is the attribute value batches compressed by this codec carry. It
	// is fixed for the Codec's life.
	ID() ID
	// Compress compresses one batch's records section. The output must be
	// what Decompress of any Codec with the same ID accepts; for the
	// standard ids that means what Kafka clients accept.
	Compress(ctx context.Context, req CompressRequest) (CompressResponse, error)
	// Decompress reverses Compress, and for the standard ids accepts every
	// form Kafka clients produce.
	Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error)
}

// Errors of codecs and of the registry.
var (
	// ErrCorrupt: the compressed input is malformed or truncated.
	ErrCorrupt = errors.New("codec: corrupt input")
	// ErrTooLarge: decompressing would exceed DecompressRequest.MaxSize.
	ErrTooLarge = errors.New("codec: decompressed size over limit")
	// ErrUnknownCodec: a spec names no registered codec and no plugin.
	ErrUnknownCodec = errors.New("codec: unknown codec")
	// ErrInvalidSpec: a spec is malformed or its parameters are rejected.
	ErrInvalidSpec = errors.New("codec: invalid spec")
	// ErrPluginFailed: an external codec's process failed (handshake, crash,
	// deadline, garbage); the error names the plugin.
	ErrPluginFailed = errors.New("codec: plugin failed")
)
