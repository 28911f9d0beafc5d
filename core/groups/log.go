package groups

import (
	"context"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
)

// Log is one partition of __consumer_offsets as the coordinator uses it: the
// records of the groups that map to the partition (Options.PartitionFor), in
// the formats of the package doc. The broker hands the coordinator the
// partitions it leads (Coordinator.Load) and takes them back when it stops
// leading them (Unload); it also compacts them (cleanup.policy=compact),
// which keeps the latest record of every key and so every live offset.
type Log interface {
	// Append appends record batches (Kafka v2; the log assigns offsets) and
	// returns a wait that returns once they count as committed (written, on
	// a single node; in a cluster, replicated as acks=all would require),
	// or says why not. The coordinator appends holding its lock, so that
	// writes reach the log in the order it decided them, and waits without
	// it. Writes are committed in log order (the high watermark only
	// grows).
	Append(ctx context.Context, batches []byte) (wait func(context.Context) error, err error)
	// AppendVerified is Append for a transactional offset commit's
	// batches, carrying g, the guard of the verification the broker
	// started on this partition before it asked the transaction
	// coordinator (TxnCommitRequest.Guard; see package producers,
	// verify.go): when the producer's transaction is neither ongoing in
	// the partition nor still under that verification (a marker ended it
	// since), the append is producers.ErrInvalidTxnState and nothing is
	// written. producers.Unverified appends as Append does.
	AppendVerified(ctx context.Context, batches []byte, g producers.Guard) (wait func(context.Context) error, err error)
	// StartOffset and EndOffset bound what Load replays.
	StartOffset() int64
	EndOffset() int64
	// Read is partlog.Log.Read.
	Read(offset, maxBytes, maxOffset int64) (partlog.Slice, error)
}
