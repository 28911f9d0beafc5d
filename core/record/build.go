package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// RecordHeader is one record header: a non-null string key and a value that is
// null when nil.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch.
type Record struct {
	// Attributes is the record's attribute byte (unused by Kafka, 0).
	Attributes int8
	// TimestampDelta and OffsetDelta are filled by Records; Build ignores
	// them (it uses Timestamp, and the record's index as offset delta).
	TimestampDelta int64
	OffsetDelta    int32
	// Key and Value are null when nil; a non-nil empty slice is empty, not
	// null.
	Key, Value []byte
	Headers    []RecordHeader
	// Timestamp is absolute, in ms since the epoch. Records fills it with
	// BaseTimestamp+TimestampDelta (MaxTimestamp for LogAppendTime batches,
	// as Kafka clients do); Build uses it as the record's time.
	Timestamp int64
}

// BuildOptions are the batch-level fields Build writes. The zero value is a
// plain uncompressed batch with ProducerID, ProducerEpoch and BaseSequence 0;
// DefaultBuildOptions gives what a non-idempotent Kafka producer sends.
type BuildOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// Codec sets attributes bits 0-2. Any value but CodecNone needs Compress,
	// which gets the encoded records section and returns its compressed form.
	// Compress must not keep raw; Build copies the result.
	Codec    Codec
	Compress func(raw []byte) ([]byte, error)
	// ProducerID, ProducerEpoch and BaseSequence are written as given; use
	// NoProducer (-1) for a non-idempotent producer.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Transactional, Control and LogAppendTime set attribute bits 4, 5 and 3.
	// LogAppendTime only sets the bit: maxTimestamp is still the largest
	// record Timestamp.
	Transactional, Control, LogAppendTime bool
}

// DefaultBuildOptions returns the options of a non-idempotent producer:
// ProducerID, ProducerEpoch, BaseSequence and PartitionLeaderEpoch -1,
// everything else zero (base offset 0, no compression).
func DefaultBuildOptions() BuildOptions {
	return BuildOptions{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		ProducerID:           NoProducer,
		ProducerEpoch:        NoProducer,
		BaseSequence:         NoProducer,
	}
}

// maxSection is the largest records section whose batchLength fits an int32.
const maxSection = math.MaxInt32 - minBatchLength

// Build encodes recs into one batch: baseTimestamp is the first record's
// Timestamp, maxTimestamp the largest Timestamp, each record's offsetDelta its
// index, lastOffsetDelta len(recs)-1, and the CRC is computed. It fails with
// ErrBuild when recs is empty, the codec is out of range or lacks Compress,
// Compress fails (its error is wrapped too), or the batch would exceed
// 2 GiB.
func Build(opts BuildOptions, recs []Record) ([]byte, error) {
	return AppendBatch(nil, opts, recs)
}

// AppendBatch is Build appending to dst, so a producer can reuse one buffer.
// On error it returns dst unchanged.
func AppendBatch(dst []byte, opts BuildOptions, recs []Record) ([]byte, error) {
	switch {
	case len(recs) == 0:
		return dst, fmt.Errorf("%w: no records", ErrBuild)
	case opts.Codec < 0 || opts.Codec > attrCodecMask:
		return dst, fmt.Errorf("%w: codec %d does not fit attributes bits 0-2", ErrBuild, opts.Codec)
	case opts.Codec != CodecNone && opts.Compress == nil:
		return dst, fmt.Errorf("%w: codec %s needs a Compress function", ErrBuild, opts.Codec)
	}
	base := recs[0].Timestamp
	maxTimestamp := base
	rawSize := 0
	for i := range recs {
		r := &recs[i]
		maxTimestamp = max(maxTimestamp, r.Timestamp)
		body := bodyLen(r, r.Timestamp-base, i)
		rawSize += varintLen(int64(body)) + body
		if rawSize > maxSection || body < 0 {
			return dst, fmt.Errorf("%w: records section exceeds %d bytes", ErrBuild, maxSection)
		}
	}

	start := len(dst)
	if opts.Codec == CodecNone {
		dst = slices.Grow(dst, HeaderSize+rawSize)[:start+HeaderSize]
		dst = appendRecords(dst, recs, base)
	} else {
		raw := appendRecords(make([]byte, 0, rawSize), recs, base)
		comp, err := opts.Compress(raw)
		if err != nil {
			return dst, fmt.Errorf("%w: compress %s: %w", ErrBuild, opts.Codec, err)
		}
		if len(comp) > maxSection {
			return dst, fmt.Errorf("%w: compressed section exceeds %d bytes", ErrBuild, maxSection)
		}
		dst = slices.Grow(dst, HeaderSize+len(comp))[:start+HeaderSize]
		dst = append(dst, comp...)
	}

	attrs := int16(opts.Codec)
	if opts.LogAppendTime {
		attrs |= attrLogAppendTime
	}
	if opts.Transactional {
		attrs |= attrTransactional
	}
	if opts.Control {
		attrs |= attrControl
	}
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(opts.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-lengthPrefix))
	be.PutUint32(b[offLeaderEpoch:], uint32(opts.PartitionLeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[offAttributes:], uint16(attrs))
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offBaseTimestamp:], uint64(base))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(opts.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(opts.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(opts.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst, nil
}

// appendRecords appends the encoded records; offsetDelta is the index and
// timestampDelta is relative to base (wrapping, so decoding restores it).
func appendRecords(dst []byte, recs []Record, base int64) []byte {
	for i := range recs {
		r := &recs[i]
		delta := r.Timestamp - base
		dst = binary.AppendVarint(dst, int64(bodyLen(r, delta, i)))
		dst = append(dst, byte(r.Attributes))
		dst = binary.AppendVarint(dst, delta)
		dst = binary.AppendVarint(dst, int64(i))
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for _, h := range r.Headers {
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendBytes(dst, h.Value)
		}
	}
	return dst
}

// appendBytes appends a varint length (-1 for nil) and the bytes.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// bodyLen is the encoded size of a record after its length field, or -1 if
// it does not fit an int32.
func bodyLen(r *Record, tsDelta int64, offsetDelta int) int {
	n := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	if n > math.MaxInt32 {
		return -1
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the size of x as a zigzag varint.
func varintLen(x int64) int {
	u := uint64(x<<1) ^ uint64(x>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
