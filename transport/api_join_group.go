package transport

// JoinGroup: v0-v9.
//
// librdkafka needs v0 served to enable consumer groups. v1 added the
// rebalance timeout (v0 uses the session timeout for both); v4 requires a
// known member ID (a first join gets MEMBER_ID_REQUIRED with its new ID and
// joins again); v5 static membership (instance IDs); v6 made it flexible; v7
// answers with the protocol type; v8 carries a reason (logged only); v9 adds
// SkipAssignment (always false: the leader assigns).
//
// The request blocks in the coordinator until the rebalance completes, which
// holds back this connection's later requests, as in Kafka.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleJoinGroup(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)

	jr := groups.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		InstanceID:           req.InstanceID,
		ProtocolType:         req.ProtocolType,
		Protocols:            make([]groups.Protocol, len(req.Protocols)),
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: req.Version >= 4,
		ClientID:             r.clientID,
		ClientHost:           r.c.clientHost,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for i, p := range req.Protocols {
		jr.Protocols[i] = groups.Protocol{Name: p.Name, Metadata: p.Metadata}
	}
	if req.Reason != nil {
		s.log.Debug("transport: join group", "group", req.Group, "member", req.MemberID, "reason", *req.Reason)
	}

	var res groups.JoinResult
	coord, err := s.node.GroupCoordinator(req.Group)
	if err == nil {
		res, err = coord.Join(ctx, jr)
	}
	resp.ErrorCode = s.code(err)
	resp.MemberID = res.MemberID
	if resp.MemberID == "" {
		resp.MemberID = req.MemberID
	}
	if err != nil {
		resp.Generation = -1
		return resp, nil
	}
	resp.Generation = res.Generation
	resp.ProtocolType = &res.ProtocolType
	resp.Protocol = &res.Protocol
	resp.LeaderID = res.LeaderID
	resp.Members = make([]kmsg.JoinGroupResponseMember, len(res.Members))
	for i, m := range res.Members {
		resp.Members[i] = kmsg.JoinGroupResponseMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ProtocolMetadata: m.Metadata}
	}
	return resp, nil
}
