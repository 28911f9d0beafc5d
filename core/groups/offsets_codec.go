package groups

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Records of the offsets log use Kafka's own __consumer_offsets formats:
// key version 1 (an offset commit key) and value version 3.
const (
	keyVersion   = 1
	valueVersion = 3
	// maxString is the longest string the formats hold (int16 length).
	maxString = math.MaxInt16
)

// offsetKey identifies one committed offset.
type offsetKey struct {
	group string
	TopicPartition
}

// stored is a committed offset with the time of its commit (kept for
// offset retention: Coordinator.ExpireOffsets).
type stored struct {
	Committed
	commitTime int64 // ms since the epoch
	// at is the position of the offset's record in the log: its offset
	// for records replayed; for records written since the load, a count
	// going on from the log's end then (offsetStore.next). Only its order
	// matters: it is the log's.
	at int64
}

// appendKey encodes k as: int16 version | string group | string topic |
// int32 partition, strings being an int16 length and the bytes.
func appendKey(dst []byte, k offsetKey) []byte {
	dst = binary.BigEndian.AppendUint16(dst, keyVersion)
	dst = appendString(dst, k.group)
	dst = appendString(dst, k.Topic)
	return binary.BigEndian.AppendUint32(dst, uint32(k.Partition))
}

// appendValue encodes v as: int16 version | int64 offset | int32 leader
// epoch | string metadata | int64 commit timestamp.
func appendValue(dst []byte, v stored) []byte {
	dst = binary.BigEndian.AppendUint16(dst, valueVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.LeaderEpoch))
	dst = appendString(dst, v.Metadata)
	return binary.BigEndian.AppendUint64(dst, uint64(v.commitTime))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// decoder reads the fields of one key or value, remembering the first
// error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = fmt.Errorf("%w: record field needs %d bytes, %d left", ErrCorrupt, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int16() int16 {
	if b := d.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if b := d.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) string() string {
	n := d.int16()
	return string(d.take(int(n)))
}

// done fails if bytes are left over, and returns the first error.
func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after the %s", ErrCorrupt, len(d.b), what)
	}
	return d.err
}

func decodeKey(b []byte) (offsetKey, error) {
	d := decoder{b: b}
	if v := d.int16(); d.err == nil && v != keyVersion && v != 0 { // v0 is the same format
		return offsetKey{}, fmt.Errorf("%w: key version %d, want %d", ErrCorrupt, v, keyVersion)
	}
	var k offsetKey
	k.group = d.string()
	k.Topic = d.string()
	k.Partition = d.int32()
	return k, d.done("key")
}

func decodeValue(b []byte) (stored, error) {
	d := decoder{b: b}
	if v := d.int16(); d.err == nil && v != valueVersion {
		return stored{}, fmt.Errorf("%w: value version %d, want %d", ErrCorrupt, v, valueVersion)
	}
	var v stored
	v.Offset = d.int64()
	v.LeaderEpoch = d.int32()
	v.Metadata = d.string()
	v.commitTime = d.int64()
	return v, d.done("value")
}
