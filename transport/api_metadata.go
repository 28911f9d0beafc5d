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
// The brokers are those with an endpoint of the connection's listener, at
// that endpoint (listener_advertise.go); a partition led by a live broker
// without it has no leader for this listener: LISTENER_NOT_FOUND from v6
// on, LEADER_NOT_AVAILABLE before, as Kafka answers.

import (
	"context"
	"slices"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleMetadata(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	brokers, without := r.c.brokersOn() // listener_advertise.go
	for _, b := range brokers {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
	}
	defer func() { resp.Topics = leadersWithout(resp.Topics, without, req.Version) }()
	cluster := s.node.ClusterID()
	resp.ClusterID = &cluster
	resp.ControllerID = s.node.ControllerID()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		resp.Topics = s.allTopicsMetadata()
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

// allTopicsMetadata is every topic as Metadata answers it, converted once
// per list the node returns (once per cluster image) and shared, read
// only, by the responses until it changes.
func (s *Server) allTopicsMetadata() []kmsg.MetadataResponseTopic {
	ts := s.node.Topics()
	key := unsafe.SliceData(ts)
	if c := s.mdCache.Load(); c != nil && c.key == key && c.n == len(ts) {
		return c.topics
	}
	out := make([]kmsg.MetadataResponseTopic, len(ts))
	for i, t := range ts {
		out[i] = topicMetadata(t)
	}
	s.mdCache.Store(&metadataCache{key: key, n: len(ts), topics: out})
	return out
}

// metadataCache is allTopicsMetadata's answer for one list of the node's.
type metadataCache struct {
	key    *node.TopicInfo
	n      int
	topics []kmsg.MetadataResponseTopic
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

// leadersWithout returns topics with every partition led by a broker of
// without answered as leaderless for this listener (copied where changed:
// topics may be the shared all-topics answer).
func leadersWithout(topics []kmsg.MetadataResponseTopic, without map[int32]bool, version int16) []kmsg.MetadataResponseTopic {
	if len(without) == 0 {
		return topics
	}
	code := kerr.ListenerNotFound.Code
	if version < 6 {
		code = kerr.LeaderNotAvailable.Code
	}
	var out []kmsg.MetadataResponseTopic
	for i, t := range topics {
		var parts []kmsg.MetadataResponseTopicPartition
		for j, p := range t.Partitions {
			if !without[p.Leader] {
				continue
			}
			if parts == nil {
				parts = slices.Clone(t.Partitions)
			}
			parts[j].Leader, parts[j].ErrorCode = -1, code
		}
		if parts == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(topics)
		}
		out[i].Partitions = parts
	}
	if out == nil {
		return topics
	}
	return out
}
