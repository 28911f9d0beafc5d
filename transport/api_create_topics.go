package transport

// CreateTopics: v0-v7.
//
// v1 added ValidateOnly and error messages; v4 lets NumPartitions and
// ReplicationFactor be -1 for the broker's defaults; v5 made it flexible and
// answers with the partition count, replication factor and configs created;
// v7 answers with the topic ID. One node serves replication factor 1 only,
// and a replica assignment may name this node only.
//
// ValidateOnly checks everything Create would (name, partitions, replicas and
// configs) without creating anything.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topics"
)

func handleCreateTopics(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		var (
			t   *topics.Topic
			err error
		)
		if seen[rt.Topic] > 1 {
			err = errDuplicateTopic
		} else {
			t, err = s.createTopic(rt, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = s.code(err)
			st.ErrorMessage = errorMessage(err)
			continue
		}
		if t == nil { // validated only
			st.NumPartitions, st.ReplicationFactor = rt.NumPartitions, 1
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = int32(len(t.Partitions))
		st.ReplicationFactor = 1
		st.Configs = topicConfigs(t.Configs, rt.Configs)
	}
	return resp, nil
}

// createTopic checks what a single node can serve, then creates the topic
// (or, validating only, returns nil).
func (s *Server) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool) (*topics.Topic, error) {
	if rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 && len(rt.ReplicaAssignment) == 0 {
		return nil, errReplicationFactor
	}
	partitions := rt.NumPartitions
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, errReplicaAssignment
		}
		for _, ra := range rt.ReplicaAssignment {
			if len(ra.Replicas) != 1 || ra.Replicas[0] != s.cfg.NodeID || ra.Partition < 0 || int(ra.Partition) >= len(rt.ReplicaAssignment) {
				return nil, errReplicaAssignment
			}
		}
		partitions = int32(len(rt.ReplicaAssignment))
	}
	if partitions == 0 || partitions < -1 {
		return nil, topics.ErrInvalidPartitions
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value != nil {
			configs[c.Name] = *c.Value
		}
	}
	if validateOnly {
		return nil, s.topics.ValidateCreate(rt.Topic, partitions, configs)
	}
	t, err := s.topics.Create(rt.Topic, partitions, configs)
	if err == nil {
		s.log.Info("transport: created topic", "topic", t.Name, "partitions", len(t.Partitions))
	}
	return t, err
}

// topicConfigs lists a topic's effective configs, sorted by name, as
// CreateTopics v5+ reports them: those the request set as topic configs, the
// others as broker defaults.
func topicConfigs(m map[string]string, set []kmsg.CreateTopicsRequestTopicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(m))
	for k, v := range m {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value = k, &v
		c.Source = int8(kmsg.ConfigSourceStaticBrokerConfig)
		for _, sc := range set {
			if sc.Name == k && sc.Value != nil {
				c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
