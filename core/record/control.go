package record

import (
	"encoding/binary"
	"fmt"
)

// Control batches carry Kafka's transaction markers: attributes bits 4
// (transactional) and 5 (control) set, one record whose key is the control
// record type and whose value is the end-transaction marker
// (ControlRecordType.java, EndTransactionMarker.java):
//
//	key   = version int16 (0), type int16 (0 abort, 1 commit)
//	value = version int16 (0), coordinatorEpoch int32
//
// The producer id and epoch in the batch header are the transaction's; the
// base sequence is -1 (markers take no sequence number).

// ControlType is a control record's type.
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// String returns "abort", "commit" or "control(N)".
func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// EndTxnMarker is the decoded record of a transaction-marker batch.
type EndTxnMarker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// ControlBatchOptions are the fields of a transaction-marker batch.
type ControlBatchOptions struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	// Timestamp is the record's time (ms since the epoch), as Kafka stamps
	// markers with the broker's clock.
	Timestamp int64
}

// BuildControlBatch encodes a transaction marker as Kafka writes it: one
// uncompressed batch with the transactional and control bits, the producer's
// id and epoch, base sequence -1, partition leader epoch -1 (the log stamps
// it) and base offset 0 (the log assigns it).
func BuildControlBatch(o ControlBatchOptions) []byte {
	typ := ControlAbort
	if o.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	val := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	val = binary.BigEndian.AppendUint32(val, uint32(o.CoordinatorEpoch))
	opts := BuildOptions{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		ProducerID:           o.ProducerID,
		ProducerEpoch:        o.ProducerEpoch,
		BaseSequence:         NoProducer,
		Transactional:        true,
		Control:              true,
	}
	b, err := Build(opts, []Record{{Key: key, Value: val, Timestamp: o.Timestamp}})
	if err != nil {
		panic("record: building a control batch: " + err.Error()) // cannot fail: one small uncompressed record
	}
	return b
}

// ParseControlBatch decodes the marker of a control batch b (whole, as Next
// returns it): ErrCorrupt when b is not a control batch holding one
// end-transaction record of version 0 with a known type. Control batches are
// never compressed by Kafka; a compressed one is refused too.
func ParseControlBatch(b []byte) (EndTxnMarker, error) {
	h, n, err := Next(b, len(b))
	if err != nil {
		return EndTxnMarker{}, err
	}
	if !h.Control() {
		return EndTxnMarker{}, &corruptError{fmt.Sprintf("record: batch at offset %d is not a control batch", h.BaseOffset)}
	}
	if h.Codec() != CodecNone || h.RecordCount != 1 {
		return EndTxnMarker{}, &corruptError{fmt.Sprintf("record: control batch at offset %d: codec %s, %d records (want none, 1)",
			h.BaseOffset, h.Codec(), h.RecordCount)}
	}
	recs, err := decodeRecords(h, b[HeaderSize:n])
	if err != nil {
		return EndTxnMarker{}, err
	}
	k, v := recs[0].Key, recs[0].Value
	if len(k) < 4 || binary.BigEndian.Uint16(k) != 0 {
		return EndTxnMarker{}, &corruptError{fmt.Sprintf("record: control batch at offset %d: key %x", h.BaseOffset, k)}
	}
	m := EndTxnMarker{Type: ControlType(binary.BigEndian.Uint16(k[2:]))}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return m, &corruptError{fmt.Sprintf("record: control batch at offset %d: type %s is not a transaction marker", h.BaseOffset, m.Type)}
	}
	if len(v) < 6 || binary.BigEndian.Uint16(v) != 0 {
		return m, &corruptError{fmt.Sprintf("record: control batch at offset %d: marker value %x", h.BaseOffset, v)}
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(v[2:]))
	return m, nil
}
