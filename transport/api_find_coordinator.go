package transport

// FindCoordinator: v0-v4.
//
// librdkafka needs v0 served to enable consumer groups. v1 added the key type
// (0 group, 1 transaction), v3 made it flexible, v4 batches keys (kgo uses
// it). On one node the coordinator of every group is this node; transaction
// keys are answered the same way, and the transactional requests that would
// follow are refused (weir has no transactions).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleFindCoordinator(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := s.advertisedAddr()

	var err error
	if req.CoordinatorType != 0 && req.CoordinatorType != 1 {
		err = errCoordinatorType
	}
	if req.Version < 4 {
		resp.ErrorCode = s.code(err)
		resp.ErrorMessage = errorMessage(err)
		if err == nil {
			resp.NodeID, resp.Host, resp.Port = s.cfg.NodeID, host, port
		} else {
			resp.NodeID = -1
		}
		return resp, nil
	}
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, len(req.CoordinatorKeys))
	for i, key := range req.CoordinatorKeys {
		c := &resp.Coordinators[i]
		c.Default()
		c.Key = key
		c.ErrorCode = s.code(err)
		c.ErrorMessage = errorMessage(err)
		if err == nil {
			c.NodeID, c.Host, c.Port = s.cfg.NodeID, host, port
		} else {
			c.NodeID = -1
		}
	}
	return resp, nil
}
