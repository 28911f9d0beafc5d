package transport

import (
	"testing"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/node"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

func listOffsetsReq(version int16, topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.MaxNumOffsets = partition, ts, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestListOffsets(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	// Three batches of 2 records, at times 1000-1001, 2000-2001, 3000-3001.
	for i := range 3 {
		ts := int64(1000 * (i + 1))
		bb, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("a"), Timestamp: ts}, {Value: []byte("b"), Timestamp: ts + 1}})
		if err != nil {
			t.Fatal(err)
		}
		rc.do(produceReq(7, 1, "t", 0, bb))
	}
	cases := []struct {
		ts, offset, timestamp int64
	}{
		{-2, 0, -1},
		{-1, 6, -1},
		{0, 0, 1000},
		{1000, 0, 1000},
		{1500, 2, 2000},
		{2001, 2, 2001},
		{3000, 4, 3000},
		{3002, -1, -1},
	}
	for v := int16(1); v <= apiByKey[2].max; v++ {
		for _, c := range cases {
			resp := rc.do(listOffsetsReq(v, "t", 0, c.ts)).(*kmsg.ListOffsetsResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != c.offset || p.Timestamp != c.timestamp {
				t.Errorf("v%d ts %d: error %d, offset %d, timestamp %d; want offset %d, timestamp %d",
					v, c.ts, p.ErrorCode, p.Offset, p.Timestamp, c.offset, c.timestamp)
			}
		}
	}
	resp := rc.do(listOffsetsReq(0, "t", 0, -1)).(*kmsg.ListOffsetsResponse)
	if p := resp.Topics[0].Partitions[0]; len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 6 {
		t.Fatalf("v0 latest: %+v", p)
	}
	resp = rc.do(listOffsetsReq(4, "t", 9, -1)).(*kmsg.ListOffsetsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.Offset != -1 {
		t.Fatalf("unknown partition: %+v", p)
	}
}

func TestMetadata(t *testing.T) {
	b := startBroker(t, func(_ *Config, n *node.Config) {
		n.NodeID, n.Advertised = 7, "broker.example:19092"
	})
	tp := b.createTopic(t, "b-topic", 3, nil)
	b.createTopic(t, "a-topic", 1, nil)
	rc := b.dial(t)

	for _, v := range []int16{0, 1, 4, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := rc.do(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 || resp.Brokers[0].Host != "broker.example" || resp.Brokers[0].Port != 19092 {
			t.Fatalf("v%d brokers: %+v", v, resp.Brokers)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != b.node.ClusterID() || *resp.ClusterID == "") {
			t.Fatalf("v%d cluster ID %v", v, resp.ClusterID)
		}
		if v >= 1 && resp.ControllerID != 7 {
			t.Fatalf("v%d controller %d", v, resp.ControllerID)
		}
		if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "a-topic" || *resp.Topics[1].Topic != "b-topic" {
			t.Fatalf("v%d topics: %+v", v, resp.Topics)
		}
		bt := resp.Topics[1]
		if len(bt.Partitions) != 3 || (v >= 10 && bt.TopicID != tp.ID) {
			t.Fatalf("v%d b-topic: %+v", v, bt)
		}
		for i, p := range bt.Partitions {
			if p.Partition != int32(i) || p.Leader != 7 || len(p.Replicas) != 1 || p.Replicas[0] != 7 || len(p.ISR) != 1 {
				t.Fatalf("v%d partition %d: %+v", v, i, p)
			}
		}
	}
	// v1+: an empty list asks for no topics.
	resp := rc.do(&kmsg.MetadataRequest{Version: 4, Topics: []kmsg.MetadataRequestTopic{}}).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 0 {
		t.Fatalf("empty list: %d topics", len(resp.Topics))
	}
	// By ID (v10+), known and unknown.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: tp.ID}, {TopicID: [16]byte{1}}}
	resp = rc.do(req).(*kmsg.MetadataResponse)
	if *resp.Topics[0].Topic != "b-topic" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by ID: %+v", resp.Topics)
	}
}

func TestCreateAndDeleteTopics(t *testing.T) {
	b := startBroker(t)
	rc := b.dial(t)
	create := func(v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly, req.Topics = v, 1000, validateOnly, topics
		return rc.do(req).(*kmsg.CreateTopicsResponse)
	}
	topic := func(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		for i := 0; i+1 < len(configs); i += 2 {
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: configs[i], Value: kmsg.StringPtr(configs[i+1])})
		}
		return rt
	}
	resp := create(7, false,
		topic("ok", 4, 1, "retention.ms", "60000"),
		topic("defaults", -1, -1),
		topic("rf3", 1, 3),
		topic("bad config", 1, 1),
		topic("badconf", 1, 1, "no.such.key", "1"),
		topic("zero", 0, 1),
		topic("dup", 1, 1), topic("dup", 1, 1),
	)
	want := []int16{0, 0, kerr.InvalidReplicationFactor.Code, kerr.InvalidTopicException.Code, kerr.InvalidConfig.Code,
		kerr.InvalidPartitions.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, st := range resp.Topics {
		if st.ErrorCode != want[i] {
			t.Errorf("%s: error %d, want %d (%v)", st.Topic, st.ErrorCode, want[i], st.ErrorMessage)
		}
		if st.ErrorCode != 0 && st.ErrorMessage == nil {
			t.Errorf("%s: no error message", st.Topic)
		}
	}
	if st := resp.Topics[0]; st.NumPartitions != 4 || st.ReplicationFactor != 1 || st.TopicID == [16]byte{} {
		t.Fatalf("created: %+v", st)
	}
	var retention *kmsg.CreateTopicsResponseTopicConfig
	for i, c := range resp.Topics[0].Configs {
		if c.Name == "retention.ms" {
			retention = &resp.Topics[0].Configs[i]
		}
	}
	if retention == nil || *retention.Value != "60000" || retention.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Fatalf("retention.ms config: %+v", retention)
	}
	if st := resp.Topics[1]; st.NumPartitions != 1 {
		t.Fatalf("defaults: %d partitions", st.NumPartitions)
	}
	if tp, err := b.node.Topic("ok"); err != nil || len(tp.Partitions) != 4 {
		t.Fatal("topic ok not in the registry")
	}
	// Again: exists. Validate only: nothing created.
	if resp := create(4, false, topic("ok", 1, 1)); resp.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("again: error %d", resp.Topics[0].ErrorCode)
	}
	if resp := create(4, true, topic("validated", 2, 1)); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("validate only: error %d", resp.Topics[0].ErrorCode)
	}
	if _, err := b.node.Topic("validated"); err == nil {
		t.Fatal("validate only created the topic")
	}
	if resp := create(4, true, topic("validated", 2, 1, "retention.ms", "soon")); resp.Topics[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("validate only with a bad config: error %d", resp.Topics[0].ErrorCode)
	}
	// Replica assignment to this node only.
	ra := topic("assigned", -1, -1)
	ra.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{0}}, {Partition: 1, Replicas: []int32{0}}}
	bad := topic("assigned-elsewhere", -1, -1)
	bad.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{5}}}
	resp = create(4, false, ra, bad)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("assignments: %d, %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}

	// Delete by name (v5) and by ID (v6).
	tp, _ := b.node.Topic("defaults")
	del := rc.do(&kmsg.DeleteTopicsRequest{Version: 5, TopicNames: []string{"ok", "never"}}).(*kmsg.DeleteTopicsResponse)
	if del.Topics[0].ErrorCode != 0 || del.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete by name: %+v", del.Topics)
	}
	del = rc.do(&kmsg.DeleteTopicsRequest{Version: 6, Topics: []kmsg.DeleteTopicsRequestTopic{{TopicID: tp.ID}, {TopicID: [16]byte{9}}}}).(*kmsg.DeleteTopicsResponse)
	if del.Topics[0].ErrorCode != 0 || *del.Topics[0].Topic != "defaults" || del.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by ID: %+v", del.Topics)
	}
	for _, name := range []string{"ok", "defaults"} {
		if _, err := b.node.Topic(name); err == nil {
			t.Fatalf("%s not deleted", name)
		}
	}
}

// Deleting a topic drops its committed offsets, so a topic created again under
// the same name starts without them (as in Kafka).
func TestDeleteTopicDropsCommittedOffsets(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "gone", 1, nil)
	tp := groups.TopicPartition{Topic: "gone", Partition: 0}
	if _, err := b.coord(t).Commit("g", "", nil, -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: 42, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.coord(t).Fetch("g", []groups.TopicPartition{tp}); err != nil || got[tp].Offset != 42 {
		t.Fatalf("committed before delete: %+v, %v", got, err)
	}
	rc := b.dial(t)
	del := rc.do(&kmsg.DeleteTopicsRequest{Version: 5, TopicNames: []string{"gone"}}).(*kmsg.DeleteTopicsResponse)
	if del.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", del.Topics)
	}
	b.createTopic(t, "gone", 1, nil)
	if got, err := b.coord(t).Fetch("g", []groups.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	} else if c, ok := got[tp]; ok && c.Offset >= 0 {
		t.Fatalf("re-created topic inherited committed offset %d", c.Offset)
	}
}
