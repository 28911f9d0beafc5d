// Package txn is the transaction coordinator of a broker: Kafka's
// transactions as its TransactionCoordinator runs them (InitProducerId with
// a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions, ListTransactions), with its state kept in the
// partitions of the internal topic __transaction_state.
//
// # The state machine
//
// Each transactional id is a small deterministic state machine (entry, in
// machine.go) that does no I/O: requests arrive as method calls with the
// current time, time passes as tick(now), and everything to do comes back
// as values (Ready: records to write, markers to write, answers to parked
// requests), as in etcd-io/raft and weir's core/groups. Its unit tests
// drive it with explicit times, without goroutines, and a randomized test
// checks its invariants after every step.
//
//	           InitProducerId (epoch+1)
//	  ┌──────────────┐
//	  ▼              │      AddPartitions                     EndTxn(commit)
//	Empty ───────────┴──────────────────────▶ Ongoing ─────────────────────▶ PrepareCommit
//	  ▲                                        │  ▲ │                              │ markers written
//	  │ InitProducerId                         │  └─┘ AddPartitions                ▼
//	  │                     EndTxn(abort),     │                          CompleteCommit
//	  │              timeout, InitProducerId   ▼                                   │
//	  │              (fence: epoch+1)    PrepareAbort ── markers written ─▶ CompleteAbort
//	  └──────────────────────────────────────────────────────────────────────────┘
//	                    (from Empty, CompleteCommit, CompleteAbort: AddPartitions opens
//	                     the next transaction; InitProducerId bumps the epoch)
//
// Dead is an id expired (transactional.id.expiration.ms, 7 days idle
// between transactions): its record gets a tombstone and it is forgotten.
// PrepareEpochFence exists in Kafka's numbering only; neither Kafka nor
// weir writes it (a fence here goes straight to PrepareAbort with the
// bumped epoch).
//
// The rules are Kafka's (TransactionCoordinator.scala,
// TransactionMetadata.scala):
//
//   - A change of state is decided, written to the log, and applied only
//     once the write is committed; meanwhile the id is pending and every
//     request for it gets ErrConcurrentTransactions (the client retries).
//     The Complete states alone are applied once appended: any later
//     record of the id goes after theirs in the same partition, so none is
//     committed without it, and one lost alone leaves the Prepare record
//     last, whose markers a load writes again (a marker is idempotent).
//     A failed write is dropped, and its request answered
//     ErrCoordinatorNotAvailable; what a tick decided (an abort, a
//     completion, an expiration) is decided again after MarkerBackoff.
//   - InitProducerId of a new id gets a fresh producer id with epoch 0; of a
//     known id between transactions, the epoch bumped, which fences every
//     older producer with the id (their requests get ErrProducerFenced,
//     their produce INVALID_PRODUCER_EPOCH at the partitions once a marker
//     with the new epoch lands); an epoch of 32766 or more rotates to a new
//     producer id instead. With a transaction open it is aborted under a
//     bumped epoch and the caller answered ErrConcurrentTransactions; its
//     retry bumps again. InitProducerId v3+ names the producer's current
//     id and epoch: a retry of a bump whose answer was lost gets the same
//     answer, any other mismatch ErrProducerFenced.
//   - AddPartitions opens a transaction (its start time is the timeout's
//     origin) or adds to the open one; partitions already in it are
//     answered at once, without a write.
//   - EndTxn writes PrepareCommit or PrepareAbort; then the markers are
//     written to every partition of the transaction (retried after
//     MarkerBackoff for those that failed), and then CompleteCommit or
//     CompleteAbort. EndTxn is answered once the transaction is complete,
//     or CompletionWait after the Prepare record committed if that comes
//     first (Kafka answers once the Prepare record is committed, and the
//     client's next transaction then meets ErrConcurrentTransactions while
//     the markers are written, and backs off). A retried EndTxn of a
//     completed transaction is answered at once; one while the answer is
//     held waits with it; one of a completing transaction past that gets
//     ErrConcurrentTransactions; the other outcome ErrInvalidTxnState.
//   - A transaction open longer than its timeout is aborted under a bumped
//     epoch (the abandoned producer is fenced).
//
// # The log: partitions of __transaction_state
//
// An id belongs to partition abs(javaHash(id)) % 50 of __transaction_state
// (Options.PartitionFor), and its coordinator is the broker leading that
// partition. The broker hands the coordinator each partition it comes to
// lead (StartLoad, with the partition's leader epoch, which the markers
// carry as the coordinator epoch); the replay reads the partition to its
// end and restores every id from its last record: transactions in a
// Prepare state resume writing their markers, open ones keep their timeout
// from their start time. The ids of a partition being loaded get
// ErrCoordinatorLoadInProgress; of a partition not loaded here,
// ErrNotCoordinator. Unload forgets them.
//
// Each record is one id's whole state, in Kafka's format
// (TransactionLogKey and TransactionLogValue version 0; big-endian, strings
// as an int16 length and bytes), so Kafka's tools read the topic:
//
//	key    int16 version (0) | string transactional id
//	value  int16 version (0) | int64 producer id | int16 producer epoch | int32 timeout (ms)
//	       | int8 state | [topic: string | [int32 partition]] (null when none)
//	       | int64 last update (ms) | int64 start (ms, -1: none)
//
// A tombstone (no value) is an expired id. The topic is compacted, which
// keeps the last record of each id. Replay reads value versions 0 and 1
// (Kafka 3.5+; its tagged fields are not needed here) and fails on any
// other, rather than forget a transaction.
//
// # Concurrency
//
// Coordinator is the thin concurrent layer: one mutex over the machines of
// the loaded partitions, a channel per parked request, one timer (from
// Options.Clock) set to the earliest deadline of any (a timeout, a marker
// retry, an expiration), and a goroutine per log write in flight (waiting
// for its commit) and per marker write (Options.WriteMarkers), each
// stepping the machine with its outcome. Appends are made holding the
// mutex, so records reach the log in the order decided; Log.Append must
// therefore return without waiting for the disk or the replicas (its wait
// does that), or every request would queue behind each fsync.
package txn
