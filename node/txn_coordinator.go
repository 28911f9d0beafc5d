package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-broker/weir/core/txn"
)

// ErrOperationNotAttempted: AddPartitionsToTxn added none of its partitions
// because another one of them was refused (OPERATION_NOT_ATTEMPTED).
var ErrOperationNotAttempted = errors.New("node: not attempted: another partition of the request was refused")

// InitTransactionalProducerID is InitProducerId with a transactional id:
// the producer id and epoch from the id's coordinator (this broker, or
// ErrNotCoordinator). pid and epoch are the producer's current ones
// (InitProducerId v3+) or -1.
func (n *Node) InitTransactionalProducerID(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	if id == "" {
		return -1, -1, fmt.Errorf("%w: empty transactional id", txn.ErrInvalidRequest)
	}
	c, err := n.TxnCoordinator(ctx, id)
	if err != nil {
		return -1, -1, err
	}
	return c.InitProducerID(ctx, txn.InitRequest{ID: id, Timeout: timeout, ProducerID: pid, Epoch: epoch})
}

// AddPartitionsToTxn adds partitions to the producer's transaction. Unless
// every partition exists, none is added: the unknown ones get
// ErrUnknownTopic/ErrUnknownPartition, the others ErrOperationNotAttempted
// (as Kafka). err is an error of the whole request (which perPartition
// then repeats).
func (n *Node) AddPartitionsToTxn(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) (perPartition []error, err error) {
	perPartition = make([]error, len(parts))
	tps := make([]txn.TopicPartition, len(parts))
	bad := false
	for i, p := range parts {
		tps[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if err := n.HasPartition(p.Topic, p.Partition); err != nil {
			perPartition[i], bad = err, true
		}
	}
	if bad {
		for i := range perPartition {
			if perPartition[i] == nil {
				perPartition[i] = ErrOperationNotAttempted
			}
		}
		return perPartition, nil
	}
	err = n.withTxn(ctx, id, func(c *txn.Coordinator) error {
		return c.AddPartitions(ctx, txn.AddRequest{ID: id, ProducerID: pid, Epoch: epoch, Partitions: tps})
	})
	for i := range perPartition {
		perPartition[i] = err
	}
	return perPartition, err
}

// VerifyTxn answers, per partition, whether it is in the producer's open
// transaction (nil) or not (txn.ErrInvalidTxnState): AddPartitionsToTxn
// v4's VerifyOnly. err is an error of the whole request.
func (n *Node) VerifyTxn(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) ([]error, error) {
	c, err := n.TxnCoordinator(ctx, id)
	if err != nil {
		return nil, err
	}
	tps := make([]txn.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return c.Verify(txn.AddRequest{ID: id, ProducerID: pid, Epoch: epoch, Partitions: tps})
}

// txnVerify is the check of a transactional produce (KIP-890 part 1): nil
// when topic-partition is in the producer's open transaction,
// txn.ErrInvalidTxnState (or the coordinator's error) otherwise. The
// coordinator is asked locally, or, when another broker coordinates the id,
// over AddPartitionsToTxn v4 with VerifyOnly (txnPeers).
func (n *Node) txnVerify(ctx context.Context, transactionalID string, producerID int64, epoch int16, topic string, partition int32) error {
	b, err := n.txnCoordinatorOf(ctx, transactionalID, false)
	if err != nil {
		return err
	}
	if b.ID != n.cfg.NodeID {
		return n.txnPeers.verify(ctx, n, b, transactionalID, producerID, epoch, topic, partition)
	}
	errs, err := n.txn.Verify(txn.AddRequest{ID: transactionalID, ProducerID: producerID, Epoch: epoch,
		Partitions: []txn.TopicPartition{{Topic: topic, Partition: partition}}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AddOffsetsToTxn adds group's partition of OffsetsTopic to the producer's
// transaction (its TxnOffsetCommit goes there), creating OffsetsTopic
// when there is none.
func (n *Node) AddOffsetsToTxn(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if _, err := n.coordinatorOf(ctx, group, true); err != nil {
		return err
	}
	tp := txn.TopicPartition{Topic: OffsetsTopic, Partition: n.offsetsPartitionFor(group)}
	return n.withTxn(ctx, id, func(c *txn.Coordinator) error {
		return c.AddPartitions(ctx, txn.AddRequest{ID: id, ProducerID: pid, Epoch: epoch, Partitions: []txn.TopicPartition{tp}})
	})
}

// EndTxn commits or aborts the producer's transaction; it returns once the
// decision is in the transaction log (the markers follow).
func (n *Node) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	return n.withTxn(ctx, id, func(c *txn.Coordinator) error {
		return c.EndTxn(ctx, txn.EndRequest{ID: id, ProducerID: pid, Epoch: epoch, Commit: commit})
	})
}

// DescribeTransaction describes id, which this broker must coordinate.
func (n *Node) DescribeTransaction(ctx context.Context, id string) (txn.Description, error) {
	if id == "" {
		return txn.Description{}, fmt.Errorf("%w: empty transactional id", txn.ErrInvalidRequest)
	}
	b, err := n.txnCoordinatorOf(ctx, id, false)
	if err != nil {
		return txn.Description{}, err
	}
	if b.ID != n.cfg.NodeID {
		return txn.Description{}, fmt.Errorf("%w: transactional id %q is coordinated by broker %d", ErrNotCoordinator, id, b.ID)
	}
	return n.txn.Describe(id)
}

// ListTransactions lists the transactional ids this broker coordinates
// that pass f.
func (n *Node) ListTransactions(f txn.Filter) []txn.Listing { return n.txn.List(f) }

// withTxn runs do against id's coordinator when this broker is it.
func (n *Node) withTxn(ctx context.Context, id string, do func(*txn.Coordinator) error) error {
	if id == "" {
		return fmt.Errorf("%w: empty transactional id", txn.ErrInvalidRequest)
	}
	c, err := n.TxnCoordinator(ctx, id)
	if err != nil {
		return err
	}
	return do(c)
}
