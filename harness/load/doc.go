// Package load drives one repetition of a workload against a Kafka
// bootstrap address with franz-go, and measures it.
//
// A repetition creates fresh topics (with the workload's replication
// factor and min.insync.replicas), waits until every partition has a
// leader and all its replicas in its ISR as every seed broker sees it
// (polling Metadata with a deadline: on a cluster, acks=all would
// otherwise wait for followers still joining), starts the consumers, runs
// the producers through a warm-up and then a measured window, waits until
// the consumers have read every record produced in the window, and
// deletes the topics. Figures cover the window only: warm-up traffic fills
// the brokers' and the clients' buffers and caches, and is not counted.
//
// # What is measured, precisely
//
// Every record value starts with its send time: 8 bytes, big-endian Unix
// nanoseconds, written just before the record is handed to the client
// (kgo.Client.Produce); the rest of the value is payload, so message sizes
// include those 8 bytes. A record belongs to the window when its send time
// does. Producers and consumers run in this process, so both ends read one
// clock.
//
//   - produce-msgs/s, produce-MB/s: records (and key+value bytes) sent in the
//     window and acknowledged, over the window's length. MB is 2^20 bytes,
//     the unit of Kreps' 2014 figures the kreps2014 preset prints beside.
//   - ack-*-us: per record, from the send time to the client's promise
//     (the broker's acknowledgement). It includes the time a record waits in
//     the client's buffer and linger, so at full speed it measures queueing
//     (the buffer holds up to 50,000 records or 32 MiB, franz-go's and the
//     Java producer's defaults); set a rate for a latency figure.
//   - e2e-*-us (consume: live): from the send time to the consumer's poll
//     that returned the record.
//   - consume-msgs/s, consume-MB/s: live, the window's records over the
//     time the consumers took to read them (from the poll that returned the
//     first to the poll that returned the last): about the produce rate when
//     the consumers keep up, lower when they fall behind; backlog, every
//     record of the topics read back after the producers finished, over the
//     time from the consumers' start to the last record.
//   - msgs-/bytes-produced and -consumed count the window's records; every
//     record acknowledged must be consumed, exactly once (per partition),
//     or the repetition fails with ErrMismatch: a shortfall is never
//     reported as a figure.
//   - compression-ratio: bytes of the batches as built uncompressed (the
//     records section plus the 61-byte header, from franz-go's batch hook)
//     over the bytes stored: the growth of weir_partition_size_bytes when a
//     BrokerStats is given, else the compressed batches sent.
//   - partition-skew: the window's records on the busiest partition over
//     the mean per partition (1 is perfectly even).
//   - broker-cpu-s, disk-write-bytes, fsyncs: growth of the BrokerStats
//     counters over the window (targets the runner starts; for a cluster
//     the sum over its brokers, each broker's own in Result.Brokers).
//   - client-cpu-s: this process's CPU time over the window (getrusage):
//     the producers' and consumers' work, which shares the machine with
//     brokers the runner starts (the capacity planner's validation needs
//     it to split the machine's CPU between clients and brokers).
//
// Producers are paced, when a rate is set, by a token bucket refilled at
// millisecond ticks: each producer sends rate/producers records per second
// in bursts of what the ticks allow, never sleeping per record. Consumers
// read assigned partitions directly (no consumer group, so no rebalance
// delays distort short runs): consumer i reads partitions i, i+C, i+2C...
// of the topics' partitions in order.
package load
