package transport

// AddPartitionsToTxn: v0-v4.
//
// Adds partitions to a producer's transaction at its coordinator (core/txn),
// which must be this broker. v1 only allowed the coordinator to answer
// sooner; v2 answers PRODUCER_FENCED where v0-v1 get INVALID_PRODUCER_EPOCH;
// v3 made it flexible; v4 (KIP-890, between brokers) batches transactions
// and adds VerifyOnly: each partition answered NONE when it is in the
// transaction, INVALID_TXN_STATE when not, nothing added. Unless every
// partition exists, none is added: the unknown ones get
// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleAddPartitionsToTxn(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var parts []node.TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, node.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		errs, _ := s.node.AddPartitionsToTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, fencedCode(s, errs[i], req.Version < 2)
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, tx := range req.Transactions {
		var parts []node.TopicPartition
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, node.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		var errs []error
		if tx.VerifyOnly {
			var err error
			if errs, err = s.node.VerifyTxn(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts); err != nil {
				errs = make([]error, len(parts))
				for i := range errs {
					errs[i] = err
				}
			}
		} else {
			errs, _ = s.node.AddPartitionsToTxn(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		i := 0
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, s.code(errs[i])
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}
