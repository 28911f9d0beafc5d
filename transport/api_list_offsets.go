package transport

// ListOffsets: v0-v6.
//
// librdkafka sends up to v2. v0 answers with a list of offsets
// (OldStyleOffsets); v1+ with one offset and its timestamp; v2 added the
// isolation level (read_committed: the latest offset is the last stable
// offset, below any open transaction); v4 the leader epoch; v6 made it flexible; v7 the max-timestamp
// query (-3, KIP-734). v8's earliest-local (-4) and v9's
// earliest-pending-upload (-5) are for tiered storage, which weir does not
// have: not served. What each timestamp means is
// node.Partition.ListOffset's to say.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleListOffsets(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset = -1, -1
			current := rp.CurrentLeaderEpoch
			if req.Version < 4 {
				current = -1
			}
			p, err := s.node.FetchPartition(rt.Topic, rp.Partition, -1, 0, current)
			if err != nil {
				sp.ErrorCode = s.code(err)
				continue
			}
			if req.Version >= 2 && req.IsolationLevel == 1 {
				p.ReadCommitted()
			}
			off, ts, err := p.ListOffset(rp.Timestamp)
			if err != nil {
				sp.ErrorCode = s.code(err)
				continue
			}
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, p.LeaderEpoch()
			if req.Version == 0 {
				sp.OldStyleOffsets = []int64{}
				if off >= 0 {
					sp.OldStyleOffsets = append(sp.OldStyleOffsets, off)
				}
			}
		}
	}
	return resp, nil
}
