package transport

// DeleteTopics: v0-v6.
//
// v4 made it flexible, v5 added error messages, v6 names topics by name or by
// ID. Deleting a topic closes its partitions' logs and removes their files
// (the topic registry does both; readers holding Slices finish first).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteTopics(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
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
			t := s.topicByID(rt.TopicID)
			if t == nil {
				st.ErrorCode = s.code(errUnknownTopicID)
				st.ErrorMessage = errorMessage(errUnknownTopicID)
				continue
			}
			name = t.Name
			st.Topic = &name
		default:
			st.ErrorCode = s.code(errUnknownTopicID)
			st.ErrorMessage = errorMessage(errUnknownTopicID)
			continue
		}
		if t, ok := s.topics.Topic(name); ok {
			st.TopicID = t.ID
		}
		if err := s.topics.Delete(name); err != nil {
			st.ErrorCode = s.code(err)
			st.ErrorMessage = errorMessage(err)
			continue
		}
		// Kafka drops a deleted topic's committed offsets, so a topic created
		// again under the name starts without them.
		if err := s.groups.RemoveTopic(name); err != nil {
			s.log.Warn("transport: dropping committed offsets of a deleted topic", "topic", name, "err", err)
		}
		s.log.Info("transport: deleted topic", "topic", name)
	}
	return resp, nil
}
