package transport

// InitProducerId: v0-v4.
//
// Without a transactional id, gives an idempotent producer a new producer
// ID (epoch 0) from the node, never reused across restarts; kgo uses it
// whenever it is served. With one, the transaction coordinator answers
// (core/txn): the id's producer id with its epoch bumped, which fences older
// producers with the id, after aborting a transaction they left open
// (CONCURRENT_TRANSACTIONS meanwhile; the client retries).
// v2 made it flexible; v3 lets a producer name its current ID and epoch to
// bump (an idempotent one gets a fresh ID, which fences nothing on one node:
// sequence state is per ID; a transactional one its epoch bumped, or the
// same answer again for a retry); v4 answers PRODUCER_FENCED where v0-v3
// get INVALID_PRODUCER_EPOCH (KIP-588).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/txn"
)

func handleInitProducerID(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	var (
		id    int64
		epoch int16
		err   error
	)
	if req.TransactionalID == nil {
		id, epoch, err = s.node.InitProducerID(ctx)
	} else {
		pid, pepoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, pepoch = req.ProducerID, req.ProducerEpoch
		}
		id, epoch, err = s.node.InitTransactionalProducerID(ctx, *req.TransactionalID,
			time.Duration(req.TransactionTimeoutMillis)*time.Millisecond, pid, pepoch)
	}
	if err != nil {
		resp.ErrorCode = fencedCode(s, err, req.Version < 4)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}

// fencedCode is s.code(err), with PRODUCER_FENCED answered as
// INVALID_PRODUCER_EPOCH to the older versions that predate it (Kafka's
// KafkaApis does the same for each transactional API).
func fencedCode(s *Server, err error, old bool) int16 {
	if old && errors.Is(err, txn.ErrProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return s.code(err)
}
