package transport

// AddOffsetsToTxn: v0-v3.
//
// Adds a group's partition of __consumer_offsets to a producer's
// transaction, before its TxnOffsetCommit. v1 only allowed the coordinator
// to answer sooner; v2 answers PRODUCER_FENCED where v0-v1 get
// INVALID_PRODUCER_EPOCH; v3 made it flexible. v4 (KIP-890's
// TRANSACTION_ABORTABLE) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAddOffsetsToTxn(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	err := s.node.AddOffsetsToTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	resp.ErrorCode = fencedCode(s, err, req.Version < 2)
	return resp, nil
}
