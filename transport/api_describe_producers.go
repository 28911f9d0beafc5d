package transport

// DescribeProducers: v0.
//
// The idempotent producers a partition's leader knows (KIP-664): id, epoch,
// last sequence and when it last appended (the broker's clock, ms), the
// coordinator epoch of its latest transaction marker and the first offset of
// its open transaction (-1 when none). A producer known only from a marker
// (the coordinator bumped its epoch to abort) has last sequence -1. A partition this broker does not lead is
// NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeProducers(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		for j, p := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = p
			ps, err := s.node.DescribeProducers(rt.Topic, p)
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = s.code(err), errorMessage(err)
				continue
			}
			for _, pi := range ps {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pi.ID, int32(pi.Epoch), pi.LastSequence, pi.Used
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
		}
	}
	return resp, nil
}
