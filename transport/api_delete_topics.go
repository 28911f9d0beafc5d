package transport

// DeleteTopics: v0-v6.
//
// v4 made it flexible, v5 added error messages, v6 names topics by name or by
// ID. What deleting a topic removes is the node's to decide.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleDeleteTopics(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	asked := req.Topics
	if req.Version < 6 {
		asked = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			asked[i].Topic = &req.TopicNames[i]
		}
	}
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, len(asked))
	for i, rt := range asked {
		st := &resp.Topics[i]
		st.Default()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := ""
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
		case rt.TopicID != [16]byte{}:
			t, err := s.node.TopicByID(rt.TopicID)
			if err != nil {
				st.ErrorCode = s.code(err)
				st.ErrorMessage = errorMessage(err)
				continue
			}
			name = t.Name
			st.Topic = &name
		default:
			st.ErrorCode = s.code(node.ErrUnknownTopicID)
			st.ErrorMessage = errorMessage(node.ErrUnknownTopicID)
			continue
		}
		id, err := s.node.DeleteTopic(ctx, name)
		if id != [16]byte{} {
			st.TopicID = id
		}
		if err != nil {
			st.ErrorCode = s.code(err)
			st.ErrorMessage = errorMessage(err)
		}
	}
	return resp, nil
}
