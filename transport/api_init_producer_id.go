package transport

// InitProducerId: v0-v4.
//
// Gives an idempotent producer a new producer ID (epoch 0) from the topic
// registry, never reused across restarts; kgo uses it whenever it is served.
// v2 made it flexible; v3 lets a producer name its current ID and epoch to
// bump (answered with a fresh ID, which fences nothing on one node: sequence
// state is per ID); v4 changed only error semantics. A transactional ID is
// refused: weir has no transactions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = s.code(errTransactions)
		return resp, nil
	}
	id, epoch, err := s.topics.InitProducerID()
	if err != nil {
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
