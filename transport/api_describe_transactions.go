package transport

// DescribeTransactions: v0.
//
// Describes transactional ids this broker coordinates (kadm and
// kafka-transactions.sh send each id to its coordinator): state, producer
// id and epoch, timeout, the open transaction's start (-1: none) and
// partitions. An id another broker coordinates gets NOT_COORDINATOR; one
// unknown, TRANSACTIONAL_ID_NOT_FOUND.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeTransactions(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		d, err := s.node.DescribeTransaction(ctx, id)
		st.ErrorCode = s.code(err)
		if err == nil {
			st.State, st.TimeoutMillis = d.State.String(), int32(d.Timeout.Milliseconds())
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = d.ProducerID, d.Epoch, -1
			if !d.Start.IsZero() {
				st.StartTimestamp = d.Start.UnixMilli()
			}
			for _, p := range d.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = p.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, p.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
