package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
)

const (
	// HeaderSize is the number of bytes before the records section.
	HeaderSize = 61
	// Magic is the only batch format version this package accepts.
	Magic = 2
	// MinBatchSize is the smallest valid total batch size: a header and no
	// records, as left by compaction.
	MinBatchSize = HeaderSize

	// NoProducer is the ProducerID, ProducerEpoch and BaseSequence of a batch
	// from a non-idempotent producer.
	NoProducer = -1
	// NoPartitionLeaderEpoch is the partitionLeaderEpoch producers send; the
	// leader overwrites it.
	NoPartitionLeaderEpoch = -1
)

// Byte offsets of the header fields.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // first byte covered by the CRC
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// lengthPrefix is the bytes not counted by batchLength (baseOffset and
	// batchLength itself).
	lengthPrefix = 12
	// minBatchLength is the smallest valid batchLength.
	minBatchLength = HeaderSize - lengthPrefix
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is the compression id in attributes bits 0-2.
type Codec int8

// Standard codec ids; 5-7 are free for custom codecs.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns "none", "gzip", "snappy", "lz4", "zstd", "custom-5" ..
// "custom-7", or "codec(N)" for a value that does not fit in three bits.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	case 5, 6, 7:
		return "custom-" + strconv.Itoa(int(c))
	}
	return "codec(" + strconv.Itoa(int(c)) + ")"
}

// TimestampType is attributes bit 3: who set the record timestamps.
type TimestampType int8

const (
	// CreateTime: the producer set the timestamps.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker set maxTimestamp to its clock on append, and
	// that is every record's timestamp.
	LogAppendTime TimestampType = 1
)

// String returns "CreateTime" or "LogAppendTime".
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// Header is the decoded 61-byte batch header.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after this field: the batch is 12+BatchLength bytes
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // as stored
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the total size of the batch in bytes, 12 + BatchLength.
func (h Header) Size() int { return lengthPrefix + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record (BaseOffset +
// LastOffsetDelta). After compaction the record at that offset may be gone,
// but the offset stays used.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch, LastOffset()+1.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec of the records section.
func (h Header) Codec() Codec { return Codec(h.Attributes & attrCodecMask) }

// TimestampType tells whether record timestamps are the producer's
// (CreateTime) or the broker's (LogAppendTime, all equal to MaxTimestamp).
func (h Header) TimestampType() TimestampType {
	if h.Attributes&attrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// Transactional reports whether the batch belongs to a transaction.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds a control record (a transaction
// marker) rather than data.
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// ParseHeader decodes the 61-byte header at the start of b, checking only what
// the header alone can tell, in this order: len(b) >= HeaderSize (ErrShort),
// magic == 2 (ErrBadMagic), batchLength >= HeaderSize-12 (ErrBadLength),
// recordCount >= 0 and lastOffsetDelta >= 0 (ErrBadRecords). It checks
// neither the CRC nor that b holds the whole batch; Next does. It does not
// allocate unless it fails.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrShort, len(b), HeaderSize)
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	switch {
	case h.Magic != Magic:
		return Header{}, fmt.Errorf("%w: %d, want %d", ErrBadMagic, h.Magic, Magic)
	case h.BatchLength < minBatchLength:
		return Header{}, fmt.Errorf("%w: batchLength %d < %d", ErrBadLength, h.BatchLength, minBatchLength)
	case h.RecordCount < 0:
		return Header{}, fmt.Errorf("%w: recordCount %d < 0", ErrBadRecords, h.RecordCount)
	case h.LastOffsetDelta < 0:
		return Header{}, fmt.Errorf("%w: lastOffsetDelta %d < 0", ErrBadRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// Next validates the batch at the start of b completely: the header as in
// ParseHeader, then Size() <= maxSize when maxSize > 0 (ErrBadLength), then
// len(b) >= Size() (ErrShort), then the CRC-32C over b[21:Size()] (ErrBadCRC).
// The size limit is checked before the length of b so that a garbage length
// reads as damage, not as a tail still to come.
//
// It returns the header and the batch size, so callers can walk a buffer of
// concatenated batches:
//
//	for len(b) > 0 {
//		h, n, err := record.Next(b, max)
//		if err != nil { ... }
//		b = b[n:]
//	}
//
// On error n is 0, and h is the zero Header if the header itself is bad, or
// the parsed (untrusted) header otherwise, for diagnostics. Next does not
// allocate unless it fails.
func Next(b []byte, maxSize int) (Header, int, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, 0, err
	}
	size := int64(lengthPrefix) + int64(h.BatchLength) // int64: no overflow where int is 32 bits
	if maxSize > 0 && size > int64(maxSize) {
		return h, 0, fmt.Errorf("%w: batch of %d bytes exceeds limit %d", ErrBadLength, size, maxSize)
	}
	if int64(len(b)) < size {
		return h, 0, fmt.Errorf("%w: %d bytes, batch needs %d", ErrShort, len(b), size)
	}
	if sum := crc32.Checksum(b[offAttributes:size], castagnoli); sum != h.CRC {
		return h, 0, fmt.Errorf("%w: stored 0x%08x, computed 0x%08x", ErrBadCRC, h.CRC, sum)
	}
	return h, int(size), nil
}

// ValidateProduced does the extra checks a broker applies to a batch a
// producer sent, after Next succeeded: recordCount >= 1 and lastOffsetDelta ==
// recordCount-1 (else ErrBadRecords). It does not look at the records, so it
// never decompresses and never allocates unless it fails.
func ValidateProduced(h Header) error {
	if h.RecordCount < 1 {
		return fmt.Errorf("%w: produced batch with recordCount %d", ErrBadRecords, h.RecordCount)
	}
	if int64(h.LastOffsetDelta) != int64(h.RecordCount)-1 {
		return fmt.Errorf("%w: lastOffsetDelta %d with recordCount %d", ErrBadRecords, h.LastOffsetDelta, h.RecordCount)
	}
	return nil
}

// ValidateStored does the checks a batch must pass to be stored as a log
// already holds it (a follower copying its leader's log), after Next
// succeeded: baseOffset >= 0, its last offset fits an int64, and
// recordCount <= lastOffsetDelta+1 (each record has its own offset within
// the batch), else ErrBadRecords. Unlike ValidateProduced it accepts the
// shapes the log cleaner writes: offset deltas that skip, and batches of no
// records. It never allocates unless it fails.
func ValidateStored(h Header) error {
	if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-1-int64(h.LastOffsetDelta) {
		return fmt.Errorf("%w: stored batch at offset %d with lastOffsetDelta %d", ErrBadRecords, h.BaseOffset, h.LastOffsetDelta)
	}
	if int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: %d records in %d offsets", ErrBadRecords, h.RecordCount, int64(h.LastOffsetDelta)+1)
	}
	return nil
}

// SetBaseOffset writes offset into the batch at the start of b (@0). The CRC
// does not cover it, so the batch stays valid. It panics if len(b) < 8.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch writes epoch into the batch at the start of b (@12).
// The CRC does not cover it, so the batch stays valid. It panics if
// len(b) < 16.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// PutHeader writes h into the first HeaderSize bytes of b, a whole batch
// whose records section b[HeaderSize:] follows, and makes the batch valid:
// batchLength is set to len(b)-12, magic to 2 and the CRC computed over
// b[21:]; every other field is written from h as given (h.BatchLength,
// h.Magic and h.CRC are ignored). h must describe the section that follows
// (RecordCount records, their offset deltas within LastOffsetDelta, the codec
// in Attributes): PutHeader does not look at it.
//
// With it a batch can be rewritten without rebuilding its records: the log
// cleaner writes a batch keeping some of its records (their bytes copied from
// ForEach, their offset deltas unchanged, so the deltas then skip), lowers a
// batch's base offset over records removed before it (AppendWithOffsetDelta),
// and writes batches with no records (an empty section) that only cover a
// range of offsets.
// It panics if len(b) < HeaderSize or len(b)-12 does not fit an int32.
func PutHeader(b []byte, h Header) {
	if len(b) < HeaderSize || int64(len(b)) > lengthPrefix+math.MaxInt32 {
		panic(fmt.Sprintf("record: PutHeader on %d bytes", len(b)))
	}
	putFields(b, h)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// putFields writes h's fields (all but the CRC) into b's header.
func putFields(b []byte, h Header) {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-lengthPrefix))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[offAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(h.RecordCount))
}

// WithCodec returns attrs with its codec bits (0-2) set to c.
func WithCodec(attrs int16, c Codec) int16 { return attrs&^attrCodecMask | int16(c)&attrCodecMask }
