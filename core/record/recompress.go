package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Recompress appends to dst the batch at the start of b (as Next returned
// it, whole and CRC-checked) with its records section recompressed: the
// section is decompressed with decompress (skipped for CodecNone), checked
// record by record as Records checks it, compressed with compress under codec
// to (skipped for CodecNone) and written after a copy of the header whose
// codec bits, batchLength and CRC are updated. Every other header field
// (offsets, timestamps, producer id, epoch, sequence, counts, the other
// attribute bits) and every record byte is kept, so the batch means exactly
// what it meant, the way Kafka's broker recompresses for a topic's
// compression.type.
//
// Errors: ErrBadRecords wrapping the decompressor's error or describing the
// malformed section; ErrBuild wrapping the compressor's error, or when the
// new section would not fit a batch. Neither function may keep its input.
func Recompress(dst, b []byte, to Codec, decompress, compress func(section []byte) ([]byte, error)) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return dst, err
	}
	if int64(len(b)) < int64(h.Size()) {
		return dst, fmt.Errorf("%w: %d bytes, batch needs %d", ErrShort, len(b), h.Size())
	}
	if to < CodecNone || to > attrCodecMask {
		return dst, fmt.Errorf("%w: codec %d outside 0-7", ErrBuild, to)
	}
	section := b[HeaderSize:h.Size()]
	if h.Codec() != CodecNone {
		if section, err = decompress(section); err != nil {
			return dst, fmt.Errorf("%w: decompress %s: %w", ErrBadRecords, h.Codec(), err)
		}
	}
	if _, err := decodeRecords(h, section); err != nil {
		return dst, err
	}
	if to != CodecNone {
		if section, err = compress(section); err != nil {
			return dst, fmt.Errorf("%w: compress %s: %w", ErrBuild, to, err)
		}
	}
	if len(section) > maxSection {
		return dst, fmt.Errorf("%w: records section of %d bytes exceeds %d", ErrBuild, len(section), maxSection)
	}
	start := len(dst)
	dst = slices.Grow(dst, HeaderSize+len(section))
	dst = append(dst, b[:HeaderSize]...)
	dst = append(dst, section...)
	nb := dst[start:]
	be := binary.BigEndian
	attrs := be.Uint16(nb[offAttributes:])&^attrCodecMask | uint16(to)
	be.PutUint16(nb[offAttributes:], attrs)
	be.PutUint32(nb[offBatchLength:], uint32(len(nb)-lengthPrefix))
	be.PutUint32(nb[offCRC:], crc32.Checksum(nb[offAttributes:], castagnoli))
	return dst, nil
}
