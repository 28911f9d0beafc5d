package transport

// InitProducerId: v0-v4.
//
// Gives an idempotent producer a new producer ID (epoch 0) from the node,
// never reused across restarts; kgo uses it whenever it is served.
// v2 made it flexible; v3 lets a producer name its current ID and epoch to
// bump (answered with a fresh ID, which fences nothing on one node: sequence
// state is per ID); v4 changed only error semantics. The node refuses a
// transactional ID: weir has no transactions. It answers INVALID_REQUEST,
// which no client retries and whose text in every client (franz-go, the
// Java client, librdkafka) says to see the broker logs; the broker logs, at
// WARN, that transactions are not supported, with the transactional id and
// the client id. (The response has no error message field, and the other
// candidates mislead: UNSUPPORTED_VERSION suggests upgrading the client,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED an ACL problem.)

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleInitProducerID(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id, epoch, err := s.node.InitProducerID(ctx, req.TransactionalID)
	if err != nil {
		if errors.Is(err, node.ErrTransactionsNotSupported) {
			s.log.Warn("transport: transactional producer refused: weir does not support transactions yet",
				"transactional_id", *req.TransactionalID, "client_id", r.clientID, "remote", r.c.nc.RemoteAddr(),
				"answer", "INVALID_REQUEST")
		}
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
