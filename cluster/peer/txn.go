package peer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VerifyTxn asks a transaction coordinator whether topic-partition is in
// the open transaction of producer pid (epoch) of transactional id: the
// question a partition leader asks before a transactional produce
// (KIP-890 part 1), as AddPartitionsToTxn v4 with VerifyOnly. It returns
// the Kafka error code of the answer (0: in the transaction;
// INVALID_TXN_STATE: not; or the request's error, such as NOT_COORDINATOR).
func (c *Client) VerifyTxn(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) (int16, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topic, []int32{partition}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	r, err := c.request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := r.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	for _, t := range resp.Transactions {
		for _, rt := range t.Topics {
			for _, p := range rt.Partitions {
				if rt.Topic == topic && p.Partition == partition {
					return p.ErrorCode, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%w: AddPartitionsToTxn from %s does not answer for %s-%d", errBadResponse, c.addr, topic, partition)
}
