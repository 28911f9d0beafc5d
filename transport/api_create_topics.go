package transport

// CreateTopics: v0-v7.
//
// v1 added ValidateOnly and error messages; v4 lets NumPartitions and
// ReplicationFactor be -1 for the broker's defaults; v5 made it flexible and
// answers with the partition count, replication factor and configs created;
// v7 answers with the topic ID. What replication factors and assignments
// are possible is the node's to decide.
//
// ValidateOnly checks everything a creation would (name, partitions, replicas
// and configs) without creating anything. timeout_ms bounds the wait for the
// new topics' leaders: a topic created but not yet led when it ends gets
// REQUEST_TIMED_OUT (it stays created, as in Kafka); timeout_ms <= 0 answers
// as soon as the topics are written.

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleCreateTopics(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	// timeout_ms bounds the wait for every topic's leaders (Kafka's); <= 0
	// answers once the topics are written.
	tctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	defer cancel()
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		var (
			t   node.TopicInfo
			err error
		)
		if seen[rt.Topic] > 1 {
			err = errDuplicateTopic
		} else {
			t, err = s.node.CreateTopic(tctx, createRequest(rt, req.ValidateOnly, req.TimeoutMillis <= 0))
		}
		if err != nil {
			st.ErrorCode = s.code(err)
			st.ErrorMessage = errorMessage(err)
			if t.Name == "" {
				continue
			}
			// Created, not yet led: REQUEST_TIMED_OUT, with what exists.
		}
		st.NumPartitions, st.ReplicationFactor = int32(len(t.Partitions)), t.ReplicationFactor()
		if req.ValidateOnly {
			continue
		}
		st.TopicID = t.ID
		st.Configs = topicConfigs(t.Configs, rt.Configs)
	}
	return resp, nil
}

// createRequest turns one topic of a CreateTopics request into the node's
// terms.
func createRequest(rt kmsg.CreateTopicsRequestTopic, validateOnly, noWait bool) node.CreateTopic {
	ct := node.CreateTopic{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor,
		ValidateOnly: validateOnly, NoWait: noWait, Configs: make(map[string]string, len(rt.Configs))}
	for _, c := range rt.Configs {
		if c.Value != nil {
			ct.Configs[c.Name] = *c.Value
		}
	}
	for _, ra := range rt.ReplicaAssignment {
		ct.Assignment = append(ct.Assignment, node.ReplicaAssignment{Partition: ra.Partition, Replicas: ra.Replicas})
	}
	return ct
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

// withTimeoutMillis bounds ctx by a request's timeout_ms, as CreateTopics
// and CreatePartitions use it to wait for leaders; <= 0: no bound of its
// own (answer once written).
func withTimeoutMillis(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}
