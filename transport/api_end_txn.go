package transport

// EndTxn: v0-v3.
//
// Commits or aborts a producer's transaction at its coordinator: answered
// once the decision is in __transaction_state; the markers follow. v1 only
// allowed the coordinator to answer sooner; v2 answers PRODUCER_FENCED where
// v0-v1 get INVALID_PRODUCER_EPOCH; v3 made it flexible. v4 (KIP-890's
// TRANSACTION_ABORTABLE) and v5 (KIP-890 part 2: an epoch bump per
// transaction) are not served, so clients keep the part 1 protocol.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleEndTxn(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	err := s.node.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = fencedCode(s, err, req.Version < 2)
	return resp, nil
}
