package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// minRecordSize is the smallest encoded record: a one-byte length and six
// one-byte fields (attributes, timestampDelta, offsetDelta, null key, null
// value, no headers).
const minRecordSize = 7

// Records decodes the records of the whole batch at the start of b, as Next
// returned it. Records does not check the CRC; call Next first. For a
// compressed batch it calls decompress(codec, section) with the records
// section and decodes what that returns; it fails with ErrCompressed if
// decompress is nil, and with ErrBadRecords wrapping the decompressor's error
// if that fails (both errors.Is checks work, so a caller can tell a crashed
// plugin from bad bytes).
//
// Besides the per-record format, Records checks that the section holds
// exactly recordCount records and nothing after them, and that offset deltas
// increase strictly and stay within lastOffsetDelta (compaction may leave
// gaps). Any failure is ErrBadRecords (or ErrShort / ErrBadMagic / ... from
// the header).
//
// The returned Key, Value and header Value slices alias b, or the buffer
// decompress returned, with their capacity clipped to their length: they are
// valid as long as that memory is, and appending to them copies. Header keys
// are copied into strings.
func Records(b []byte, decompress func(c Codec, section []byte) ([]byte, error)) ([]Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if size := int64(lengthPrefix) + int64(h.BatchLength); int64(len(b)) < size {
		return nil, fmt.Errorf("%w: %d bytes, batch needs %d", ErrShort, len(b), size)
	}
	section := b[HeaderSize:h.Size()]
	if c := h.Codec(); c != CodecNone {
		if decompress == nil {
			return nil, fmt.Errorf("%w: codec %s", ErrCompressed, c)
		}
		raw, err := decompress(c, section)
		if err != nil {
			return nil, fmt.Errorf("%w: decompress %s: %w", ErrBadRecords, c, err)
		}
		section = raw
	}
	return decodeRecords(h, section)
}

func decodeRecords(h Header, section []byte) ([]Record, error) {
	if int64(h.RecordCount) > int64(len(section)/minRecordSize) {
		return nil, fmt.Errorf("%w: recordCount %d cannot fit in %d bytes", ErrBadRecords, h.RecordCount, len(section))
	}
	recs := make([]Record, h.RecordCount)
	err := walkRecords(h, section, func(i int) *Record { return &recs[i] }, nil)
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// ForEach decodes the records of section, the uncompressed records section
// of the batch whose header is h (as Next returned it; decompress a
// compressed section first), and calls fn for each, in order, with the
// record and raw, its encoded bytes from its length field on: copying raw
// records into a new section (with a header from PutHeader) keeps them
// exactly, offset and timestamp deltas included, which is how the log
// cleaner drops records from a batch.
//
// It checks what Records checks, and stops at the first error: a malformed
// section (ErrBadRecords) or the error fn returned, which it returns as is.
// r points to the same Record at every call, overwritten for each record,
// and its Key, Value and header values, and raw, alias section: copy what
// must outlive the call. It allocates only for records with headers.
func ForEach(h Header, section []byte, fn func(r *Record, raw []byte) error) error {
	if int64(h.RecordCount) > int64(len(section)/minRecordSize) {
		return fmt.Errorf("%w: recordCount %d cannot fit in %d bytes", ErrBadRecords, h.RecordCount, len(section))
	}
	var r Record
	return walkRecords(h, section, func(int) *Record { r = Record{}; return &r }, fn)
}

// walkRecords decodes recordCount records of section into the records at(i)
// returns, checking each and calling fn (if not nil) after each.
func walkRecords(h Header, section []byte, at func(i int) *Record, fn func(r *Record, raw []byte) error) error {
	logAppendTime := h.TimestampType() == LogAppendTime
	prevOffset := int32(-1)
	pos := 0
	for i := 0; i < int(h.RecordCount); i++ {
		start := pos
		length, n := readVarint32(section[pos:])
		if n == 0 || length < 0 || int(length) > len(section)-pos-n {
			return fmt.Errorf("%w: record %d at byte %d: bad length", ErrBadRecords, i, pos)
		}
		pos += n
		r := at(i)
		if why := decodeRecord(section[pos:pos+int(length)], r); why != "" {
			return fmt.Errorf("%w: record %d at byte %d: %s", ErrBadRecords, i, pos-n, why)
		}
		pos += int(length)
		if r.OffsetDelta <= prevOffset || r.OffsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: record %d: offsetDelta %d after %d, lastOffsetDelta %d",
				ErrBadRecords, i, r.OffsetDelta, prevOffset, h.LastOffsetDelta)
		}
		prevOffset = r.OffsetDelta
		if logAppendTime {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp = h.BaseTimestamp + r.TimestampDelta
		}
		if fn != nil {
			if err := fn(r, section[start:pos:pos]); err != nil {
				return err
			}
		}
	}
	if pos != len(section) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrBadRecords, len(section)-pos, h.RecordCount)
	}
	return nil
}

// decodeRecord decodes one record body (after its length) into r and returns
// "" or why it is malformed. It must consume the body exactly.
func decodeRecord(body []byte, r *Record) string {
	if len(body) < 1 {
		return "empty record"
	}
	r.Attributes = int8(body[0])
	pos := 1
	ts, n := binary.Varint(body[pos:])
	if n <= 0 {
		return "bad timestampDelta"
	}
	r.TimestampDelta = ts
	pos += n
	off, n := readVarint32(body[pos:])
	if n == 0 {
		return "bad offsetDelta"
	}
	r.OffsetDelta = off
	pos += n
	var ok bool
	if r.Key, pos, ok = readBytes(body, pos); !ok {
		return "bad key"
	}
	if r.Value, pos, ok = readBytes(body, pos); !ok {
		return "bad value"
	}
	count, n := readVarint32(body[pos:])
	if n == 0 || count < 0 {
		return "bad header count"
	}
	pos += n
	if count > 0 {
		// Each header takes at least two bytes; this bounds the allocation.
		if int(count) > (len(body)-pos)/2 {
			return "header count exceeds record"
		}
		r.Headers = make([]RecordHeader, count)
		for j := range r.Headers {
			klen, n := readVarint32(body[pos:])
			if n == 0 || klen < 0 || int(klen) > len(body)-pos-n {
				return "bad header key"
			}
			pos += n
			r.Headers[j].Key = string(body[pos : pos+int(klen)])
			pos += int(klen)
			if r.Headers[j].Value, pos, ok = readBytes(body, pos); !ok {
				return "bad header value"
			}
		}
	}
	if pos != len(body) {
		return "length does not match contents"
	}
	return ""
}

// readBytes reads a varint length (-1 for null) and that many bytes of b at
// pos, returning them with their capacity clipped.
func readBytes(b []byte, pos int) ([]byte, int, bool) {
	l, n := readVarint32(b[pos:])
	if n == 0 || l < -1 {
		return nil, pos, false
	}
	pos += n
	if l == -1 {
		return nil, pos, true
	}
	end := pos + int(l)
	if int(l) > len(b)-pos {
		return nil, pos, false
	}
	return b[pos:end:end], end, true
}

// readVarint32 reads a zigzag varint that must fit an int32 in at most 5
// bytes, as Kafka requires. n is 0 if it does not.
func readVarint32(b []byte) (v int32, n int) {
	x, n := binary.Varint(b)
	if n <= 0 || n > 5 || x < math.MinInt32 || x > math.MaxInt32 {
		return 0, 0
	}
	return int32(x), n
}

// AppendWithOffsetDelta appends to dst the record raw, one whole encoded
// record as ForEach hands it out (its length field first), with its
// offsetDelta replaced by delta and its length field updated; every other
// byte is copied as it is. The log cleaner uses it to lower a batch's base
// offset over records removed before it. It fails with ErrBadRecords,
// returning dst unchanged, if raw is not one record.
func AppendWithOffsetDelta(dst, raw []byte, delta int32) ([]byte, error) {
	length, n := readVarint32(raw)
	if n == 0 || length < 1 || int(length) != len(raw)-n {
		return dst, fmt.Errorf("%w: not one record", ErrBadRecords)
	}
	body := raw[n:]
	_, nts := binary.Varint(body[1:])
	if nts <= 0 {
		return dst, fmt.Errorf("%w: bad timestampDelta", ErrBadRecords)
	}
	_, noff := readVarint32(body[1+nts:])
	if noff == 0 {
		return dst, fmt.Errorf("%w: bad offsetDelta", ErrBadRecords)
	}
	rest := body[1+nts+noff:]
	dst = binary.AppendVarint(dst, int64(1+nts+varintLen(int64(delta))+len(rest)))
	dst = append(dst, body[:1+nts]...)
	dst = binary.AppendVarint(dst, int64(delta))
	return append(dst, rest...), nil
}
