// Package partitioner will hold the Partitioner interface (choose partitions for
// a batch of records), the built-ins (Kafka's murmur2 default, librdkafka's
// CRC32 default, round-robin, sticky, random) and the go-plugin shim.
package partitioner
