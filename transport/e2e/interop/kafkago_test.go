package interop_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// TestKafkaGo: segmentio/kafka-go v0.4.51 (module proxy, in go.mod) runs
// every operation it has an API for, in this process.
func TestKafkaGo(t *testing.T) {
	runClient(t, client{
		name: "kafka-go",
		run: func(t *testing.T, addr, op, topic string) {
			// A Transport of the operation's own, as a new process would have:
			// kafka-go's shared DefaultTransport keeps its connections to a
			// broker that restarted, and fails the next request on one of them
			// (unexpected EOF) rather than reconnecting.
			tr := &kafka.Transport{}
			defer tr.CloseIdleConnections()
			k := &kafkaGo{t: t, addr: addr, topic: topic, group: topic + "-g", tr: tr,
				cl: &kafka.Client{Addr: kafka.TCP(addr), Timeout: 30 * time.Second, Transport: tr}}
			ops := map[string]func(){
				"smoke": k.smoke, "configs": k.configs, "incremental": k.incremental, "brokerconfigs": k.brokerConfigs,
				"partitions": k.partitions,
				"compaction": k.compaction, "internal": k.internal, "groups": k.groups, "offsetdelete": k.offsetDelete, "restart": k.restart,
			}
			ops[op]()
		},
	})
}

// kafkaGo runs one operation through kafka-go on topic (group topic-g).
type kafkaGo struct {
	t                  *testing.T
	addr, topic, group string
	tr                 *kafka.Transport
	cl                 *kafka.Client
}

func (k *kafkaGo) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	k.t.Cleanup(cancel)
	return ctx
}

func (k *kafkaGo) create(partitions int, configs map[string]string) {
	k.t.Helper()
	tc := kafka.TopicConfig{Topic: k.topic, NumPartitions: partitions, ReplicationFactor: 1}
	for name, value := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: name, ConfigValue: value})
	}
	resp, err := k.cl.CreateTopics(k.ctx(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = resp.Errors[k.topic]
	}
	if err != nil {
		k.t.Fatalf("kafka-go CreateTopics %s: %v", k.topic, err)
	}
}

// produce writes msgs with a Writer's defaults but a short batch timeout
// (the default waits a second for a batch to fill).
func (k *kafkaGo) produce(msgs ...kafka.Message) {
	k.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(k.addr), Transport: k.tr, Topic: k.topic, BatchTimeout: 10 * time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(k.ctx(), msgs...); err != nil {
		k.t.Fatalf("kafka-go Writer %s: %v", k.topic, err)
	}
}

func (k *kafkaGo) groupReader() *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.addr}, GroupID: k.group, Topic: k.topic,
		MaxWait: 200 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond})
}

// readGroup reads n messages as a member of the group (ReadMessage commits
// each).
func (k *kafkaGo) readGroup(r *kafka.Reader, n int) []kafka.Message {
	k.t.Helper()
	ctx := k.ctx()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			k.t.Fatalf("kafka-go Reader, group %s: %v after %d of %d messages", k.group, err, len(out), n)
		}
		out = append(out, m)
	}
	return out
}

// readPartition reads partition from its start up to offset end-1.
func (k *kafkaGo) readPartition(partition int, end int64) []kafka.Message {
	k.t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.addr}, Topic: k.topic, Partition: partition,
		MaxWait: 200 * time.Millisecond})
	defer r.Close()
	ctx := k.ctx()
	var out []kafka.Message
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			k.t.Fatalf("kafka-go Reader %s/%d: %v after %d messages", k.topic, partition, err, len(out))
		}
		out = append(out, m)
	}
	return out
}

func (k *kafkaGo) describe(name string) kafka.DescribeConfigResponseConfigEntry {
	k.t.Helper()
	resp, err := k.cl.DescribeConfigs(k.ctx(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: k.topic, ConfigNames: []string{name}}}})
	if err != nil {
		k.t.Fatalf("kafka-go DescribeConfigs %s: %v", k.topic, err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			k.t.Fatalf("kafka-go DescribeConfigs %s: %v", k.topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == name {
				return e
			}
		}
	}
	k.t.Fatalf("kafka-go DescribeConfigs %s: no %s in %+v", k.topic, name, resp.Resources)
	return kafka.DescribeConfigResponseConfigEntry{}
}

func (k *kafkaGo) smoke() {
	k.create(3, nil)
	var want []string
	var msgs []kafka.Message
	for i := range 20 {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%02d", i), Value: fmt.Appendf(nil, "v%02d", i)})
		want = append(want, fmt.Sprintf("k%02d=v%02d", i, i))
	}
	// The Writer with all its defaults (a second's batch timeout, acks from
	// the leader only, round-robin over the partitions).
	w := &kafka.Writer{Addr: kafka.TCP(k.addr), Transport: k.tr, Topic: k.topic}
	if err := w.WriteMessages(k.ctx(), msgs...); err != nil {
		k.t.Fatalf("kafka-go Writer %s: %v", k.topic, err)
	}
	if err := w.Close(); err != nil {
		k.t.Fatalf("kafka-go Writer %s: Close: %v", k.topic, err)
	}
	r := k.groupReader()
	defer r.Close()
	var got []string
	for _, m := range k.readGroup(r, 20) {
		got = append(got, fmt.Sprintf("%s=%s", m.Key, m.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		k.t.Errorf("kafka-go consumed %v, want %v", got, want)
	}
}

func (k *kafkaGo) configs() {
	k.create(1, nil)
	resp, err := k.cl.AlterConfigs(k.ctx(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: k.topic,
		Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "7200000"}}}}})
	if err == nil {
		err = errors.Join(slices.Collect(maps.Values(resp.Errors))...)
	}
	if err != nil {
		k.t.Fatalf("kafka-go AlterConfigs %s: %v", k.topic, err)
	}
	if e := k.describe("retention.ms"); e.ConfigValue != "7200000" {
		k.t.Errorf("kafka-go DescribeConfigs %s: retention.ms %+v, want 7200000", k.topic, e)
	}
}

func (k *kafkaGo) incremental() {
	k.create(1, nil)
	alter := func(configs ...kafka.IncrementalAlterConfigsRequestConfig) {
		k.t.Helper()
		resp, err := k.cl.IncrementalAlterConfigs(k.ctx(), &kafka.IncrementalAlterConfigsRequest{
			Resources: []kafka.IncrementalAlterConfigsRequestResource{{
				ResourceType: kafka.ResourceTypeTopic, ResourceName: k.topic, Configs: configs}}})
		if err == nil {
			for _, r := range resp.Resources {
				err = errors.Join(err, r.Error)
			}
		}
		if err != nil {
			k.t.Fatalf("kafka-go IncrementalAlterConfigs %s %+v: %v", k.topic, configs, err)
		}
	}
	alter(kafka.IncrementalAlterConfigsRequestConfig{Name: "retention.ms", Value: "7200000", ConfigOperation: kafka.ConfigOperationSet},
		kafka.IncrementalAlterConfigsRequestConfig{Name: "segment.ms", Value: "3600000", ConfigOperation: kafka.ConfigOperationSet})
	if e := k.describe("segment.ms"); e.ConfigValue != "3600000" {
		k.t.Fatalf("kafka-go DescribeConfigs %s after SET: segment.ms %+v, want 3600000", k.topic, e)
	}
	alter(kafka.IncrementalAlterConfigsRequestConfig{Name: "segment.ms", ConfigOperation: kafka.ConfigOperationDelete})
	if e := k.describe("retention.ms"); e.ConfigValue != "7200000" {
		k.t.Errorf("kafka-go DescribeConfigs %s: retention.ms %+v, want 7200000", k.topic, e)
	}
	if e := k.describe("segment.ms"); e.ConfigValue != "604800000" || e.ConfigSource == 1 { // 1: DYNAMIC_TOPIC_CONFIG
		k.t.Errorf("kafka-go DescribeConfigs %s after DELETE: segment.ms %+v, want Kafka's default 604800000", k.topic, e)
	}
	// cleanup.policy is a list: APPEND adds to its value (Kafka's default,
	// delete, when the topic has none), SUBTRACT takes away.
	alter(kafka.IncrementalAlterConfigsRequestConfig{Name: "cleanup.policy", Value: "compact", ConfigOperation: kafka.ConfigOperationAppend})
	if e := k.describe("cleanup.policy"); e.ConfigValue != "delete,compact" {
		k.t.Errorf("kafka-go DescribeConfigs %s after APPEND compact: cleanup.policy %+v, want delete,compact", k.topic, e)
	}
	alter(kafka.IncrementalAlterConfigsRequestConfig{Name: "cleanup.policy", Value: "delete", ConfigOperation: kafka.ConfigOperationSubtract})
	if e := k.describe("cleanup.policy"); e.ConfigValue != "compact" {
		k.t.Errorf("kafka-go DescribeConfigs %s after SUBTRACT delete: cleanup.policy %+v, want compact", k.topic, e)
	}
}

func (k *kafkaGo) brokerConfigs() {
	resp, err := k.cl.DescribeConfigs(k.ctx(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: "0"}}})
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].Error != nil {
		k.t.Fatalf("kafka-go DescribeConfigs broker 0: %+v, %v", resp, err)
	}
	entries := resp.Resources[0].ConfigEntries
	i := slices.IndexFunc(entries, func(e kafka.DescribeConfigResponseConfigEntry) bool { return e.ConfigName == "num.partitions" })
	if i < 0 || entries[i].ConfigValue == "" {
		k.t.Fatalf("kafka-go DescribeConfigs broker 0: no num.partitions in %+v", entries)
	}
	k.t.Logf("broker 0: %d configs, num.partitions=%s", len(entries), entries[i].ConfigValue)
}

func (k *kafkaGo) partitions() {
	k.create(1, nil)
	resp, err := k.cl.CreatePartitions(k.ctx(), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: k.topic, Count: 3}}})
	if err == nil {
		err = resp.Errors[k.topic]
	}
	if err != nil {
		k.t.Fatalf("kafka-go CreatePartitions %s: %v", k.topic, err)
	}
	// kafka-go's transport answers Metadata from its cache, refreshed every
	// MetadataTTL (6 s by default), and its Writer routes by the same cache:
	// poll until it shows the new partitions, as a user would wait.
	deadline := time.Now().Add(opTimeout / 2)
	for {
		md, err := k.cl.Metadata(k.ctx(), &kafka.MetadataRequest{Topics: []string{k.topic}})
		if err != nil {
			k.t.Fatalf("kafka-go Metadata %s after CreatePartitions: %v", k.topic, err)
		}
		if len(md.Topics) == 1 && len(md.Topics[0].Partitions) == 3 {
			break
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("kafka-go Metadata %s after CreatePartitions: %+v; want 3 partitions", k.topic, md.Topics)
		}
		time.Sleep(100 * time.Millisecond) // the poll's interval, bounded by the deadline
	}
	// Partition 2 chosen by the Writer's balancer, as a user would.
	w := &kafka.Writer{Addr: kafka.TCP(k.addr), Transport: k.tr, Topic: k.topic, BatchTimeout: 10 * time.Millisecond,
		Balancer: kafka.BalancerFunc(func(_ kafka.Message, partitions ...int) int {
			if len(partitions) != 3 {
				k.t.Errorf("kafka-go Writer: partitions %v, want 3", partitions)
			}
			return 2
		})}
	if err := w.WriteMessages(k.ctx(), kafka.Message{Key: []byte("p2"), Value: []byte("in partition 2")}); err != nil {
		k.t.Fatalf("kafka-go Writer %s partition 2: %v", k.topic, err)
	}
	w.Close()
	got := k.readPartition(2, 1)
	if len(got) != 1 || string(got[0].Key) != "p2" || string(got[0].Value) != "in partition 2" || got[0].Offset != 0 {
		k.t.Errorf("kafka-go read partition 2: %+v", got)
	}
}

func (k *kafkaGo) compaction() {
	k.create(1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01"})
	for r := range compactRounds {
		var msgs []kafka.Message
		for key := range compactKeys {
			msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "key%d", key), Value: fmt.Appendf(nil, "key%d-r%d", key, r)})
		}
		k.produce(msgs...)
	}
	deadline := time.Now().Add(opTimeout * 2 / 3)
	for pass := 1; ; pass++ {
		// A record of the filler key rolls the segment holding the last round
		// (segment.ms), so the cleaner may clean all of it.
		k.produce(kafka.Message{Key: []byte(compactFiller), Value: []byte("f")})
		resp, err := k.cl.ListOffsets(k.ctx(), &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{k.topic: {kafka.LastOffsetOf(0)}}})
		if err != nil || len(resp.Topics[k.topic]) != 1 || resp.Topics[k.topic][0].Error != nil {
			k.t.Fatalf("kafka-go ListOffsets %s: %+v, %v", k.topic, resp, err)
		}
		var recs []record
		for _, m := range k.readPartition(0, resp.Topics[k.topic][0].LastOffset) {
			recs = append(recs, record{m.Offset, string(m.Key), string(m.Value)})
		}
		err = compacted(recs)
		if err == nil {
			k.t.Logf("compacted: %d records (%d keys and the filler's) left of %d, after %d reads",
				len(recs), compactKeys, compactKeys*compactRounds+pass, pass)
			return
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("kafka-go read %s: %v, after %d reads", k.topic, err, pass)
		}
	}
}

func (k *kafkaGo) internal() {
	k.create(1, nil)
	k.produce(kafka.Message{Key: []byte("k"), Value: []byte("v")})
	r := k.groupReader()
	k.readGroup(r, 1) // a group's commit: Kafka creates __consumer_offsets for it
	r.Close()
	// kafka.Client's transport answers Metadata from its own routing cache,
	// which holds no internal topic (unknown topic, asked by name) and no
	// internal flag; a Conn sends the request as it is, but its answer has no
	// internal flag either (the Go test checks the flag).
	conn, err := kafka.Dial("tcp", k.addr)
	if err != nil {
		k.t.Fatalf("kafka-go Dial: %v", err)
	}
	parts, err := conn.ReadPartitions("__consumer_offsets")
	conn.Close()
	if err != nil || len(parts) == 0 {
		k.t.Fatalf("kafka-go Conn.ReadPartitions __consumer_offsets: %d partitions, %v", len(parts), err)
	}
	k.t.Logf("__consumer_offsets listed: %d partitions", len(parts))
	// kafka.Client routes no request to an internal topic (its transport
	// drops them from the metadata it routes by), so the produce goes over a
	// Conn to the partition's leader, as kafka-go's lower-level API does.
	conn, err = kafka.DialLeader(k.ctx(), "tcp", k.addr, "__consumer_offsets", 0)
	if err != nil {
		k.t.Fatalf("kafka-go DialLeader __consumer_offsets/0: %v", err)
	}
	defer conn.Close()
	n, err := conn.WriteMessages(kafka.Message{Key: []byte("k"), Value: []byte("written by a client")})
	if err == nil {
		k.t.Fatalf("kafka-go: a produce to __consumer_offsets succeeded (%d bytes)", n)
	}
	k.t.Logf("produce to __consumer_offsets refused: %v", err)
}

func (k *kafkaGo) groups() {
	k.create(1, nil)
	k.produce(kafka.Message{Value: []byte("v0")}, kafka.Message{Value: []byte("v1")}, kafka.Message{Value: []byte("v2")})
	r := k.groupReader()
	defer r.Close()
	k.readGroup(r, 3)
	// While the reader is a member.
	lg, err := k.cl.ListGroups(k.ctx(), &kafka.ListGroupsRequest{})
	if err == nil {
		err = lg.Error
	}
	if err != nil {
		k.t.Fatalf("kafka-go ListGroups: %v", err)
	}
	i := slices.IndexFunc(lg.Groups, func(g kafka.ListGroupsResponseGroup) bool { return g.GroupID == k.group })
	if i < 0 || lg.Groups[i].ProtocolType != "consumer" {
		k.t.Errorf("kafka-go ListGroups: %s at %d, want it with protocol type consumer, in %+v", k.group, i, lg.Groups)
	}
	dg, err := k.cl.DescribeGroups(k.ctx(), &kafka.DescribeGroupsRequest{GroupIDs: []string{k.group}})
	if err != nil || len(dg.Groups) != 1 {
		k.t.Fatalf("kafka-go DescribeGroups %s: %+v, %v", k.group, dg, err)
	}
	// DescribeGroupsResponseGroup has no protocol type (the Go test checks it).
	g := dg.Groups[0]
	k.t.Logf("DescribeGroups: %s %s, %d member(s)", g.GroupID, g.GroupState, len(g.Members))
	if g.Error != nil || g.GroupState != "Stable" || len(g.Members) != 1 || !slices.Equal(g.Members[0].MemberMetadata.Topics, []string{k.topic}) {
		k.t.Errorf("kafka-go DescribeGroups %s: %+v", k.group, g)
	}
}

func (k *kafkaGo) offsetDelete() {
	k.create(1, nil)
	k.produce(kafka.Message{Value: []byte("v0")}, kafka.Message{Value: []byte("v1")})
	r := k.groupReader()
	k.readGroup(r, 2)
	if err := r.Close(); err != nil { // leaves the group: Kafka deletes no offset of a topic the group consumes
		k.t.Fatalf("kafka-go Reader Close: %v", err)
	}
	fetch := func() int64 {
		k.t.Helper()
		resp, err := k.cl.OffsetFetch(k.ctx(), &kafka.OffsetFetchRequest{GroupID: k.group, Topics: map[string][]int{k.topic: {0}}})
		if err == nil {
			err = resp.Error
		}
		if err != nil || len(resp.Topics[k.topic]) != 1 {
			k.t.Fatalf("kafka-go OffsetFetch %s: %+v, %v", k.group, resp, err)
		}
		return resp.Topics[k.topic][0].CommittedOffset
	}
	if got := fetch(); got != 2 {
		k.t.Fatalf("kafka-go OffsetFetch %s: committed %d before OffsetDelete, want 2", k.group, got)
	}
	resp, err := k.cl.OffsetDelete(k.ctx(), &kafka.OffsetDeleteRequest{GroupID: k.group, Topics: map[string][]int{k.topic: {0}}})
	if err == nil {
		err = resp.Error
		for _, p := range resp.Topics[k.topic] {
			err = errors.Join(err, p.Error)
		}
	}
	if err != nil {
		k.t.Fatalf("kafka-go OffsetDelete %s: %v", k.group, err)
	}
	if got := fetch(); got != -1 {
		k.t.Errorf("kafka-go OffsetFetch %s: committed %d after OffsetDelete, want none (-1)", k.group, got)
	}
}

// restart: after the broker restarted, the groups operation's group (k.topic
// is its topic), now empty.
func (k *kafkaGo) restart() {
	lg, err := k.cl.ListGroups(k.ctx(), &kafka.ListGroupsRequest{})
	if err == nil {
		err = lg.Error
	}
	if err != nil {
		k.t.Fatalf("kafka-go ListGroups: %v", err)
	}
	if !slices.ContainsFunc(lg.Groups, func(g kafka.ListGroupsResponseGroup) bool {
		return g.GroupID == k.group && g.ProtocolType == "consumer"
	}) {
		k.t.Errorf("kafka-go ListGroups after the restart: no %s with protocol type consumer in %+v", k.group, lg.Groups)
	}
	dg, err := k.cl.DescribeGroups(k.ctx(), &kafka.DescribeGroupsRequest{GroupIDs: []string{k.group}})
	if err != nil || len(dg.Groups) != 1 || dg.Groups[0].Error != nil || dg.Groups[0].GroupState != "Empty" || len(dg.Groups[0].Members) != 0 {
		k.t.Errorf("kafka-go DescribeGroups %s after the restart: %+v, %v; want it empty", k.group, dg, err)
	}
	resp, err := k.cl.OffsetFetch(k.ctx(), &kafka.OffsetFetchRequest{GroupID: k.group, Topics: map[string][]int{k.topic: {0}}})
	if err == nil {
		err = resp.Error
	}
	if err != nil || len(resp.Topics[k.topic]) != 1 || resp.Topics[k.topic][0].CommittedOffset != 3 {
		k.t.Errorf("kafka-go OffsetFetch %s after the restart: %+v, %v; want %s/0 at 3", k.group, resp, err, k.topic)
	}
}
