package transport

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnLoaded waits until the broker has loaded its partitions of
// __transaction_state (creating the topic), so transactional requests are
// answered at once.
func (b *testBroker) txnLoaded(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.node.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
}

// The version cases of the transaction APIs (helper txncoord), each for a
// transactional id the coordinator does not know.
func init() {
	unknownMapping := func(int16) int16 { return kerr.InvalidProducerIDMapping.Code }
	versionCases[24] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version = v
			if v < 4 {
				req.TransactionalID, req.ProducerID = "unknown-tx", 1
				req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return req
			}
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "unknown-tx", 1, true
			tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
			req.Transactions = append(req.Transactions, tx)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.AddPartitionsToTxnResponse)
			if resp.Version >= 4 {
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		},
		want: unknownMapping,
	}
	versionCases[25] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.AddOffsetsToTxnRequest{Version: v, TransactionalID: "unknown-tx", ProducerID: 1, Group: "g"}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode },
		want:    unknownMapping,
	}
	versionCases[26] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.EndTxnRequest{Version: v, TransactionalID: "unknown-tx", ProducerID: 1, Commit: true}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode },
		want:    unknownMapping,
	}
	versionCases[65] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.DescribeTransactionsRequest{Version: v, TransactionalIDs: []string{"unknown-tx"}}
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		},
		want: func(int16) int16 { return kerr.TransactionalIDNotFound.Code },
	}
	versionCases[66] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.ListTransactionsRequest{Version: v, StateFilters: []string{"Ongoing"}, DurationFilterMillis: -1}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.ListTransactionsResponse).ErrorCode },
	}
}
