package codec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/golang/snappy"
)

// snappyCodec is id 2. Compress writes the xerial framing the JVM producer
// writes (snappy-java's SnappyOutputStream):
//
//	magic "\x82SNAPPY\x00" (8 bytes), version 1 (int32), compatible version 1 (int32),
//	then per block of at most 32 KiB of input: length (int32, big-endian), raw snappy block
//
// Decompress accepts that framing and raw (unframed) snappy, which
// librdkafka and franz-go produce. See the package doc for why Compress
// frames.
type snappyCodec struct{}

func (snappyCodec) ID() ID         { return Snappy }
func (snappyCodec) String() string { return "snappy" }

var (
	xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	// xerialHeader is the magic, version 1 and minimum compatible version
	// 1, as snappy-java writes them (its reader rejects a lower version).
	xerialHeader = append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
)

const (
	xerialHeaderLen = 16
	xerialBlockSize = 32 << 10 // snappy-java's default block size
)

var snappyScratch = sync.Pool{New: func() any { return new([]byte) }}

func (snappyCodec) Compress(ctx context.Context, req CompressRequest) (CompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return CompressResponse{}, err
	}
	in := req.Records
	if len(in) == 0 {
		// A header with no blocks is valid xerial, but franz-go reads a
		// 16-byte input as raw snappy and fails; raw snappy of nothing
		// is one zero byte, which every reader accepts. (Batches always
		// hold a record, so this is for completeness.)
		return CompressResponse{Compressed: []byte{0}}, nil
	}
	blocks := (len(in) + xerialBlockSize - 1) / xerialBlockSize
	worst := xerialHeaderLen + blocks*(4+snappy.MaxEncodedLen(xerialBlockSize))
	p := snappyScratch.Get().(*[]byte)
	defer snappyScratch.Put(p)
	if cap(*p) < worst {
		*p = make([]byte, worst)
	}
	dst := append((*p)[:0], xerialHeader...)
	for len(in) > 0 {
		n := min(len(in), xerialBlockSize)
		at := len(dst)
		// Encode straight into the scratch after a 4-byte length slot;
		// snappy.Encode uses the room it is given when it is enough.
		block := snappy.Encode(dst[at+4:cap(dst)], in[:n])
		binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		in = in[n:]
	}
	*p = dst
	return CompressResponse{Compressed: bytes.Clone(dst)}, nil
}

func (snappyCodec) Decompress(ctx context.Context, req DecompressRequest) (DecompressResponse, error) {
	if err := ctx.Err(); err != nil {
		return DecompressResponse{}, err
	}
	in := req.Compressed
	if len(in) == 0 {
		return DecompressResponse{}, corrupt("snappy", errEmpty)
	}
	limit := limitOf(req.MaxSize)
	// Raw snappy cannot start with the magic: it would be a back-reference
	// before any literal.
	if len(in) >= xerialHeaderLen && bytes.HasPrefix(in, xerialMagic) {
		return decodeXerial(in[xerialHeaderLen:], req.MaxSize, limit)
	}
	n, err := snappyLen(in)
	if err != nil {
		return DecompressResponse{}, err
	}
	if n > limit {
		return DecompressResponse{}, tooLarge("snappy", req.MaxSize)
	}
	out, err := snappy.Decode(make([]byte, n), in)
	if err != nil {
		return DecompressResponse{}, corrupt("snappy", err)
	}
	return DecompressResponse{Records: out}, nil
}

var errXerial = errors.New("malformed xerial framing")

// decodeXerial decodes the blocks after the xerial header. It first walks
// the block lengths and the decoded lengths each block declares, so the
// limit is checked and the output allocated once, before decoding anything.
func decodeXerial(in []byte, maxSize, limit int) (DecompressResponse, error) {
	total := 0
	for rem := in; len(rem) > 0; {
		if len(rem) < 4 {
			return DecompressResponse{}, corrupt("snappy", fmt.Errorf("%w: %d trailing bytes", errXerial, len(rem)))
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return DecompressResponse{}, corrupt("snappy", fmt.Errorf("%w: block of %d bytes, %d left", errXerial, size, len(rem)))
		}
		n, err := snappyLen(rem[:size])
		if err != nil {
			return DecompressResponse{}, err
		}
		if n > limit-total {
			return DecompressResponse{}, tooLarge("snappy", maxSize)
		}
		total += n
		rem = rem[size:]
	}
	out := make([]byte, total)
	at := 0
	for len(in) > 0 {
		size := binary.BigEndian.Uint32(in)
		in = in[4:]
		n, _ := snappy.DecodedLen(in[:size]) // checked above
		if _, err := snappy.Decode(out[at:at+n], in[:size]); err != nil {
			return DecompressResponse{}, corrupt("snappy", err)
		}
		at += n
		in = in[size:]
	}
	return DecompressResponse{Records: out}, nil
}

// snappyLen returns the decoded length a raw snappy block declares, after
// checking that the block could produce it: the densest snappy element, a
// 3-byte copy of 64 bytes, expands 64/3 times, so a block claiming more than
// 22 times its size is corrupt, and refused before anything is allocated
// (even with no MaxSize).
func snappyLen(block []byte) (int, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return 0, corrupt("snappy", err)
	}
	if n > 22*len(block)+16 {
		return 0, corrupt("snappy", fmt.Errorf("block of %d bytes claims to decode to %d", len(block), n))
	}
	return n, nil
}
