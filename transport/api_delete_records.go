package transport

// DeleteRecords: v0-v2.
//
// v1 is v0; v2 made it flexible. Each partition's log start offset moves up
// to the offset asked (-1: the high watermark), on the partition's leader
// (NOT_LEADER_OR_FOLLOWER elsewhere); the answer is the low watermark, the
// log start after the call. An offset past the high watermark is
// OFFSET_OUT_OF_RANGE; the internal topic INVALID_TOPIC_EXCEPTION; a topic
// only compacted POLICY_VIOLATION. The node says what moving the start does
// (node.DeleteRecords). Followers follow the leader's log start from its
// fetch answers; the answer waits up to timeout_ms for every live replica's
// log start to reach the offset (the low watermark is then the smallest of
// them), and is REQUEST_TIMED_OUT with the low watermark as it is after
// that. Partitions are answered one after the other within the one timeout.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteRecords(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	// timeout_ms bounds the wait for the followers' log starts (Kafka's
	// DelayedDeleteRecords): REQUEST_TIMED_OUT then.
	tctx, cancel := context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
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
			low, err := s.node.DeleteRecords(tctx, rt.Topic, rp.Partition, rp.Offset)
			sp.LowWatermark, sp.ErrorCode = low, s.code(err)
		}
	}
	return resp, nil
}
