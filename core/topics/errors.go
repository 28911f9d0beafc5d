package topics

import "errors"

// Registry errors. Each is returned wrapped (with %w) in an error that names
// the topic, partition, key or value at fault.
var (
	// ErrTopicExists: Create of a name already in use.
	ErrTopicExists = errors.New("topics: topic already exists")
	// ErrUnknownTopic: no topic of that name.
	ErrUnknownTopic = errors.New("topics: unknown topic")
	// ErrUnknownPartition: the topic exists but has no such partition.
	ErrUnknownPartition = errors.New("topics: unknown partition")
	// ErrInvalidTopic: the name breaks Kafka's rules ([a-zA-Z0-9._-], 1..249
	// characters, not "." or ".."), or a directory that is not a weir
	// partition is in the way of the topic's partition directories.
	ErrInvalidTopic = errors.New("topics: invalid topic")
	// ErrInvalidPartitions: a partition count below 1 (other than -1, the
	// default) or above MaxPartitions.
	ErrInvalidPartitions = errors.New("topics: invalid number of partitions")
	// ErrInvalidConfig: an unknown topic config key, or a value out of range
	// for its key. The error names both.
	ErrInvalidConfig = errors.New("topics: invalid config")
	// ErrCorruptMetadata: weir-meta.json (or a partition's partition.metadata)
	// cannot be parsed or contradicts itself. Open refuses to guess.
	ErrCorruptMetadata = errors.New("topics: corrupt metadata")
	// ErrMissingMetadata: weir-meta.json is missing but the data directory
	// holds partition directories: Open refuses to start (and to touch
	// them) rather than serve an empty broker over data it cannot name.
	ErrMissingMetadata = errors.New("topics: metadata missing")
	// ErrClosed: the registry was closed.
	ErrClosed = errors.New("topics: registry closed")
)

// Idempotent-producer errors, returned by Partition.Append. Nothing is
// appended when one of them comes back.
var (
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the
	// producer's last one (a gap, an overlap, or a new epoch not starting at
	// 0). Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("topics: out of order sequence")
	// ErrInvalidProducerEpoch: the batch carries an epoch older than the
	// producer's current one (a fenced, zombie producer). Kafka:
	// INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("topics: invalid producer epoch")
	// ErrUnknownProducerID: the partition knows nothing of the producer and
	// the batch does not start at sequence 0 (the producer's state was
	// forgotten, see the package doc). Kafka: UNKNOWN_PRODUCER_ID.
	ErrUnknownProducerID = errors.New("topics: unknown producer id")
	// ErrDuplicateSequence: every sequence of the batch lies before the
	// producer's last one, so the batch was appended before, but it is older
	// than the remembered batches and its offsets are unknown. Kafka clients
	// (Java, librdkafka, franz-go) count DUPLICATE_SEQUENCE_NUMBER as success.
	ErrDuplicateSequence = errors.New("topics: duplicate sequence")
)
