package transport

// InitProducerId: v0-v4.
//
// Gives an idempotent producer a new producer ID (epoch 0) from the node,
// never reused across restarts; kgo uses it whenever it is served.
// v2 made it flexible; v3 lets a producer name its current ID and epoch to
// bump (answered with a fresh ID, which fences nothing on one node: sequence
// state is per ID); v4 changed only error semantics. The node refuses a
// transactional ID: weir has no transactions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id, epoch, err := s.node.InitProducerID(ctx, req.TransactionalID)
	if err != nil {
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
