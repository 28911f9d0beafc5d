package transport

// Metadata: v0-v12.
//
// librdkafka sends up to v4, sarama and kgo newer ones. v0 reads an empty topic
// list as "all topics", v1+ a null one; v4 added AllowAutoTopicCreation (older
// versions always allow it); v9 made it flexible; v10 added topic IDs (a topic
// may be asked for by ID); v11 dropped the cluster's authorized operations and
// v12 made topic names nullable. v13 (a top-level error code) is not served.
//
// One node is the leader and the only replica of every partition, with leader
// epoch 0; it is also the controller.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topics"
)

func handleMetadata(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	host, port := s.advertisedAddr()
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: s.cfg.NodeID, Host: host, Port: port}}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.Topics() {
			resp.Topics = append(resp.Topics, s.topicMetadata(t))
		}
		return resp, nil
	}
	allowCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		var (
			t   *topics.Topic
			err error
		)
		switch {
		case rt.Topic != nil:
			t, err = s.metadataTopic(*rt.Topic, allowCreate)
		case rt.TopicID != [16]byte{}:
			if t = s.topicByID(rt.TopicID); t == nil {
				err = errUnknownTopicID
			}
		default:
			err = errUnknownTopicID
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = s.code(err)
			mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(t))
	}
	return resp, nil
}

// metadataTopic looks a topic up by name, creating it when allowed.
func (s *Server) metadataTopic(name string, allowCreate bool) (*topics.Topic, error) {
	if t, ok := s.topics.Topic(name); ok {
		return t, nil
	}
	if !allowCreate {
		return nil, topics.ErrUnknownTopic
	}
	return s.autoCreate(name)
}

// topicByID finds a topic by its ID, or returns nil.
func (s *Server) topicByID(id [16]byte) *topics.Topic {
	for _, t := range s.topics.Topics() {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (s *Server) topicMetadata(t *topics.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.Partitions))
	replicas := []int32{s.cfg.NodeID}
	for i, p := range t.Partitions {
		mp := &mt.Partitions[i]
		mp.Default()
		mp.Partition = p.Index
		mp.Leader = s.cfg.NodeID
		mp.LeaderEpoch = 0
		mp.Replicas = replicas
		mp.ISR = replicas
		mp.OfflineReplicas = []int32{}
	}
	return mt
}
