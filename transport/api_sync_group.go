package transport

// SyncGroup: v0-v5.
//
// librdkafka needs v0 served to enable consumer groups. v3 added instance IDs,
// v4 made it flexible, v5 carries and answers the protocol type and name. The
// request blocks until the group's leader has sent the assignments.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleSyncGroup(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)

	sr := groups.SyncRequest{
		Group:        req.Group,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		Generation:   req.Generation,
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	var res groups.SyncResult
	coord, err := s.node.GroupCoordinator(req.Group)
	if err == nil {
		res, err = coord.Sync(ctx, sr)
	}
	resp.ErrorCode = s.code(err)
	resp.MemberAssignment = []byte{}
	if err != nil {
		return resp, nil
	}
	resp.ProtocolType = &res.ProtocolType
	resp.Protocol = &res.Protocol
	if res.Assignment != nil {
		resp.MemberAssignment = res.Assignment
	}
	return resp, nil
}
