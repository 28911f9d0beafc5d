package transport

// OffsetCommit: v0-v9.
//
// librdkafka needs v1..v2 served to enable consumer groups and sends up to v7.
// v0 has no generation (a simple commit); v1 added generation, member and a
// per-partition timestamp (ignored); v2-v4 a retention time (ignored: the
// broker-wide offsets retention applies); v6 leader epochs; v7 instance IDs; v8
// made it flexible; v9 is v8 for KIP-848 consumer groups, whose members send
// their member epoch as the generation (checked as Kafka does, STALE_MEMBER_EPOCH;
// weir checks it the same way in older versions rather than refusing them).
// Generation -1 with no member commits for a group that has no members (the
// "simple" consumer). The node refuses offsets for unknown
// partitions (UNKNOWN_TOPIC_OR_PARTITION) and still commits the others.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleOffsetCommit(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)

	generation, member := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, member = -1, ""
	}
	var commits []groups.OffsetCommit
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			epoch := rp.LeaderEpoch
			if req.Version < 6 {
				epoch = -1
			}
			commits = append(commits, groups.OffsetCommit{
				TopicPartition: groups.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset:         rp.Offset,
				LeaderEpoch:    epoch,
				Metadata:       rp.Metadata,
			})
		}
	}
	if len(commits) == 0 {
		return resp, nil
	}
	perCommit, _ := s.node.CommitOffsets(req.Group, member, req.InstanceID, generation, commits)
	k := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			resp.Topics[i].Partitions[j].ErrorCode = s.code(perCommit[k])
			k++
		}
	}
	return resp, nil
}
