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
	// ErrInvalidPartitions: a partition count below 1 (other than -1, the
	// default) or above MaxPartitions.
	ErrInvalidPartitions = errors.New("topics: invalid number of partitions")
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
