package transport

// FindCoordinator: v0-v4.
//
// librdkafka needs v0 served to enable consumer groups. v1 added the key type
// (0 group, 1 transaction), v3 made it flexible, v4 batches keys (kgo uses
// it). Which broker coordinates a key is the node's answer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleFindCoordinator(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		b, err := s.node.FindCoordinator(ctx, req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode = s.code(err)
		resp.ErrorMessage = errorMessage(err)
		if err == nil {
			resp.NodeID, resp.Host, resp.Port = b.ID, b.Host, b.Port
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
		b, err := s.node.FindCoordinator(ctx, req.CoordinatorType, key)
		c.ErrorCode = s.code(err)
		c.ErrorMessage = errorMessage(err)
		if err == nil {
			c.NodeID, c.Host, c.Port = b.ID, b.Host, b.Port
		} else {
			c.NodeID = -1
		}
	}
	return resp, nil
}
