package transport

// Heartbeat: v0-v4.
//
// librdkafka needs v0 served to enable consumer groups. v3 added instance
// IDs, v4 made it flexible. REBALANCE_IN_PROGRESS tells a member to join
// again.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleHeartbeat(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	coord, err := s.node.GroupCoordinator(req.Group)
	if err == nil {
		err = coord.Heartbeat(req.Group, req.MemberID, req.InstanceID, req.Generation)
	}
	resp.ErrorCode = s.code(err)
	return resp, nil
}
