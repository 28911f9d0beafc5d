// Package mirror copies topics from one Kafka-protocol cluster (the source)
// to another (the target): `weir mirror`. As the LinkedIn papers put it, a
// mirror is "just a consumer of the source cluster"; this one is a franz-go
// (kgo) consumer of the source and an idempotent kgo producer to the target,
// with kadm for topic setup and offsets. It works against any Kafka-protocol
// source and target: weir single nodes, weir clusters, or Kafka.
//
// # Delivery: at least once, and why nothing is lost
//
// The rule is MirrorMaker's: the mirror's position in a source partition
// (its "source offset", the next source record to copy) is committed only
// after the target acknowledged every record before it. The producer uses
// acks=all and idempotence, so a record the target acknowledged is on every
// in-sync replica, and retries inside the client neither duplicate nor
// reorder. Partition p of a source topic goes to partition p of its target
// topic (kgo.ManualPartitioner), so a partition's order survives.
//
// Each source partition has a tracker (tracker.go), a deterministic value
// driven by three events: a record was sent, acknowledged, or failed. It
// keeps the records in flight in order; kgo resolves a partition's records
// in the order they were produced, so an acknowledgement always concerns the
// oldest one. Only an acknowledgement with no failure before it advances the
// committable position. A failure (a record larger than the target allows,
// an authorization error, a topic missing on the target, an idempotence
// sequence error after a target restart) freezes the position at the first
// failed record and pauses fetching that partition; once its last in-flight
// record resolved and a backoff passed (doubling from Config.BackoffMin to
// Config.BackoffMax), the consumer is moved back to the frozen position and
// everything from there is sent again. Records after the failure that the
// target did accept are thus written twice, never skipped: in the target,
// each partition holds the source partition's records in order, with
// re-sent runs ("no record appears before one that precedes it in the source
// has appeared"). The other partitions keep going; each failure is logged
// and counted with its topic and partition.
//
// The mirror's source offsets live on the target, as offsets of the
// consumer group Config.Name (default "weir-mirror") for the target topic
// names, committed every Config.CommitInterval and on shutdown. A killed
// mirror restarts from them, re-sending at most what was acknowledged
// since the last commit. Keeping them on the target (as MirrorMaker 2 keeps
// its connector offsets) is also what makes exactly-once the small step
// described below.
//
// # Topics
//
// Every Config.RefreshInterval the mirror lists the source topics, keeps
// those matching Config.Topics (a regular expression matched against the
// whole name) and not Config.Exclude (by default internal topics, those
// starting with "__"), and for each: creates the target topic when absent,
// with the source's partition count and its non-default topic configs
// (DescribeConfigs, DYNAMIC_TOPIC_CONFIG entries), or adds partitions when
// the source gained some; then it starts consuming the new partitions. A
// topic deleted on the source is dropped (and logged). With
// Config.SourceAlias "A", source topic "t" becomes "A.t" on the target, as
// MirrorMaker 2's DefaultReplicationPolicy names remote topics; and
// Config.TargetAlias "B" skips source topics named "B.*", which came from
// the target in the first place, so two-way mirroring A<->B cannot loop.
//
// Records keep their key, value, headers and timestamp. On the record path
// (the default) the producer batches them again and compresses with
// Config.Compression (the consumer has decompressed them); a target topic
// that asks for a codec (compression.type, copied from the source) gets it
// from the target broker.
//
// # Forwarding batches byte for byte (Config.Forward)
//
// With Config.Forward the mirror does not decode at all (forward.go): it
// sends Fetch requests (read_committed, no fetch session) to each source
// partition's leader and produces every source batch as it came, compression
// included, in Produce requests (acks=all) to the target partition's leader,
// on connections of its own (wire.go: answers read into recycled buffers,
// batches written where they lie, TLS and SASL as the mirror's clients'; one
// connection to each source leader, two to each target leader, a partition
// always on the same one). Each batch's base offset is reset to 0 and its
// producer id, epoch and base sequence are rewritten for the mirror's own
// idempotent producer id (InitProducerId); the CRC covers those fields: the
// new one is derived from the fetched one and the changed header bytes
// (record.Reheader), which keeps a bad CRC bad, so the mirror does not read
// the records at all and the target's check (which every Kafka-protocol
// broker makes on produce) covers the whole way from the source's disk: a
// corrupt batch is refused with CORRUPT_MESSAGE, and the mirror then checks
// it itself, to report it as the source's (the partition fails and is
// retried, like any refused batch). The batches the mirror decides on by
// their header (control batches and aborted ones, skipped; batches with
// gaps, refused) have their CRC checked before. A request carries one batch
// of every ready partition led by that broker on that connection, and a
// partition has up to 5 batches in flight (the target remembers a producer's
// last 5 batches per partition), with consecutive sequence numbers, in as
// many requests; the requests on a connection are written in order (the
// broker serves a connection's requests in order), and their answers applied
// in that order. Fetching goes on meanwhile, up to 16 MiB queued per
// partition. The trackers see one entry per batch (its last offset), so the
// delivery rule is the record path's: positions are committed only after the
// target acknowledged every batch before them. A refused batch freezes its
// partition: the batches after it in flight are dropped (their answers,
// which arrive later, usually OUT_OF_ORDER_SEQUENCE_NUMBER, are ignored),
// and once all have been answered and the backoff passed, the partition
// rewinds to its last acknowledged batch boundary and sends the same batches
// again, with the same sequence numbers, so that a batch the target had
// written before the failure is answered as a duplicate instead of written
// twice (TestMirrorForwardPipelineCut cuts the connection mid-pipeline). A
// sequence error on the oldest batch in flight (the target lost the
// producer's state) moves the partition to a fresh producer id. Aborted
// transactional batches and control batches are skipped (committed
// transactional batches are forwarded with the transactional bit cleared).
// Offset syncs are written per batch, so a translated group may re-read up
// to a batch more than OffsetSyncInterval.
//
// Not forwarded, so not built yet: exactly-once mode (kgo's transactional
// producer cannot carry raw batches; ExactlyOnce keeps the record path, and
// Config refuses both), batches with gaps in their offsets (a compacted
// source: a producer's batch may not have them, so the target refuses
// them; the batches before one are forwarded, then the partition fails at
// it with an error saying so, and compacted topics need the record path),
// and a batch larger than the target's max.message.bytes (the record path
// re-sends record by record; here the partition keeps failing). That is why
// forwarding is not the default. A fetch out of range above the source's
// log end (its log truncated below the mirror's position) is logged and
// counted as a fetch error, and the partition moves back to where the
// source's log diverged from what was copied (OffsetForLeaderEpoch, as
// KIP-320; the log start when that is unknown), its position with it, so
// the records the source writes below the old position are copied; the
// record path does the same once kgo's consumer moves back below its
// position (truncation.go).
//
// # Offset syncs and group offset translation
//
// A consumer group that moves from the source to the target needs target
// offsets. As MirrorMaker 2 does, the mirror writes sparse offset syncs
// (source topic, partition, upstream offset, downstream offset) to the
// internal topic "<Name>.offset-syncs" on the target (one partition): one
// for the first record it copies into a partition after starting or
// rewinding, and then one every Config.OffsetSyncInterval source offsets
// (default 100, MirrorMaker 2's offset.lag.max). A sync is written only
// after the target acknowledged the record it describes; one the target
// refuses (the topic just created, not yet in the producer's metadata) is
// kept and written again, since syncs are sparse.
//
// Translate is conservative like MirrorMaker 2's OffsetSyncStore: for a
// group committed at source offset g, it takes the sync with the largest
// upstream offset u <= g and answers its downstream offset d if u == g,
// else d+1. Every source record at or after g was written to the target
// after d (a re-send only ever writes later), so a consumer starting at the
// translated offset skips nothing, and re-reads fewer than
// OffsetSyncInterval records of each partition. With Config.SyncGroups set,
// the mirror translates the matching source groups every
// Config.SyncGroupsInterval and commits the results into the same-named
// target groups when those have no members and would move forward, so
// consumers can fail over (MirrorMaker 2's sync.group.offsets.enabled).
//
// # Exactly once (Config.ExactlyOnce)
//
// The target side is shaped for it: records and the mirror's source
// offsets both go to the target. The producer is transactional
// (kgo.TransactionalID, Config.TransactionalID: Name+".txn", so a
// restarted mirror's InitProducerId fences its predecessor and aborts the
// transaction it left open), and each commit interval is one transaction
// (txn.go): the records copied, the offset syncs written, and the
// positions. At the commit tick the loop flushes; if every record was
// acknowledged it sends AddOffsetsToTxn(Name) to the transaction
// coordinator and TxnOffsetCommit(Name, the producer id and epoch of
// Client.ProducerID, generation -1, the trackers' positions) to the group
// coordinator with kmsg (kgo's GroupTransactSession commits the group it
// consumes in, on the cluster it consumes from; here the group is on the
// target), then EndTransaction(commit). Anything failing on the way (a
// refused record, a flush timeout, a refused offset commit or EndTxn)
// aborts the transaction and rewinds every partition to its position
// committed on the target, read again with RequireStable: an EndTxn whose
// answer was lost may have committed, and then its positions are the ones
// to go on from. A per-partition failure therefore holds back all
// partitions until the next commit tick, and per-partition backoff does
// not apply (the commit interval spaces the retries). On start, the
// producer id is initialized (fencing) before the positions are read,
// also with RequireStable. The source is read with read_committed (as in
// every mode), so aborted source transactions are not copied.
//
// The guarantee, for a reader of the target with read_committed: each
// target partition holds exactly the source partition's committed records,
// in order, none lost and none duplicated, across kills of the mirror and
// of the target. A read_uncommitted reader sees the aborted copies too. The
// cost: records become visible to read_committed readers only when their
// transaction commits (up to CommitInterval plus a flush later), the
// producer waits for every record at each tick instead of streaming, every
// interval costs AddOffsetsToTxn, TxnOffsetCommit, EndTxn and a marker per
// partition written, and an abort re-sends up to an interval's records of
// every partition.
//
// # Observability
//
// Status returns, per partition, the records and bytes copied, the lag in
// records (source high watermark minus the committable position) and in
// seconds (age of the oldest record sent but not acknowledged; when the
// mirror has nothing in flight but is behind, time since its last
// acknowledgement), and the last error. Collector exports the same in
// Prometheus form, with a histogram of the end-to-end delay (target
// acknowledgement time minus the source record's timestamp). The CLI
// (cmd/weir: `weir mirror`, `weir mirror status`) adds a progress line in a
// terminal and a /metrics endpoint.
package mirror
