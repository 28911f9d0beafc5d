package transport

// Metadata: v0-v12.
//
// librdkafka sends up to v4, sarama and kgo newer ones. v0 reads an empty topic
// list as "all topics", v1+ a null one; v4 added AllowAutoTopicCreation (older
// versions always allow it); v9 made it flexible; v10 added topic IDs (a topic
// may be asked for by ID); v11 dropped the cluster's authorized operations and
// v12 made topic names nullable. v13 (a top-level error code) is not served.
//
// The brokers, the controller, and each partition's leader, epoch, replicas
// and ISR come from the node; so does the decision to auto-create a topic.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleMetadata(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	for _, b := range s.node.Brokers() {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
	}
	cluster := s.node.ClusterID()
	resp.ClusterID = &cluster
	resp.ControllerID = s.node.ControllerID()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.node.Topics() {
			resp.Topics = append(resp.Topics, topicMetadata(t))
		}
		return resp, nil
	}
	clientAllowsCreate := req.Version < 4 || req.AllowAutoTopicCreation
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		var (
			t   node.TopicInfo
			err error
		)
		switch {
		case rt.Topic != nil:
			t, err = s.node.MetadataTopic(ctx, *rt.Topic, clientAllowsCreate)
		case rt.TopicID != [16]byte{}:
			t, err = s.node.TopicByID(rt.TopicID)
		default:
			err = node.ErrUnknownTopicID
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = s.code(err)
			mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(t))
	}
	return resp, nil
}

func topicMetadata(t node.TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.Partitions))
	for i, p := range t.Partitions {
		mp := &mt.Partitions[i]
		mp.Default()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = p.Offline
	}
	return mt
}
