// Package partitioner chooses partitions for records: the [Partitioner]
// interface (one call per batch of records bound for one topic), the
// built-ins, and a registry that builds them from specs such as
// "murmur2:seed=42".
//
// # Why the built-ins copy clients exactly
//
// A partitioner's main job is key affinity: every record with the same key
// lands on the same partition, so a consumer sees one key's records in order.
// That holds across producers only if they all compute the same partition
// for a key, and real deployments mix clients. So each hashing built-in
// reproduces one client's arithmetic bit for bit (hash, sign handling,
// modulo, and what counts as "no key"), and transport/e2e checks that each
// key lands where the client itself puts it when it produces to a real
// broker:
//
//	spec         client it copies                           keyed records               null key      empty key
//	murmur2      Kafka Java default, franz-go                toPositive(murmur2(k)) % n  sticky        hashed
//	             StickyKeyPartitioner(nil), librdkafka
//	             murmur2_random
//	crc32        librdkafka default (consistent_random)     crc32(k) % n, unsigned      random        random
//	fnv1a        sarama default (NewHashPartitioner)        |int32(fnv1a(k)) % n|       random        hashed
//	round-robin  franz-go and Java RoundRobinPartitioner    i-th record -> i % n, keys ignored
//	sticky       franz-go StickyPartitioner (per call)      one partition per call, never the previous call's
//	random       -                                          uniform per record, keys ignored
//
// "sticky" means one partition for all such records of a call, chosen at
// random and different from the previous call's choice for the topic (when
// n > 1): Kafka's KIP-480 sticks per batch, and a call is weir's batch.
// "random" draws per record. murmur2's toPositive is h & 0x7fffffff, not an
// absolute value; sarama's fnv1a takes the absolute value of a signed
// remainder instead, so even with the same hash the two would disagree.
//
// # Seeds and state
//
// Stateful built-ins keep per-topic state (round-robin position, last sticky
// choice) and a random generator. Those that draw at random take seed=N (an
// unsigned 64-bit integer); without it each instance draws its own seed, as
// real producers do, so many producers built from one spec do not pick the
// same partitions in lockstep. String always reports the seed in use
// ("murmur2:seed=8211..."), so a spec recorded with a result rebuilds a
// partitioner that makes the same choices from the same calls. round-robin
// draws nothing and takes no parameters.
//
// # Batches, not records
//
// An external partitioner runs in another process over go-plugin gRPC, about
// 0.1 ms a call, so the interface takes a whole batch of keys per call and a
// producer makes one call per batch. [Check] verifies an answer (one
// partition per key, each in range) before a caller trusts it; package
// plugins/kgoadapt applies an answer to franz-go records, and package
// partitionertest is the conformance suite every implementation runs.
package partitioner
