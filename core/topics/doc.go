// Package topics is the broker's topic registry: which topics exist, with
// which configs (package topicconfig) and partitions, each partition a
// partlog.Log; plus the
// per-partition idempotent-producer checks that decide whether a produced
// batch is new, a retry, or an error. It owns the data directory's metadata;
// it knows nothing of the network (the transport maps its errors to Kafka
// codes) and nothing of files beyond the vfs seam.
//
// # Data directory
//
//	<Dir>/
//	    weir-meta.json            topics and the producer-id counter (below)
//	    <topic>-<partition>/      one partition log (see package partlog)
//	        partition.metadata    "version: 1\ntopic_id: <hex>": marks the directory as weir's
//	        00000000000000000000.log .index .timeindex recovery-point ...
//
// weir-meta.json is the embedded single-node metadata store:
//
//	{"version": 1,
//	 "topics": [{"name": "orders", "id": "<32 hex digits>", "partitions": 3,
//	             "configs": {"retention.ms": "86400000"}}],
//	 "nextProducerID": 2000,
//	 "deleting": [{"name": "old", "id": "<32 hex digits>", "partitions": 1}]}
//
// It is replaced atomically (write weir-meta.json.tmp, fsync, rename, fsync
// the directory), so a crash leaves the old or the new version, never a mix.
// Every change writes the metadata first and the directories second, so that
// what a crash leaves behind is always something Open can finish:
//
//	Create  metadata with the topic, then each partition directory (marker, log)
//	        -> a crash leaves a topic with missing partitions: Open creates them.
//	Delete  metadata without the topic and with it under "deleting", then close
//	        the logs, remove the directories, then drop the "deleting" entry
//	        -> a crash leaves the entry: Open removes the directories it names.
//
// Nothing deletes data because something is missing; only an explicit
// instruction (a Delete, recorded under "deleting") removes a partition's
// directory, and only if its partition.metadata names the deleted topic's id.
// A partition directory that no topic owns (the metadata lost it) is set
// aside, renamed <dir>.<topic id>-stray with its data, and logged; empty ones
// are removed. A data directory with partition directories but no
// weir-meta.json is refused (ErrMissingMetadata, naming them): restoring the
// file, or moving the directories away, is the operator's call. Directories
// without the marker are never touched, so a data directory shared with other
// stores never loses their files; and a directory whose marker names another
// topic id is refused (ErrCorruptMetadata) rather than served as the wrong
// topic's data.
//
// # Compression and plugins
//
// compression.type=producer (the default) keeps every batch byte for byte as
// the producer compressed it, end to end. Any other value makes Append
// recompress, as Kafka's broker does: "uncompressed", Kafka's codec names,
// or, beyond Kafka, any codec spec Options.Plugins resolves ("zstd:level=4",
// an external plugin). A batch already under the target codec id is kept
// as sent; the others are decompressed (bounded, against decompression
// bombs), checked record by record and recompressed, keeping every header
// field (record.Recompress). weir.flush.policy specs resolve through the same
// Plugins. Both are validated when a topic is created, by building one. If a
// plugin is gone when the registry reopens, the topic still opens: its
// appends fsync every batch (for a flush policy) or fail with
// ErrCodecUnavailable (for a codec) until it is back.
//
// # Idempotent producers
//
// InitProducerID hands out ids from a counter kept in weir-meta.json, reserving
// 1000 ids per write, so an id is never reused across restarts (a crash skips
// the rest of a block) and a stream of producers costs one fsync per thousand.
// Epochs start at 0.
//
// Each partition remembers, per producer id, its epoch and its last 5 batches
// (first and last sequence, first and next offset): Kafka's limit on a
// producer's in-flight requests, so every retry a correct client can send is
// among them. Partition.Append applies Kafka's rules (see its doc) and answers
// a retry with the original offsets without appending. The check, the
// append and the state update run under the producer's own lock: different
// producers, and non-idempotent producers, append in parallel as partlog
// allows; one producer's batches are serialised, as their sequences demand.
// The transport must hand a connection's produce requests to Append in order.
//
// The state lives in memory. After a restart, Open rebuilds it from the batch
// headers of each partition's active segment (headers only: nothing is
// decompressed; about one 64 KiB read per 64 KiB of small batches). Producers
// whose last batch lies in an older segment are forgotten, and so are retries
// older than what the active segment holds. A forgotten producer's next batch
// (sequence > 0) gets ErrUnknownProducerID (UNKNOWN_PRODUCER_ID): franz-go
// (v1.22, by default) then logs possible data loss, takes a new producer id
// and resends with fresh sequences, so a request that was in flight across
// the restart may be appended twice; other clients may instead fail the
// producer. A producer is also forgotten after ProducerExpiry (default
// 24 h, Kafka's producer.id.expiration.ms) without appends, when the broker
// calls ApplyRetention. Kafka avoids the restart case with producer-state
// snapshots taken at every segment roll; weir does not keep them yet.
//
// Deviations from Kafka, on purpose: a batch lying wholly before the producer's
// last sequence but older than the 5 remembered batches is ErrDuplicateSequence
// (DUPLICATE_SEQUENCE_NUMBER, which clients count as success: every sequence up
// to the last was appended, since sequences are accepted only in order) where
// Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER; and an unknown producer must
// start at sequence 0 (Kafka, since KIP-360, accepts any sequence from a
// producer whose state retention deleted).
//
// # Durable acks
//
// With weir.durable.acks=true, Append returns only after partlog.Log.Flush
// covers the append: the ack means "on disk". Concurrent appenders share one
// fsync (partlog's group commit), so throughput holds up under many producers.
package topics
