package transport

// DeleteRecords: v0-v2.
//
// v1 is v0; v2 made it flexible. Each partition's log start offset moves up
// to the offset asked (-1: the high watermark), on the partition's leader
// (NOT_LEADER_OR_FOLLOWER elsewhere); the answer is the low watermark, the
// log start after the call. An offset past the high watermark is
// OFFSET_OUT_OF_RANGE; the internal topic INVALID_TOPIC_EXCEPTION; a topic
// only compacted POLICY_VIOLATION. The node says what moving the start does
// (node.DeleteRecords). The answer does not wait for the followers, which
// follow the leader's log start from its fetch answers; timeout_ms is not
// used.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteRecords(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			low, err := s.node.DeleteRecords(rt.Topic, rp.Partition, rp.Offset)
			sp.LowWatermark, sp.ErrorCode = low, s.code(err)
		}
	}
	return resp, nil
}
