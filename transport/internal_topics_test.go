package transport

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/node"
)

// TestReservedTopicNames: the names of Kafka's internal topics (and weir's
// __weir prefix) are the broker's. A client cannot create one
// (INVALID_TOPIC_EXCEPTION, with a message saying it is reserved); Metadata
// with auto-creation on never creates one as an ordinary topic (a lag
// tool's lookup of __consumer_offsets gets the real, compacted internal
// topic, and of __transaction_state the transaction log); Produce to one is
// refused; the
// internal ones are listed internal and cannot be deleted. Another "__"
// name is an ordinary topic, as in Kafka.
func TestReservedTopicNames(t *testing.T) {
	b := startBroker(t, withAutoCreate)
	ctx := testCtx(t)
	cl := kgoClient(t, b)

	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10_000
	for _, name := range []string{node.OffsetsTopic, node.TransactionStateTopic, "__cluster_metadata", "__weir_state", "__CruiseControlMetrics"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		create.Topics = append(create.Topics, rt)
	}
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range cresp.Topics {
		if st.Topic == "__CruiseControlMetrics" {
			if st.ErrorCode != 0 {
				t.Errorf("create %s: error %d, want an ordinary topic", st.Topic, st.ErrorCode)
			}
			continue
		}
		if st.ErrorCode != kerr.InvalidTopicException.Code || st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, "reserved") {
			t.Errorf("create %s: error %d %q, want INVALID_TOPIC_EXCEPTION saying it is reserved", st.Topic, st.ErrorCode, deref(st.ErrorMessage))
		}
		if _, err := b.node.Topic(st.Topic); err == nil {
			t.Errorf("create %s made the topic", st.Topic)
		}
	}

	// Metadata v1 (sarama's, Burrow's: auto-creation implied) and v9
	// asking for auto-creation.
	for _, v := range []int16{1, 9} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		md.AllowAutoTopicCreation = true
		for _, name := range []string{node.OffsetsTopic, node.TransactionStateTopic, "__weir_x"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			md.Topics = append(md.Topics, rt)
		}
		resp, err := md.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range resp.Topics {
			switch *mt.Topic {
			case node.OffsetsTopic, node.TransactionStateTopic:
				if mt.ErrorCode != 0 || !mt.IsInternal || len(mt.Partitions) != node.DefaultOffsetsPartitions {
					t.Errorf("v%d: %s: error %d, internal %v, %d partitions", v, *mt.Topic, mt.ErrorCode, mt.IsInternal, len(mt.Partitions))
				}
			default:
				if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("v%d: %s: error %d, want UNKNOWN_TOPIC_OR_PARTITION (never auto-created)", v, *mt.Topic, mt.ErrorCode)
				}
			}
		}
	}
	ti, err := b.node.Topic(node.OffsetsTopic)
	if err != nil || !ti.Internal || ti.Configs[topicconfig.CleanupPolicy] != topicconfig.CleanupCompact {
		t.Fatalf("%s after a Metadata lookup: %+v, %v; want the compacted internal topic", node.OffsetsTopic, ti.Configs, err)
	}
	if ti, err := b.node.Topic(node.TransactionStateTopic); err != nil || !ti.Internal ||
		ti.Configs[topicconfig.CleanupPolicy] != topicconfig.CleanupCompact {
		t.Fatalf("%s after a Metadata lookup: %+v, %v; want the compacted internal topic", node.TransactionStateTopic, ti.Configs, err)
	}
	if _, err := b.node.Topic("__weir_x"); err == nil {
		t.Errorf("__weir_x was auto-created")
	}

	// Listed internal among all topics.
	all, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range all.Topics {
		if want := *mt.Topic == node.OffsetsTopic || *mt.Topic == node.TransactionStateTopic; mt.IsInternal != want {
			t.Errorf("all topics: %s internal %v, want %v", *mt.Topic, mt.IsInternal, want)
		}
	}

	// Not writable, not even by auto-creation.
	for _, name := range []string{node.OffsetsTopic, node.TransactionStateTopic, "__weir_y"} {
		pcl := kgoClient(t, b, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2))
		err := pcl.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("forged")}).FirstErr()
		if name != "__weir_y" && err != kerr.InvalidTopicException {
			t.Errorf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
		if err == nil {
			t.Errorf("produce to %s succeeded", name)
		}
		rc := b.dial(t)
		resp := rc.do(produceReq(7, 1, name, 0, batch(t, "x", 1))).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
			t.Errorf("raw produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", name, code)
		}
	}
	if _, err := b.node.Topic("__weir_y"); err == nil {
		t.Error("produce auto-created __weir_y")
	}

	// Not deletable.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 10_000
	del.TopicNames = []string{node.OffsetsTopic}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(node.OffsetsTopic)
	del.Topics = append(del.Topics, dt)
	dresp, err := del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Topics) != 1 || dresp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("delete %s: %+v, want INVALID_TOPIC_EXCEPTION", node.OffsetsTopic, dresp.Topics)
	}
	if _, err := b.node.Topic(node.OffsetsTopic); err != nil {
		t.Errorf("%s after DeleteTopics: %v", node.OffsetsTopic, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
