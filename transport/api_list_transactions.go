package transport

// ListTransactions: v0-v1.
//
// Lists the transactional ids this broker coordinates, filtered by state
// names (Kafka's: Empty, Ongoing, PrepareCommit, ...; unknown names are
// echoed in UnknownStateFilters and match nothing) and producer ids; v1
// adds DurationFilterMillis: only transactions open longer than that.
// v2's id pattern (KIP-1152) is not served.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/txn"
)

func handleListTransactions(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var f txn.Filter
	for _, name := range req.StateFilters {
		st, ok := txn.ParseStatus(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		f.States = append(f.States, st)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return resp, nil // only unknown states: nothing matches
	}
	f.ProducerIDs = req.ProducerIDFilters
	var openBefore time.Time
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		openBefore = time.Now().Add(-time.Duration(req.DurationFilterMillis) * time.Millisecond)
	}
	for _, l := range s.node.ListTransactions(f) {
		if !openBefore.IsZero() && (l.Start.IsZero() || l.Start.After(openBefore)) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.ID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
