package transport

// OffsetDelete: v0.
//
// Deletes a group's committed offsets of the partitions named, on the
// group's coordinator (NOT_COORDINATOR elsewhere). A consumer group with
// members keeps the offsets of the topics they subscribe to
// (GROUP_SUBSCRIBED_TO_TOPIC for those partitions); another group with
// members is NON_EMPTY_GROUP; an unknown group GROUP_ID_NOT_FOUND; a
// partition that does not exist UNKNOWN_TOPIC_OR_PARTITION
// (groups.Coordinator.DeleteOffsets says the rules).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleOffsetDelete(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var parts []groups.TopicPartition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			parts = append(parts, groups.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	per, err := s.node.DeleteOffsets(req.Group, parts)
	if err != nil {
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	k := 0
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition, sp.ErrorCode = rp.Partition, s.code(per[k])
			k++
		}
	}
	return resp, nil
}
