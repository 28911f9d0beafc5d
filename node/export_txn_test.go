package node

import "context"

// TxnVerify exposes txnVerify to the external tests of this package.
func (n *Node) TxnVerify(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	return n.txnVerify(ctx, id, pid, epoch, topic, partition)
}

// WrapTxnVerifier replaces the node's verifier with wrap of it, for the
// external tests; call it before the node is served.
func (n *Node) WrapTxnVerifier(wrap func(TxnVerifier) TxnVerifier) {
	n.txnVerifier = wrap(n.txnVerifier)
}
