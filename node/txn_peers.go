package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/cluster/peer"
	"github.com/weir-broker/weir/core/txn"
)

// txnVerifyTimeout bounds one verification at another broker.
const txnVerifyTimeout = 10 * time.Second

// txnPeers are the connections a partition leader keeps to the
// transaction coordinators it asks (helper txncoord), one per broker.
type txnPeers struct {
	mu   sync.Mutex
	by   map[int32]*peer.Client
	addr map[int32]string // the address each was dialed at
}

// verify asks broker b, the coordinator of id, whether topic-partition is
// in the producer's transaction.
func (tp *txnPeers) verify(ctx context.Context, n *Node, b Broker, id string, pid int64, epoch int16, topic string, partition int32) error {
	cl, err := tp.client(n, b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	code, err := cl.VerifyTxn(ctx, id, pid, epoch, topic, partition)
	if err != nil {
		return fmt.Errorf("%w: verifying %s-%d in the transaction of %q at broker %d: %v",
			txn.ErrCoordinatorNotAvailable, topic, partition, id, b.ID, err)
	}
	if code == 0 {
		return nil
	}
	return fmt.Errorf("%w: broker %d answered %v for %s-%d in the transaction of %q",
		txnCodeError(code), b.ID, kerr.ErrorForCode(code), topic, partition, id)
}

// txnCodeError is the coordinator sentinel for a Kafka error code of a
// verification.
func txnCodeError(code int16) error {
	switch code {
	case kerr.InvalidTxnState.Code:
		return txn.ErrInvalidTxnState
	case kerr.InvalidProducerIDMapping.Code:
		return txn.ErrInvalidProducerIDMapping
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return txn.ErrProducerFenced
	case kerr.ConcurrentTransactions.Code:
		return txn.ErrConcurrentTransactions
	case kerr.NotCoordinator.Code:
		return txn.ErrNotCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		return txn.ErrCoordinatorLoadInProgress
	}
	return txn.ErrCoordinatorNotAvailable
}

// client returns the connection to b, dialing it (again, when b moved).
func (tp *txnPeers) client(n *Node, b Broker) (*peer.Client, error) {
	addr, err := n.peerAddr(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", txn.ErrCoordinatorNotAvailable, err)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if cl := tp.by[b.ID]; cl != nil && tp.addr[b.ID] == addr {
		return cl, nil
	}
	if cl := tp.by[b.ID]; cl != nil {
		cl.Close()
	}
	cl, err := peer.Dial(addr, n.cfg.NodeID, n.cfg.ReplicaDialer)
	if err != nil {
		return nil, fmt.Errorf("%w: broker %d at %s: %v", txn.ErrCoordinatorNotAvailable, b.ID, addr, err)
	}
	if tp.by == nil {
		tp.by, tp.addr = map[int32]*peer.Client{}, map[int32]string{}
	}
	tp.by[b.ID], tp.addr[b.ID] = cl, addr
	return cl, nil
}

// close closes every connection.
func (tp *txnPeers) close() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for id, cl := range tp.by {
		cl.Close()
		delete(tp.by, id)
	}
}
