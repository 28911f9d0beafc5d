package transport

// TxnOffsetCommit: v0-v3.
//
// A transactional producer commits a consumer group's offsets as part of
// its transaction (KIP-98), after AddOffsetsToTxn: the coordinator writes
// them to the group's partition of __consumer_offsets as transactional
// records, and they become the group's committed offsets when the
// transaction commits (its marker reaches that partition) or are dropped
// when it aborts; until then OffsetFetch does not show them, and with
// RequireStable answers UNSTABLE_OFFSET_COMMIT for their partitions. v2
// added leader epochs; v3 (KIP-447, the first flexible version) names the
// group member that consumed the offsets (member id, generation, instance
// id), checked as OffsetCommit checks them; before v3 no member is named,
// and the commit is accepted whatever the group's state. A partition of a
// topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; the others
// commit. A producer epoch older than one the group's partition has seen
// is INVALID_PRODUCER_EPOCH. v0-v1 get COORDINATOR_NOT_AVAILABLE for
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers them. v4+ (KIP-890 part
// 2) are not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleTxnOffsetCommit(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)

	tr := groups.TxnCommitRequest{Group: req.Group, TransactionalID: req.TransactionalID,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, GenerationID: -1}
	if req.Version >= 3 {
		tr.MemberID, tr.GenerationID, tr.GroupInstanceID = req.MemberID, req.Generation, req.InstanceID
	}
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			epoch := rp.LeaderEpoch
			if req.Version < 2 {
				epoch = -1
			}
			tr.Offsets = append(tr.Offsets, groups.OffsetCommit{
				TopicPartition: groups.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset:         rp.Offset,
				LeaderEpoch:    epoch,
				Metadata:       rp.Metadata,
			})
		}
	}
	if len(tr.Offsets) == 0 {
		return resp, nil
	}
	res, _ := s.node.TxnOffsetCommit(ctx, tr)
	for i := range resp.Topics {
		st := &resp.Topics[i]
		for j := range st.Partitions {
			code := s.code(res[groups.TopicPartition{Topic: st.Topic, Partition: st.Partitions[j].Partition}])
			if req.Version < 2 && code == kerr.CoordinatorLoadInProgress.Code {
				// Producers before v2 do not retry it (KAFKA-7296);
				// Kafka answers them this instead.
				code = kerr.CoordinatorNotAvailable.Code
			}
			st.Partitions[j].ErrorCode = code
		}
	}
	return resp, nil
}
