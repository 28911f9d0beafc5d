package transport

// OffsetForLeaderEpoch: v0-v4 (KIP-101, KIP-279, KIP-320).
//
// Followers ask it where an epoch of theirs ends before they fetch from a new
// leader, and truncate to the answer; consumers (franz-go, once a broker
// serves v2+) ask it to validate their position after a leader change. v1
// added the epoch to the answer, v2 CurrentLeaderEpoch (fencing), v3 the
// ReplicaID (followers; consumers send -2), v4 made it flexible. The answer
// is node.EpochEnd's: the largest epoch at or below the one asked, and where
// it ends; -1 and -1 for an epoch the leader does not know.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetForLeaderEpoch(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			current := rp.CurrentLeaderEpoch
			if req.Version < 2 {
				current = -1
			}
			epoch, end, err := s.node.EpochEnd(rt.Topic, rp.Partition, current, rp.LeaderEpoch)
			if err != nil {
				sp.ErrorCode = s.code(err)
				sp.LeaderEpoch, sp.EndOffset = -1, -1
				continue
			}
			sp.LeaderEpoch, sp.EndOffset = epoch, end
		}
	}
	return resp, nil
}
