package transport

// OffsetFetch: v0-v9.
//
// librdkafka needs v1 served to enable consumer groups and sends up to v7.
// v2 added a top-level error code and lets a null topic list mean "every
// committed offset of the group"; v5 leader epochs; v6 made it flexible; v7
// RequireStable: a partition whose offset may still change (offsets of an
// open transaction waiting for its marker, or a commit being written) is
// answered UNSTABLE_OFFSET_COMMIT, offset -1, and the client asks again
// (KIP-447; with every committed offset asked, those among them, as
// Kafka's newer coordinator does); v8 asks for several groups
// at once (kgo batches); v9 names the member asking (member id and epoch),
// which a KIP-848 consumer group checks (UNKNOWN_MEMBER_ID,
// STALE_MEMBER_EPOCH); without a member id (an admin) anything goes. A partition with no commit answers offset -1.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleOffsetFetch(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)

	if req.Version < 8 {
		var asked []groupTopic
		if req.Topics != nil {
			asked = make([]groupTopic, len(req.Topics))
			for i, t := range req.Topics {
				asked[i] = groupTopic{t.Topic, t.Partitions}
			}
		}
		topics, code := s.fetchOffsets(req.Group, nil, -1, asked, req.Version >= 7 && req.RequireStable)
		resp.ErrorCode = code
		resp.Topics = make([]kmsg.OffsetFetchResponseTopic, len(topics))
		for i, t := range topics {
			rt := &resp.Topics[i]
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.OffsetFetchResponseTopicPartition, len(t.Partitions))
			for j, p := range t.Partitions {
				rt.Partitions[j] = kmsg.OffsetFetchResponseTopicPartition(p)
			}
			if code != 0 && req.Version < 2 {
				// No top-level error before v2: every partition carries it.
				for j := range rt.Partitions {
					rt.Partitions[j].ErrorCode = code
				}
			}
		}
		return resp, nil
	}

	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
	for i, g := range req.Groups {
		var asked []groupTopic
		if g.Topics != nil {
			asked = make([]groupTopic, len(g.Topics))
			for j, t := range g.Topics {
				asked[j] = groupTopic{t.Topic, t.Partitions}
			}
		}
		topics, code := s.fetchOffsets(g.Group, g.MemberID, g.MemberEpoch, asked, req.RequireStable)
		rg := &resp.Groups[i]
		rg.Default()
		rg.Group, rg.ErrorCode, rg.Topics = g.Group, code, topics
	}
	return resp, nil
}

type groupTopic struct {
	topic      string
	partitions []int32
}

// fetchOffsets answers one group: the asked partitions (nil: every committed
// one, sorted) and a group-level error code. memberID (v9+; nil before) and
// epoch name the member asking; requireStable (v7+) answers the partitions
// whose offset may still change UNSTABLE_OFFSET_COMMIT.
func (s *Server) fetchOffsets(group string, memberID *string, epoch int32, asked []groupTopic,
	requireStable bool) ([]kmsg.OffsetFetchResponseGroupTopic, int16) {
	var parts []groups.TopicPartition
	if asked != nil {
		parts = []groups.TopicPartition{}
		for _, t := range asked {
			for _, p := range t.partitions {
				parts = append(parts, groups.TopicPartition{Topic: t.topic, Partition: p})
			}
		}
	}
	var committed map[groups.TopicPartition]groups.Committed
	var unstable map[groups.TopicPartition]bool
	coord, err := s.node.GroupCoordinator(group)
	switch {
	case err == nil && requireStable:
		committed, unstable, err = coord.FetchStable(group, memberID, epoch, parts)
	case err == nil:
		committed, err = coord.FetchMember(group, memberID, epoch, parts)
	}
	if err != nil {
		out := make([]kmsg.OffsetFetchResponseGroupTopic, len(asked))
		for i, t := range asked {
			out[i].Topic = t.topic
			out[i].Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, len(t.partitions))
			for j, p := range t.partitions {
				out[i].Partitions[j] = noCommit(p)
			}
		}
		return out, s.code(err)
	}
	if asked == nil {
		byTopic := make(map[string][]int32)
		for tp := range committed {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			asked = append(asked, groupTopic{t, ps})
		}
		sort.Slice(asked, func(i, j int) bool { return asked[i].topic < asked[j].topic })
	}
	out := make([]kmsg.OffsetFetchResponseGroupTopic, len(asked))
	for i, t := range asked {
		out[i].Topic = t.topic
		out[i].Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, len(t.partitions))
		for j, p := range t.partitions {
			tp := groups.TopicPartition{Topic: t.topic, Partition: p}
			c, ok := committed[tp]
			if !ok || unstable[tp] {
				out[i].Partitions[j] = noCommit(p)
				if unstable[tp] {
					out[i].Partitions[j].ErrorCode = s.code(groups.ErrUnstableOffsetCommit)
				}
				continue
			}
			meta := c.Metadata
			rp := &out[i].Partitions[j]
			rp.Default()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, c.Offset, c.LeaderEpoch, &meta
		}
	}
	return out, 0
}

func noCommit(p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	empty := ""
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, &empty
	return rp
}
