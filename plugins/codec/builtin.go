package codec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/weir-broker/weir/plugins/spec"
)

// Default compression levels of the built-ins, chosen to match what Kafka
// and franz-go do when no level is configured.
const (
	// DefaultGzipLevel is zlib's default, which Kafka's producer uses
	// (compression.gzip.level=-1 means Deflater.DEFAULT_COMPRESSION, 6).
	// franz-go and sarama ask klauspost/compress for its DefaultCompression,
	// which it maps to its level 5; 6 costs a little more CPU for a little
	// better ratio.
	DefaultGzipLevel = 6
	// DefaultZstdLevel is klauspost/compress's SpeedDefault, roughly zstd's
	// level 3: the level Kafka (compression.zstd.level) and franz-go use.
	DefaultZstdLevel = 2
	// DefaultLZ4Level is pierrec/lz4's Fast, franz-go's and sarama's default
	// and the fast compressor Kafka's producer used before KIP-390.
	DefaultLZ4Level = 0
)

func init() {
	Register(Info{
		Name:    "none",
		Usage:   "none",
		Example: "none",
		Summary: "id 0: no compression (the records section is copied)",
	}, func(params map[string]string) (Codec, error) {
		if err := spec.OnlyParams(params); err != nil {
			return nil, err
		}
		return noneCodec{}, nil
	})
	Register(Info{
		Name:    "gzip",
		Usage:   "gzip[:level=1..9]",
		Example: "gzip:level=6",
		Summary: "id 1: gzip (RFC 1952, klauspost/compress); default level 6, Kafka's",
	}, func(params map[string]string) (Codec, error) {
		level, err := levelParam(params, 1, 9, DefaultGzipLevel)
		return gzipCodec{level: level}, err
	})
	Register(Info{
		Name:    "snappy",
		Usage:   "snappy",
		Example: "snappy",
		Summary: "id 2: snappy in xerial framing like the JVM producer; decompresses raw snappy too",
	}, func(params map[string]string) (Codec, error) {
		if err := spec.OnlyParams(params); err != nil {
			return nil, err
		}
		return snappyCodec{}, nil
	})
	Register(Info{
		Name:    "lz4",
		Usage:   "lz4[:level=0..9]",
		Example: "lz4:level=0",
		Summary: "id 3: LZ4 frame (pierrec/lz4), 64 KiB blocks, content checksum; level 0 = fast (default)",
	}, func(params map[string]string) (Codec, error) {
		level, err := levelParam(params, 0, 9, DefaultLZ4Level)
		return lz4Codec{level: level}, err
	})
	Register(Info{
		Name:    "zstd",
		Usage:   "zstd[:level=1..4]",
		Example: "zstd:level=2",
		Summary: "id 4: zstd frame (klauspost/compress); levels fastest, default (2), better, best",
	}, func(params map[string]string) (Codec, error) {
		level, err := levelParam(params, 1, 4, DefaultZstdLevel)
		return zstdCodec{level: level}, err
	})
}

// levelParam reads the optional "level" parameter, in [lo, hi], and rejects
// any other parameter.
func levelParam(params map[string]string, lo, hi, def int) (int, error) {
	if err := spec.OnlyParams(params, "level"); err != nil {
		return 0, err
	}
	s, ok := params["level"]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("level %q: want an integer %d..%d", s, lo, hi)
	}
	return n, nil
}

// corrupt wraps a library's decoding error (or describes the problem) as
// ErrCorrupt, naming the codec.
func corrupt(name string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
}

func tooLarge(name string, max int) error {
	return fmt.Errorf("%w: %s output exceeds %d bytes", ErrTooLarge, name, max)
}

var errEmpty = errors.New("empty input (a compressed section is never empty)")

// noLimit stands for "no MaxSize" in the readers' arithmetic.
const noLimit = int(^uint(0) >> 2)

func limitOf(maxSize int) int {
	if maxSize <= 0 {
		return noLimit
	}
	return maxSize
}

// readAllLimited reads r to EOF into a fresh slice with capacity hint
// (clamped to limit), growing as needed, and fails with errOverLimit as soon
// as more than limit bytes arrive: it never holds more than limit+1 bytes of
// output. When hint is the exact size, nothing is copied or wasted.
func readAllLimited(r io.Reader, hint, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(max(hint, 512), limit))
	var probe [1]byte
	for {
		if len(buf) == cap(buf) {
			// Full: find out whether more comes before growing.
			n, err := r.Read(probe[:])
			if n == 0 {
				if err == io.EOF {
					return buf, nil
				}
				if err != nil {
					return nil, err
				}
				continue
			}
			if len(buf)+n > limit {
				return nil, errOverLimit
			}
			grown := make([]byte, len(buf), min(max(2*cap(buf), 4096), limit))
			copy(grown, buf)
			buf = append(grown, probe[:n]...)
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

var errOverLimit = errors.New("over limit")

// noneCodec is id 0: the records section as is. It still copies, because
// the Codec contract gives the caller an output it owns.
type noneCodec struct{}

func (noneCodec) ID() ID         { return None }
func (noneCodec) String() string { return "none" }

func (noneCodec) Compress(ctx context.Context, req CompressRequest) (CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return CompressResponse{}, err
	}
	return CompressResponse{Compressed: append([]byte{}, req.Records...)}, nil
}

func (noneCodec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	if req.MaxSize > 0 && len(req.Compressed) > req.MaxSize {
		return DecompressResponse{}, tooLarge("none", req.MaxSize)
	}
	return DecompressResponse{Records: append([]byte{}, req.Compressed...)}, nil
}
