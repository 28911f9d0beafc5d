package transport

// CreatePartitions: v0-v3.
//
// v1 is v0 (a throttle change); v2 made it flexible; v3 is v2 (KRaft
// answers more errors). Each topic is answered on its own: a topic named
// twice in the request is INVALID_REQUEST for both, a decrease or the same
// count INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, the
// internal topic INVALID_TOPIC_EXCEPTION, a bad assignment
// INVALID_REPLICA_ASSIGNMENT, with a message saying what is wrong.
// Where the new partitions go, and how an assignment is checked, is the
// node's to decide. timeout_ms bounds the wait for the new partitions'
// leaders (REQUEST_TIMED_OUT: they stay added, as in Kafka); <= 0 answers
// once the assignment is written. ValidateOnly checks and changes nothing.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleCreatePartitions(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	tctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	defer cancel()
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		if seen[rt.Topic] > 1 {
			st.ErrorCode, st.ErrorMessage = s.code(errDuplicateTopic), errorMessage(errDuplicateTopic)
			continue
		}
		cp := node.CreatePartitions{Topic: rt.Topic, Count: rt.Count, ValidateOnly: req.ValidateOnly, NoWait: req.TimeoutMillis <= 0}
		if rt.Assignment != nil {
			cp.Assignment = make([][]int32, len(rt.Assignment))
			for j, a := range rt.Assignment {
				cp.Assignment[j] = a.Replicas
			}
		}
		_, err := s.node.CreatePartitions(tctx, cp)
		st.ErrorCode, st.ErrorMessage = s.code(err), errorMessage(err)
	}
	return resp, nil
}
