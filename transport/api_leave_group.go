package transport

// LeaveGroup: v0-v5.
//
// librdkafka needs v0 served to enable consumer groups. v0-v2 name one member;
// v3 names several (with instance IDs) and answers per member; v4 made it
// flexible; v5 carries a reason per member (logged only).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleLeaveGroup(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)

	var members []groups.LeaveMember
	if req.Version < 3 {
		members = []groups.LeaveMember{{MemberID: req.MemberID}}
	} else {
		members = make([]groups.LeaveMember, len(req.Members))
		for i, m := range req.Members {
			members[i] = groups.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
			if m.Reason != nil {
				s.log.Debug("transport: leave group", "group", req.Group, "member", m.MemberID, "reason", *m.Reason)
			}
		}
	}
	var perMember []error
	coord, err := s.node.GroupCoordinator(req.Group)
	if err == nil {
		perMember, err = coord.Leave(req.Group, members)
	}
	resp.ErrorCode = s.code(err)
	if req.Version < 3 {
		if err == nil && len(perMember) > 0 {
			resp.ErrorCode = s.code(perMember[0])
		}
		return resp, nil
	}
	resp.Members = make([]kmsg.LeaveGroupResponseMember, len(req.Members))
	for i, m := range req.Members {
		rm := &resp.Members[i]
		rm.Default()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		if err == nil && i < len(perMember) {
			rm.ErrorCode = s.code(perMember[i])
		}
	}
	return resp, nil
}
