package transport

// ConsumerGroupHeartbeat: v0-v1 (KIP-848 next-generation consumer groups).
//
// The coordinator assigns the partitions (uniform or range assignor) and
// hands them out through these heartbeats; see core/groups/consumer. v0
// lets the coordinator make up the member id of a joining member; v1 (Kafka
// 4.0, the version franz-go and the Java client require) has the client
// make it up and adds SubscribedTopicRegex.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups/consumer"
)

func handleConsumerGroupHeartbeat(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)

	hr := consumer.HeartbeatRequest{
		MemberID:               req.MemberID,
		MemberEpoch:            req.MemberEpoch,
		InstanceID:             req.InstanceID,
		RackID:                 req.RackID,
		RebalanceTimeoutMillis: req.RebalanceTimeoutMillis,
		SubscribedTopicNames:   req.SubscribedTopicNames,
		SubscribedTopicRegex:   req.SubscribedTopicRegex,
		ServerAssignor:         req.ServerAssignor,
		ClientID:               r.clientID,
		ClientHost:             r.c.clientHost,
	}
	if req.Version == 0 && hr.MemberID == "" && hr.MemberEpoch == consumer.JoinEpoch {
		hr.MemberID = newMemberUUID()
	}
	if req.Topics != nil {
		hr.Owned = make([]consumer.TopicPartitions, len(req.Topics))
		for i, t := range req.Topics {
			hr.Owned[i] = consumer.TopicPartitions{Topic: t.TopicID, Partitions: t.Partitions}
		}
	}

	coord, err := s.node.GroupCoordinator(req.Group)
	var res consumer.HeartbeatResponse
	if err == nil {
		res, err = coord.ConsumerHeartbeat(req.Group, hr)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.code(err), errorMessage(err)
		return resp, nil
	}
	resp.MemberID = &res.MemberID
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, len(res.Assignment))
		for i, t := range res.Assignment {
			a.Topics[i] = kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t.Topic, Partitions: t.Partitions}
		}
		resp.Assignment = &a
	}
	return resp, nil
}

// newMemberUUID is a member id as Kafka makes them: a random UUID in
// base64url without padding.
func newMemberUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(u[:])
}
