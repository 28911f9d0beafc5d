package producers

import "errors"

// Idempotent-producer errors, returned by State.Check (and so by the partition's append). Nothing is
// appended when one of them comes back.
var (
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the
	// producer's last one (a gap, an overlap, or a new epoch not starting at
	// 0). Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("producers: out of order sequence")
	// ErrInvalidProducerEpoch: the batch carries an epoch older than the
	// producer's current one (a fenced, zombie producer). Kafka:
	// INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("producers: invalid producer epoch")
	// ErrUnknownProducerID: the partition knows nothing of the producer and
	// the batch does not start at sequence 0 (the producer's state was
	// forgotten, see package topics). Kafka: UNKNOWN_PRODUCER_ID.
	ErrUnknownProducerID = errors.New("producers: unknown producer id")
	// ErrDuplicateSequence: every sequence of the batch lies before the
	// producer's last one, so the batch was appended before, but it is older
	// than the remembered batches and its offsets are unknown. Kafka clients
	// (Java, librdkafka, franz-go) count DUPLICATE_SEQUENCE_NUMBER as success.
	ErrDuplicateSequence = errors.New("producers: duplicate sequence")
)
