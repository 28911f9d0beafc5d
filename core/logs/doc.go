// Package logs is the log manager: it opens, creates, sets aside and removes
// the partition logs of one data directory as it is told (it keeps no list of
// what should exist: that is the metadata's), and each Partition it opens is a
// partition log (core/partlog) with what every append to it needs:
// idempotent-producer checks (core/producers), recompression
// (core/recompress) and durable acks. It knows nothing of leaders, replicas
// or the network.
//
// # Directories
//
//	<Dir>/<topic>-<partition>/
//	    partition.metadata    "version: 1\ntopic_id: <hex>": marks the directory as weir's
//	    00000000000000000000.log .index .timeindex recovery-point ...   the log (package partlog)
//	    00000000000000368769.snapshot                                  the producer state as of that offset
//	    00000000000000368769.txnindex                                  aborted transactions (Kafka's format)
//
// The marker is written (and fsynced) before any log file, so a directory
// without one holds no data. A directory whose marker names another topic id
// is refused (ErrForeignPartition) rather than served as the wrong topic's
// data. Remove deletes a partition directory only if its marker names the
// topic id it is asked to remove; SetAside renames directories nobody owns to
// <dir>.<topic id>-stray, with their data; directories without a marker are
// never touched.
//
// # Compression and plugins
//
// compression.type=producer (the default) keeps every batch byte for byte as
// the producer compressed it, end to end. Any other value makes Append
// recompress, as Kafka's broker does: "uncompressed", Kafka's codec names,
// or, beyond Kafka, any codec spec the topic's plugins resolve ("zstd:level=4",
// an external plugin; see core/recompress). A batch already under the target codec id is kept
// as sent; the others are decompressed (bounded, against decompression
// bombs), checked record by record and recompressed, keeping every header
// field (record.Recompress). weir.flush.policy specs resolve through the same
// plugins; ConfigFor builds a topic's PartitionConfig, codec and flush policy
// included, from its configs. Both specs are validated when a topic is
// created, by building one (topicconfig.Normalize). If a plugin is gone when
// a partition reopens, it still opens: its appends fsync every batch (for a
// flush policy) or fail with recompress.ErrCodecUnavailable (for a codec)
// until it is back.
//
// # Idempotent producers
//
// Producer ids come from the metadata (package topics reserves them in
// blocks, so an id is never reused across restarts); epochs start at 0.
//
// Each partition remembers, per producer id, its epoch and its last 5 batches
// (first and last sequence, first and next offset): Kafka's limit on a
// producer's in-flight requests, so every retry a correct client can send is
// among them. Append applies Kafka's rules (see its doc) and answers
// a retry with the original offsets without appending. The check, the
// append and the state update run under the producer's own lock: different
// producers, and non-idempotent producers, append in parallel as partlog
// allows; one producer's batches are serialised, as their sequences demand.
// The transport must hand a connection's produce requests to Append in order.
//
// The state lives in memory, with snapshots (Kafka's <offset>.snapshot):
// when the log has rolled, the append that notices it writes the table as
// of the log end (package producers' format: versioned, CRC-32C, the same
// table giving the same bytes) to <offset>.snapshot, through a temporary
// file, fsync, rename and an fsync of the directory; so does Close. The
// producers' lock is held alone only while the table is encoded, not while
// the file is written, and the two latest snapshots are kept. Manager.Open
// restores the latest one the log still covers (between its start and its
// end) and replays the batch headers after it (headers only: nothing is
// decompressed; about one 64 KiB read per 64 KiB of small batches), so
// producers whose batches only older segments hold are remembered. A
// snapshot that does not restore is logged, removed, and the one before it
// tried; with none usable every header from the log start is read, and a
// snapshot taken at once. The exception is a log closed cleanly without any
// snapshot, as weir wrote them before it kept snapshots: only its active
// segment is read, as before, so that the first start after an upgrade does
// not read whole logs, and producers whose last batch lies in an older
// segment are forgotten that once. A forgotten producer's next batch
// (sequence > 0) gets producers.ErrUnknownProducerID (UNKNOWN_PRODUCER_ID):
// franz-go (v1.22, by default) then logs possible data loss, takes a new
// producer id and resends with fresh sequences, so a request in flight
// across that restart may be appended twice; other clients may instead fail
// the producer.
//
// A snapshot must never describe records the log no longer holds at its
// offsets. partlog's CutHook removes the snapshots past every cut
// (Truncate, Reset: all of them, a recovery's) before anything can be
// appended at the cut offsets, and again at the end of Open and of every
// recovery; a snapshot being written while a cut comes is removed by
// whichever of the two finishes second (the writer checks the log's
// generation once its file is in place, under the same lock as the hook).
// The state in memory is rebuilt the same way (latest snapshot left, then
// the headers) before the next idempotent or replicated append, since the
// cut moved the log's generation on.
//
// A producer is also forgotten after the registry's ProducerExpiry (default
// 24 h, Kafka's producer.id.expiration.ms) without appends, when the broker
// calls ApplyRetention. The time of its last append is in the snapshots, so
// expiry counts across restarts; a batch replayed at Open counts as used
// then.
//
// Deviations from Kafka, on purpose: a batch lying wholly before the producer's
// last sequence but older than the 5 remembered batches is ErrDuplicateSequence
// (DUPLICATE_SEQUENCE_NUMBER, which clients count as success: every sequence up
// to the last was appended, since sequences are accepted only in order) where
// Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER; and an unknown producer must
// start at sequence 0 (Kafka, since KIP-360, accepts any sequence from a
// producer whose state retention deleted).
//
// # Transactions
//
// A producer's transactional batch (attributes bit 4) opens its
// transaction in the partition at the batch's first offset, unless one is
// open; AppendMarker appends the transaction marker (a control batch, bit
// 5, written by the broker for the coordinator: producers may not send
// them, ErrControlBatch) that closes it. Kafka's rules hold: a marker of
// an older producer epoch is producers.ErrInvalidProducerEpoch, of an
// older coordinator epoch producers.ErrTransactionCoordinatorFenced; a
// plain batch from a producer whose transaction is open is
// producers.ErrInvalidTxnState; a marker of a newer epoch (the
// coordinator fencing a zombie) becomes the producer's epoch.
// FirstUnstableOffset is the first offset of the oldest open transaction:
// the node's last stable offset is the high watermark or that offset,
// whichever is lower. Aborted transactions go to the aborted-transactions
// index (Kafka's .txnindex format; see txnindex.go for its files, their
// durability and how cuts and retention trim them), which AbortedTxns
// answers for read_committed fetches. The open transactions and the
// markers' epochs are part of the producer state (its snapshots,
// version 2), rebuilt with it after cuts and at Open (a replay reads the
// record of each control batch after the snapshot, besides the headers);
// a follower's AppendReplicated builds the same state and index.
//
// A leader that verifies transactions with their coordinator (KIP-890
// part 1) starts the verification with StartTxnVerification and appends
// with AppendVerified, carrying the guard it got: a transactional batch
// whose transaction a marker ended meanwhile is then
// producers.ErrInvalidTxnState, not the start of a transaction nothing
// would end (see package producers, verify.go). The guard is a value the
// caller passes; the partition knows nothing of coordinators.
//
// # Replication
//
// The partition does what its log's replication needs from storage and
// knows nothing of leaders: the node decides. AppendEpoch is a leader's
// Append in its epoch (Append stamps epoch 0, for the single node);
// AppendReplicated is a follower's append of batches as its leader stored
// them (partlog.Log.AppendReplicated): no recompression and no idempotence
// checks, but every idempotent batch header goes to the producer state, as
// a leader's appends record theirs (Kafka's appendAsFollower), so that a
// follower made leader answers a producer's retry as a duplicate. Epochs
// (AssignEpoch, EndOffsetForEpoch), Truncate and Reset are the log's
// (Log()); the producer state and its snapshots follow their cuts (above).
//
// # Altered configs
//
// Partition.Settings are the partition's durable acks, min.insync.replicas,
// compaction settings, batch limit and recompressor, replaced whole by
// Reconfigure (which reconfigures the log first), so an append reads one
// consistent set; appends in progress finish with the set they began with.
//
// # Durable acks
//
// With weir.durable.acks=true, Append returns only after partlog.Log.Flush
// covers the append: the ack means "on disk". Concurrent appenders share one
// fsync (partlog's group commit), so throughput holds up under many producers.
package logs
