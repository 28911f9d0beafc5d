package transport

// ConsumerGroupDescribe: v0-v1 (KIP-848 next-generation consumer groups).
//
// Describes consumer groups: their epochs, assignor, and each member's
// subscription, current and target assignment. A classic group, or no group,
// is GROUP_ID_NOT_FOUND, as in Kafka. v1 adds the member type (always 1,
// consumer: classic members do not join consumer groups here). Authorized
// operations are not computed (reported as not asked for).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups/consumer"
)

func handleConsumerGroupDescribe(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	for i, name := range req.Groups {
		g := &resp.Groups[i]
		g.Default()
		g.Group = name
		g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
		var d consumer.Description
		var names map[[16]byte]string
		coord, err := s.node.GroupCoordinator(name)
		if err == nil {
			d, names, err = coord.ConsumerDescribe(name)
		}
		if err != nil {
			g.ErrorCode, g.ErrorMessage = s.code(err), errorMessage(err)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.RackID, gm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.Epoch
			gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
			gm.SubscribedTopics, gm.SubscribedTopicRegex = m.SubscribedTopicNames, m.SubscribedTopicRegex
			gm.Assignment = describeAssignment(m.Assigned, names)
			gm.TargetAssignment = describeAssignment(m.Target, names)
			gm.MemberType = 1
			g.Members = append(g.Members, gm)
		}
	}
	return resp, nil
}

func describeAssignment(tps []consumer.TopicPartitions, names map[[16]byte]string) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = make([]kmsg.AssignmentTopicPartition, len(tps))
	for i, t := range tps {
		a.TopicPartitions[i] = kmsg.AssignmentTopicPartition{TopicID: t.Topic, Topic: names[t.Topic], Partitions: t.Partitions}
	}
	return a
}
