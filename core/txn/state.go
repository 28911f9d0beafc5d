package txn

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Status is a transactional id's state, with Kafka's numbering (the
// TransactionState byte of the log's value).
type Status int8

const (
	Empty             Status = 0
	Ongoing           Status = 1
	PrepareCommit     Status = 2
	PrepareAbort      Status = 3
	CompleteCommit    Status = 4
	CompleteAbort     Status = 5
	Dead              Status = 6
	PrepareEpochFence Status = 7
)

var statusNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

// String returns Kafka's name of the state (as DescribeTransactions and
// ListTransactions report it).
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// ParseStatus is String's inverse.
func ParseStatus(name string) (Status, bool) {
	i := slices.Index(statusNames[:], name)
	return Status(i), i >= 0
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Marker is what the coordinator asks to be written to each partition of a
// completing transaction: a commit or abort control batch of the producer,
// stamped with the coordinator's epoch (the leader epoch of its
// __transaction_state partition), so that a partition refuses markers of a
// deposed coordinator.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// noEpoch is a producer epoch not yet handed out (Kafka's
// RecordBatch.NO_PRODUCER_EPOCH); noProducer likewise for ids.
const (
	noEpoch    int16 = -1
	noProducer int64 = -1
)

// maxEpoch is the last epoch a producer id gets: Kafka rotates to a new
// producer id instead of bumping an epoch of Short.MaxValue - 1, so that the
// bump a timeout or a fence makes still fits.
const maxEpoch = 1<<15 - 2

// meta is a transactional id's durable state: what one record of the log
// holds (TransactionLogValue), plus the last epoch, which Kafka keeps in
// memory only (a retried InitProducerId is recognised by it until a restart).
type meta struct {
	ProducerID     int64
	LastProducerID int64 // before the last rotation to a new id, else -1
	Epoch          int16
	LastEpoch      int16 // the epoch before the last bump, else -1
	Timeout        time.Duration
	State          Status
	Partitions     map[TopicPartition]struct{}
	Start          time.Time // the transaction's first AddPartitions (zero: none)
	Updated        time.Time
}

// clone returns a copy of m that shares nothing with it.
func (m meta) clone() meta {
	m.Partitions = maps.Clone(m.Partitions)
	return m
}

// sortedPartitions returns the partitions in (topic, partition) order.
func (m *meta) sortedPartitions() []TopicPartition {
	ps := slices.Collect(maps.Keys(m.Partitions))
	slices.SortFunc(ps, comparePartitions)
	return ps
}

// keyVersion is the only key version of Kafka's transaction log.
const keyVersion = 0

// encodeKey is TransactionLogKey: int16 version 0, string transactional id.
func encodeKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// encodeValue is TransactionLogValue version 0, as Kafka writes it without
// KIP-890's second part: producer id and epoch, timeout, state, the
// partitions by topic (null when there are none: Kafka writes null for
// Empty and the Complete states), and the two timestamps in milliseconds.
func encodeValue(m *meta) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	v.ProducerID = m.ProducerID
	v.ProducerEpoch = m.Epoch
	v.TimeoutMillis = int32(m.Timeout / time.Millisecond)
	v.State = kmsg.TransactionState(m.State)
	if len(m.Partitions) > 0 {
		for _, tp := range m.sortedPartitions() {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	v.LastUpdateTimestamp = m.Updated.UnixMilli()
	v.StartTimestamp = -1
	if !m.Start.IsZero() {
		v.StartTimestamp = m.Start.UnixMilli()
	}
	return v.AppendTo(nil)
}

// decodeKey reads a key: the transactional id, or ok false for a key of
// another version (none exists in Kafka's log; Load fails on one).
func decodeKey(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", ErrCorrupt, v)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("%w: key: %w", ErrCorrupt, err)
	}
	return k.TransactionalID, nil
}

// decodeValue reads a value of version 0 or 1 (Kafka 3.5+ writes 1, with
// tagged fields this coordinator does not use).
func decodeValue(b []byte) (meta, error) {
	if len(b) < 2 {
		return meta{}, fmt.Errorf("%w: value of %d bytes", ErrCorrupt, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v < 0 || v > 1 {
		return meta{}, fmt.Errorf("%w: value version %d", ErrCorrupt, v)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return meta{}, fmt.Errorf("%w: value: %w", ErrCorrupt, err)
	}
	if v.State < 0 || int(v.State) >= len(statusNames) {
		return meta{}, fmt.Errorf("%w: transaction state %d", ErrCorrupt, v.State)
	}
	m := meta{ProducerID: v.ProducerID, LastProducerID: noProducer, Epoch: v.ProducerEpoch, LastEpoch: noEpoch,
		Timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, State: Status(v.State),
		Updated: time.UnixMilli(v.LastUpdateTimestamp)}
	if v.StartTimestamp >= 0 {
		m.Start = time.UnixMilli(v.StartTimestamp)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if m.Partitions == nil {
				m.Partitions = map[TopicPartition]struct{}{}
			}
			m.Partitions[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return m, nil
}
