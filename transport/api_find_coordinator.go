package transport

// FindCoordinator: v0-v4.
//
// librdkafka needs v0 served to enable consumer groups. v1 added the key type
// (0 group, 1 transaction), v3 made it flexible, v4 batches keys (kgo uses
// it). Which broker coordinates a key is the node's answer, at its address
// on the connection's listener: a coordinator without that listener is
// COORDINATOR_NOT_AVAILABLE, as Kafka answers.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleFindCoordinator(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		b, err := r.c.coordinatorOn(s.node.FindCoordinator(ctx, req.CoordinatorType, req.CoordinatorKey))
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
		b, err := r.c.coordinatorOn(s.node.FindCoordinator(ctx, req.CoordinatorType, key))
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

// coordinatorOn is the coordinator b at its address on the connection's
// listener (listener_advertise.go); one without the listener is not
// available to this listener's clients.
func (c *conn) coordinatorOn(b node.Broker, err error) (node.Broker, error) {
	if err != nil {
		return b, err
	}
	host, port, ok := c.addrOn(b)
	if !ok {
		return node.Broker{ID: -1}, fmt.Errorf("%w: broker %d coordinates it and has no listener %s",
			node.ErrCoordinatorNotAvailable, b.ID, c.listener().Name)
	}
	b.Host, b.Port = host, port
	return b, nil
}
