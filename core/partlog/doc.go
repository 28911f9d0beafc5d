// Package partlog is one partition's log: an ordered list of segments (package
// segment), the last of them active, plus the rules that tie them together:
// offset assignment, rolling, flushing, recovery, retention and truncation,
// and what replication needs from storage: a leader-epoch cache, a
// follower's append, truncation and a reset. It knows nothing of who leads,
// of high watermarks or of the network.
//
// Directory layout of a partition:
//
//	<data>/<topic>-<partition>/
//	    00000000000000000000.log  .index  .timeindex   sealed segment
//	    00000000000000368769.log  .index  .timeindex   active segment (last)
//	    recovery-point                                  "v1 <offset> <active base> <active born> <crc>": segments ending at or below are sealed and fsynced
//	    clean-shutdown                                  "v1 <log end> <epoch checkpoint crc32c> <crc>": a clean Close left the log so (until its first change)
//	    cleaner-point                                   "v1 <n> <end> <at>... <crc>": below the last end the log is cleaned (see Compaction)
//	    leader-epoch-checkpoint                         Kafka's: "0", "<n>", then n lines "<epoch> <start offset>" (see Leader epochs)
//	    reset                                           "v1 <offset> <crc>": a Reset past its commit point; Open finishes it
//	    log-start-offset                                "v1 <offset> <crc>": the log start, when past the first segment (see Log start offset)
//	    00000000000000368769.snapshot                   not the log's: package logs' producer state (see Config.CutHook)
//	    00000000000000000000.log.cleaned (.index.cleaned, .timeindex.cleaned)  a cleaned segment being written; removed by Open
//	    00000000000000000000.log.swap    (.index.swap, .timeindex.swap)        a cleaned segment replacing others; Open finishes the swap
//	    fresh-tail.tmp/                                 a new empty segment, before it replaces the only one a cut emptied
//
// # Appending
//
// Append takes the bytes of one or more Kafka v2 batches as a producer sent
// them, validates each (length, magic, CRC-32C, record count), rewrites only
// the base offset and leader epoch (not covered by the CRC), and writes them
// to the active segment with one write: the page cache, not the disk. A batch
// that would take the segment past SegmentBytes, or a segment older than
// SegmentAge, rolls first: a new segment is created (and the directory fsynced),
// and the old one is sealed (fsynced, final time-index entry written) by the
// appender that caused the roll after it leaves the append lock, so other
// producers are not held up. The recovery point then moves past it.
//
// # Replicated appends
//
// AppendReplicated is a follower's append: batches exactly as its leader's
// log stores them, their offsets and leader epochs set. They are checked as
// bytes (length, magic, CRC-32C, MaxBatchBytes) and as stored batches
// (record.ValidateStored: records within the batch's offsets), not as a
// producer's: the shapes the cleaner writes (offset deltas that skip,
// batches lowered over a gap, batches of no records) pass, as they must for
// a compacted topic to replicate. Nothing is rewritten; the batches must
// continue the log exactly: the first at the log end, each next one at the
// offset after the one before (ErrNotContiguous: a follower that fetched
// from the wrong offset, or a gap or overlap in what it got), and their
// epochs may not go down (ErrStaleEpoch: it should have truncated first).
// Anything refused writes nothing. From there on it is Append: one write,
// rolls and their seals, the flush policy, failures and recoveries, Wait's
// wake-up and the epoch cache. The follower's own generation (cuts of its
// log) is its business; AppendInGeneration stays the leader's.
//
// # Flushing and durability
//
// After every append the flush policy (package plugins/flushpolicy) is told what
// is unflushed and decides: fsync now, by a deadline, or leave it to the OS.
// Flush(upTo) is the durable-ack path: it returns once every offset below upTo is
// on disk. Fsyncs are serialised and each covers everything appended before it
// started, so concurrent callers share one fsync (group commit). FlushedOffset
// tells what is durable. A failed write or fsync fails the log (below).
//
// The policy may be a plugin behind an RPC that answers within its timeout or
// not at all, so the log calls it holding none of its locks, and guarantees:
//
//   - One call at a time, in log order: an Appended for every append, in the
//     order the appends got their offsets, and a Flushed for every fsync of
//     Flush (a durable ack's, a deadline's, an append's), placed among them in
//     the order the fsyncs finished; so each AppendInfo's unflushed counts agree
//     with the calls before it. Each append makes its own Appended call, with
//     its own context.
//   - An append's records are published (Read, EndOffset, Wait's channel)
//     before its policy call; Append returns after that call and after the
//     fsync it asked for. So a hung call holds up the return of its own append
//     and of later appends (whose calls come after it), and nothing else: their
//     records are still written and served, earlier appends finish their
//     fsyncs, and Flush, FlushAppended, Read, EndOffset, FlushedOffset, Wait,
//     the deadline timer, Truncate, ApplyRetention, Recover and Close go on.
//   - Flush never calls the policy nor waits for it: the policy hears of an
//     fsync at the next Append call, before that append's own call, or at Close.
//   - An answer acts through the append that asked: "flush now" makes it call
//     Flush(its end) before returning, which an fsync made meanwhile (another
//     append's, a durable ack's) may already cover; "flush by" arms the
//     deadline timer unless such an fsync covered it. A policy error counts as
//     "flush now".
//
// An append that finds the policy idle and nothing owed to it takes it as it
// publishes and calls it as soon as it leaves the append lock: the built-in
// policies answer in nanoseconds, and cost no queue, goroutine or channel.
//
// # Failures and recovery
//
// A write, create, truncate, rename or fsync that fails (a full disk, an I/O
// error) fails the log: the append that met it gets ErrFailed wrapping the
// cause (KAFKA_STORAGE_ERROR, which Kafka clients retry), and so does every
// append and Flush after it, until the log recovers. Nothing half-written is
// ever served: an append publishes its new end only after its write
// succeeded, and a failed write is cut back (or left to recovery, which cuts
// it by checksum).
//
// The log recovers in place, by itself: the first append made
// Config.RecoveryBackoff (1 s) after the failure recovers first, and goes
// ahead if that works; each failed attempt doubles the wait (up to
// MaxRecoveryBackoff). Recover does the same at once. Recovery is Open's
// crash recovery run on the live log: the active segments are sealed, the
// segments are opened again from the files (those past the recovery point
// re-read batch by batch, cut at the first bad byte, their indexes rebuilt),
// made durable, and published in place of the old ones, which readers holding
// Slices keep until they release them. The log object stays the same, so the
// layers above hold no handle that could go stale, and there is one recovery
// code path, the one the crash loops test.
//
// What a recovery keeps depends on what failed:
//
//   - A write (or create, rename, truncate, directory fsync): the page cache
//     still holds everything written before it, so the recovery keeps every
//     complete batch. Nothing acknowledged is lost, and appends continue right
//     after the last acknowledged record. An append whose bytes were all
//     written before a later step failed (sealing a rolled segment, say) got
//     an error yet may be kept (AppendResult then still names its offsets):
//     a client retry then appends it again, the usual at-least-once of a
//     non-idempotent producer. Package topics records an idempotent
//     producer's batch whenever its offsets were published, error or not,
//     so that its retry is answered as a duplicate.
//   - A file fsync: Linux may have dropped the pages that fsync was writing,
//     or marked them clean so that a second fsync "succeeds" without writing
//     them (and reading them back from the page cache proves nothing). So the
//     log treats it as a power cut of this partition: from the failure on,
//     readers are served only up to FlushedOffset (EndOffset reports it), and
//     the recovery cuts the log back to it. Records acknowledged with durable
//     acks were covered by a successful fsync before their ack, so they
//     survive. Records acknowledged without durable acks and not yet covered
//     by an fsync are lost, exactly as in a power cut, and their offsets go to
//     the next records; consumers that read them before the failure keep what
//     they read. The next append after such a cut goes to a new segment file
//     (a segment the cut emptied is replaced by a new file renamed over it),
//     so a reader still holding a Slice of cut bytes reads them or comes up
//     short (an error), never the records now at their offsets. An fsync that
//     fails inside a recovery counts the same: the next attempt cuts.
//
// A cut starts a new Generation (so do Truncate and Reset, after which no
// earlier append survives). AppendResult carries the generation it was
// made in, and FlushAppended (the durable-ack wait) fails with ErrCut when the
// records it waits for were cut, instead of reporting success for whatever
// holds their offsets now. A caller that decided what to append from the
// log's state in one generation (an idempotent producer's sequence checks)
// appends with AppendInGeneration, which refuses the append (ErrFailed,
// ErrGenerationChanged) if a cut came in between. Reads racing a recovery wait for it and read
// again. Config.RecoveryBackoff < 0 turns automatic recovery off: the log then
// stays failed until Recover or a reopen; HoldRecovery does the same for a
// while, for a layer above that must choose the moment of the cut (a replica
// leader whose followers may hold the records past the last fsync resigns
// first, and recovers once it follows).
//
// # Recovery
//
// Close writes the clean-shutdown marker after sealing and fsyncing
// everything; it records the log end and the CRC-32C of the leader-epoch
// checkpoint. Open with the marker leaves the log pristine: it writes,
// fsyncs and removes nothing until the first change (an append, a
// truncation, retention deleting a segment, a cleaner swap, a reset), which
// first settles the log and removes the marker (touch); Close of a log still
// pristine writes nothing. With a marker that records the end, Open opens
// the segments lazily (segment.OpenLazy: nothing read until used; a segment
// found other than described makes the log recover) and believes the epoch
// checkpoint whose checksum the marker records. Without
// the marker, Open trusts only the segments that end at or below the recovery
// point, and re-reads the rest batch by batch (header, offset continuity,
// CRC-32C), cutting at the first bad byte and rebuilding their indexes. A cut
// inside the log deletes the segments after it, so offsets never skip. With the
// marker, every segment is trusted, but indexes that fail their checks are
// rebuilt and the last segment's tail is still re-checked. Before any of
// this, Open finishes a Reset that had passed its commit point (see
// Retention and truncation), removes what an interrupted clean left and
// finishes a swap that had passed its commit point (see Compaction); after
// it, it loads the epoch cache (see Leader epochs).
//
// # Reading
//
// Read finds the segment by binary search over base offsets (the segment list
// is an immutable slice behind an atomic pointer, so readers never lock), then
// the sparse index, then scans batch headers. It returns a byte range of whole
// batches (at least one, even past maxBytes) that the network layer sends with
// sendfile, holding a reference that keeps the file open even if retention
// deletes the segment meanwhile.
//
// # Leader epochs
//
// The leader-epoch cache is Kafka's LeaderEpochFileCache: for each leader
// epoch the log holds records of, the offset of its first record, oldest
// first; epochs and start offsets both increase. Epochs never go down along
// the log: an append (Append's leaderEpoch, or a replicated batch's
// partitionLeaderEpoch) below the latest epoch is ErrStaleEpoch, nothing
// appended (Kafka would drop the later entries instead, which leaves the
// cache claiming what the log does not hold). A batch above the latest
// starts its epoch at its base offset; a negative epoch (the -1 producers
// send, never stamped) carries none and changes nothing. AssignEpoch is a
// new leader's entry before its first record (Kafka's makeLeader): its
// epoch at the log end. Fence(e) refuses Appends stamped below e from then
// on, atomically with them: a replica that stops leading fences the log
// before it truncates, so that a produce of its old term still on its way
// (or one stamped with the epoch it now follows) cannot land among its
// leader's records (Kafka holds its partition's leaderIsrUpdateLock
// across a leader's append for the same reason). EndOffsetForEpoch answers OffsetForLeaderEpoch with
// Kafka 3.8's table (see it); replication decides what to do with it, the
// log knows nothing of leaders.
//
// The checkpoint (leader-epoch-checkpoint, Kafka's format) is replaced
// atomically and durably whenever the cache changes: once per epoch, by the
// append that brings it (written before its records, so until they are
// there it holds an epoch starting at the log end, as AssignEpoch leaves
// it), by AssignEpoch, Truncate, Reset and retention. A failed write fails
// the log like any other, leaving the cache as it was.
//
// The cuts are Kafka's: Truncate (and a recovery's cut) removes the
// entries starting at or past the new end, after the end moved back (an
// entry starting exactly there too: its records are gone; and Truncate at
// or past the end, which cuts no record, still removes an epoch assigned at
// the end); retention trims from the front, the entry covering the new log
// start keeping it as its start.
//
// Open and every recovery load the cache with the log they recover: the
// checkpoint's entries below the first segment re-read batch by batch are
// the file's word (every append of a new epoch wrote it before the
// recovery point could pass its records), trimmed to the log start; from
// that segment on, the batches' own epochs; then the entries at or past the
// log end go (Kafka's truncateFromEnd on load: an epoch assigned without
// records does not survive a reopen; the next leader assigns again). The
// entries are then checked where they can be cheaply, at their edges: the
// batch at each start begins there and carries its epoch, the batch before
// it the previous entry's, the last batch the latest. A checkpoint that is
// missing (on a log that is not empty: weir's logs before epochs, all epoch
// 0), garbled or inconsistent is rebuilt from the batches, logged and said
// in Report.EpochsRebuilt, never a reason to refuse to open: the log is the
// truth. When the first and last batch carry the same epoch (an old log),
// two header reads rebuild it; otherwise every batch header is read. Any
// change is written before the recovery point moves.
//
// # Changing the settings of an open log
//
// Reconfigure (a topic's configs altered while it is served) swaps the
// settings an append or a retention pass reads (segment size and age, index
// interval, retention, batch limit, flush policy) as one immutable Config
// behind an atomic pointer: each append or pass reads it once, so it sees
// the old settings or the new, never a mix. The flush policy is swapped
// while the swapper holds the policy (as an append does), so no call to the
// old one is in progress and the calls owed are made to the new one.
//
// # Retention and truncation
//
// ApplyRetention deletes whole segments from the front by age (newest record
// older than RetentionAge) and by size (while the log stays at least
// RetentionBytes without them), never the active one, nor one holding records
// not yet durable, nor anything while the log is failed: a recovery after a
// failed fsync cuts back to FlushedOffset, which must stay inside the log.
// Truncate cuts the tail
// for replication: the recovery point moves below the affected segment first,
// later segments are deleted newest first, so a crash at any step leaves a log
// that recovery puts right. A truncation below the cleaner point moves it
// back, before any append can reuse the offsets cut (see Compaction). Both
// trim the epoch cache (see Leader epochs).
//
// Truncation never changes bytes under a reader. Kafka cuts the file in
// place, and its next appends write the new records at the positions the
// cut freed, where a Slice taken before (a sendfile in progress, a fetch
// response being written) then finds them. Here the segment the cut goes
// into is cut in place too, which keeps every byte before the cut where it
// was, but the next append goes to a new file: the cut segment is sealed
// and a new active segment starts at the new end, as after a recovery's
// cut (freshTail; a segment the cut emptied is replaced by a new file of
// the same name, the log's only segment through fresh-tail.tmp). So a Slice
// of kept bytes reads them unchanged, and a Slice of cut bytes reads them
// (MemFS, or a file not yet cut) or comes up short, which Slice.Bytes and
// the transport's sendfile report as an error: never the records now at
// those offsets. The alternative, copying the kept prefix to a new file,
// would keep cut bytes readable too, at the cost of rewriting up to a whole
// segment per truncation; only a reader past the high watermark can hold
// cut bytes, and it must see them vanish or fail, which is what it gets.
// The cost here is one more, smaller, segment per truncation.
//
// Reset (Kafka's truncateFullyAndStartAt) restarts the log empty at any
// offset, for a follower whose leader's log no longer overlaps its own.
// Its commit point is the reset file, written atomically: before it the
// old log stands, untouched; after it, the reset is finished by whoever
// gets there (Reset itself, or the next load, at Open or in a recovery):
// every segment file and cleaner or recovery leftover goes, a new empty
// segment at the offset is created and fsynced, the epoch checkpoint
// (empty), the cleaner point (never cleaned) and the recovery point (the
// offset) are written, and only then, once the CutHook has heard of it, does
// the reset file go. Each step may be repeated, so a crash anywhere leaves
// the old log or the new empty one. The old segments stay published, their
// handles open, until the new one replaces them, so readers never fail
// meanwhile and Slices keep the old files; a failure on the way fails the
// log, whose recovery finishes the reset. A new generation starts, in which
// nothing appended before survives (Survived, FlushAppended).
//
// # Log start offset
//
// The log starts at its first segment's base, or later: DeleteRecordsBefore
// (Kafka's DeleteRecords) moves an explicit log start offset up, to any
// offset up to the log end, even inside a batch. Reads below it are
// ErrOffsetOutOfRange (a batch holding it is still served whole, and the
// consumer skips the records before it, as Kafka's), StartOffset answers
// it, and the segments wholly below it go at once if durable, otherwise at
// the next ApplyRetention. It is kept in the log-start-offset file ("v1
// <offset> <crc>", replaced atomically) before it is published, so it
// survives a restart; a damaged file counts as none (the first segment's
// base: records reappear, none is lost). A cut below it (Truncate, a
// recovery) brings it down to the new end, and Reset sets it to the reset
// offset. The epoch cache is not trimmed at it (only when segments go): its
// entries must start at batch boundaries.
//
// Config.CutHook lets a layer that keeps state about offsets in the
// partition directory (package logs' producer snapshots) hear of every
// cut before anything can be appended at the cut offsets: after Truncate
// and Reset, and at the end of Open and of every recovery, with the log
// end (-1 after a Reset). It runs under the log's locks and must be
// idempotent; an error fails the log, and the recovery calls it again.
//
// # Compaction
//
// Clean makes one pass of Kafka's log cleaner (cleanup.policy=compact, as
// __consumer_offsets, __transaction_state and compacted topics use): a record
// with a key is dropped once a later record has the same key, and a
// tombstone (a key with a null value) once DeleteRetention has passed. The
// caller schedules passes: Cleanable tells how much is dirty, against
// Kafka's min.cleanable.dirty.ratio, and how long past max.compaction.lag.ms
// the oldest dirty record is (Kafka cleans such a log whatever its ratio).
// CleanOptions.MinCompactionLag (min.compaction.lag.ms) ends what a pass may
// clean at the first dirty segment holding a record newer than the lag, by
// record timestamps, as Kafka's cleanableOffsets does. CleanOptions.Throttle
// is called before every read and write of segment data (at most 1 MiB
// each), with no lock of the log held, so that a broker can hold its
// cleaner's I/O to a rate (Kafka log.cleaner.io.max.bytes.per.second)
// without holding up appends.
//
// What may be cleaned: whole segments from the log start that are sealed and
// durable (they end at or below the recovery point), never the active one,
// and nothing at or past CleanOptions.UpTo (the high watermark). The cleaner
// point splits them: below it, what earlier passes cleaned; from the segment
// holding it on, the dirty segments. A pass maps every key of the dirty
// segments to its latest offset (records of control and transactional
// batches excepted), then rewrites every cleanable segment from the log start
// up to where it mapped: a record is dropped iff the map holds a larger
// offset for its key. Records without a key stay; control batches (the
// transaction markers) stay as they are; transactional batches stay whole,
// since the log does not know which transactions were aborted (package logs
// keeps that index) and an aborted value must not supersede a committed one;
// so the aborted transactions' records and markers stay, and the index
// entries naming them (kept by package logs, which never ties them to
// segment files) stay valid across a swap. The broker's caller bounds UpTo
// by the last stable offset too (node's cleaner), as Kafka's cleaner stops
// at the first unstable offset. A
// compressed batch is read with CleanOptions.Decompress and rewritten, under
// its own codec, with Compress; one it cannot read or rewrite stays byte for
// byte. The map holds the keys themselves (no hashing, so no collision can
// drop a live record) within CleanOptions.MaxMapBytes; when the dirty segments
// hold more keys, the pass cleans up to the last segment whose keys all fit
// and the next goes on from there; a first dirty segment that alone does not
// fit is ErrCleanMapFull.
//
// Tombstones: the cleaner-point file records, for the offsets below the
// cleaner point, when a pass first cleaned them (marks "offsets up to end
// were first cleaned at at", 64 at most: merging two keeps the later time).
// A tombstone that no later record supersedes is removed by a pass that
// starts DeleteRetention (default 24 h, Kafka delete.retention.ms) or more
// after the pass that first cleaned it ended; a tombstone in the dirty
// segments is always kept, so every tombstone outlives its key's older
// values, which that first pass dropped, by DeleteRetention. The time is the
// log's Config.Clock, not record timestamps, which producers set. No
// tombstone is removed after a batch the pass kept whole while it could not
// see (or drop) its records (a transactional batch, a compressed one without
// codec functions): that batch might hold an older value of the key, which
// the tombstone alone hides.
//
// Offsets: every record kept keeps its offset, and offsets still continue
// from batch to batch, which segment.Open, recovery and readers rely on. A
// batch that loses some records keeps its header: base offset,
// lastOffsetDelta, timestamps, producer id, epoch and sequence (its records'
// offset deltas then skip, as Kafka's cleaner leaves them and clients
// expect). The offsets of batches that lose every record are covered: by the
// next batch kept, its base offset lowered over them (its records' offset
// deltas raised by as much), when it has no producer id (an idempotent
// batch's offsets are tied to its sequence numbers) nor control bit and the
// same leader epoch; otherwise by a batch of no records (producer id -1,
// valid CRC), one per run of such offsets and leader epoch. An idempotent
// producer's last batch in a segment stays, with no records, so that its
// sequence state can be read from the log. So a read at any offset is
// served the batch covering it (for an offset whose record went, the batch
// holding the next record kept, or a batch of no records before it), a
// cleaned segment ends exactly where the segments it replaces ended, and
// Truncate at an offset whose record went drops no record below it. (Raising
// the lastOffsetDelta of the batch before a gap would cover it too, but would
// put records below an offset into the batch covering it.) A batch's
// maxTimestamp stays (it is raised over the batches a lowered batch absorbs),
// so segments keep their largest timestamp and retention by age is
// unchanged.
//
// Grouping: consecutive segments are rewritten into one new segment (named by
// the first's base offset) as long as it stays within SegmentBytes and 2^32
// offsets (the indexes' relative offsets). A segment's cleaned size is
// bounded by its size, or better, when that does not fit, by a dry run of its
// uncompressed batches against the map (a compressed batch counts its size),
// so that segments a pass shrinks merge in that pass. A single segment that
// would come out unchanged is left alone, its copy dropped before an fsync.
//
// Swap (cleanswap.go), crash-safe as Kafka's: the new segment is written as
// <base>.log.cleaned (and .index.cleaned, .timeindex.cleaned) and fsynced,
// without any lock; then, under a lock of the segment files that Truncate,
// retention, Reset and recoveries take (appends only wait for the log to be
// checked and the new segment published): its files are
// renamed to .swap and the directory fsynced (the commit point); the replaced
// segments' files are deleted and the new indexes renamed into place, the
// directory fsynced; the new log is renamed into place, the directory
// fsynced; and the new segment is published in place of the old, whose
// readers keep their Slices. Open (and a recovery in place) removes .cleaned
// files and finishes a swap whose .log.swap it finds: it re-reads that
// segment, rebuilding its indexes, deletes the segments it replaces and
// renames it into place. The recovery point needs no change (the new segment
// ends where the old ones did and is durable); a clean shutdown waits for a
// pass to stop. The cleaner point is written only after the swaps it covers
// (a crash between costs a pass over them again), in the file described in
// cleanpoint.go; a damaged one is logged and counts as never cleaned.
//
// Concurrency and failures: appends, Read, Flush, ApplyRetention, Truncate
// and recoveries go on during a pass (the last four wait while a swap
// renames and fsyncs, appends do not). A swap checks under the append lock
// that the segments it replaces are still those it read, sealed, durable and
// ending where they did, and that no cut went below their end since the
// pass began (Truncate, appends and a roll could refill a segment to the
// same offsets with other records); otherwise retention, truncation or a
// recovery changed them: ErrLogChanged, the pass ends, what it swapped in
// before stands. A failure writing the new segment, a cancelled ctx or Close abandon
// the pass, its temporary files removed, without failing the log; a failure
// once the swap passed its commit point fails the log like any write, and
// the recovery finishes the swap. Truncate, Open and recoveries move the
// cleaner point back to the log end when a cut went below it, before any
// append can reuse those offsets. Passes are serialised.
package partlog
