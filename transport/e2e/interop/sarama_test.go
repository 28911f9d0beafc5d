package interop_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaAdmin: sarama's ClusterAdmin (IBM/sarama, in go.mod), the
// library of the sarama-based kaf CLI, which cannot be built here (doc.go),
// runs every operation with its default config (Kafka 2.8). Its smoke
// operation makes kaf's own two calls that issue 14 reports failing: `kaf
// topic create` (CreateTopic with cleanup.policy=delete) and `kaf topics`
// (ListTopics, which asks DescribeConfigs for every topic).
func TestSaramaAdmin(t *testing.T) {
	runClient(t, client{
		name: "sarama",
		run: func(t *testing.T, addr, op, topic string) {
			cfg := sarama.NewConfig()
			cfg.ClientID = "interop-sarama"
			cfg.Producer.Return.Successes = true // a SyncProducer's requirement
			cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
			cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
			admin, err := sarama.NewClusterAdmin([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("sarama NewClusterAdmin: %v", err)
			}
			defer admin.Close()
			s := &saramaOps{t: t, addr: addr, topic: topic, group: topic + "-g", cfg: cfg, admin: admin}
			map[string]func(){
				"smoke": s.smoke, "configs": s.configs, "incremental": s.incremental, "brokerconfigs": s.brokerConfigs,
				"partitions":    s.partitions,
				"deleterecords": s.deleteRecords, "compaction": s.compaction, "internal": s.internal, "groups": s.groups,
				"offsetdelete": s.offsetDelete, "logdirs": s.logDirs, "transactions": s.transactions, "restart": s.restart,
			}[op]()
		},
	})
}

// saramaOps runs one operation through sarama on topic (group topic-g).
type saramaOps struct {
	t                  *testing.T
	addr, topic, group string
	cfg                *sarama.Config
	admin              sarama.ClusterAdmin
}

func (s *saramaOps) create(partitions int32, configs map[string]string) {
	s.t.Helper()
	d := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: map[string]*string{}}
	for k, v := range configs {
		d.ConfigEntries[k] = &v
	}
	if err := s.admin.CreateTopic(s.topic, d, false); err != nil {
		s.t.Fatalf("sarama CreateTopic %s: %v", s.topic, err)
	}
}

// produce sends msgs with a SyncProducer and returns their offsets.
func (s *saramaOps) produce(topic string, msgs ...*sarama.ProducerMessage) error {
	p, err := sarama.NewSyncProducer([]string{s.addr}, s.cfg)
	if err != nil {
		s.t.Fatalf("sarama NewSyncProducer: %v", err)
	}
	defer p.Close()
	for _, m := range msgs {
		m.Topic = topic
	}
	return p.SendMessages(msgs)
}

func (s *saramaOps) mustProduce(msgs ...*sarama.ProducerMessage) {
	s.t.Helper()
	if err := s.produce(s.topic, msgs...); err != nil {
		s.t.Fatalf("sarama SyncProducer %s: %v", s.topic, err)
	}
}

func keyed(key, value string) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
}

// readPartition reads partition from its start up to offset end-1.
func (s *saramaOps) readPartition(partition int32, end int64) []*sarama.ConsumerMessage {
	s.t.Helper()
	c, err := sarama.NewConsumer([]string{s.addr}, s.cfg)
	if err != nil {
		s.t.Fatalf("sarama NewConsumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(s.topic, partition, sarama.OffsetOldest)
	if err != nil {
		s.t.Fatalf("sarama ConsumePartition %s/%d: %v", s.topic, partition, err)
	}
	defer pc.Close()
	timeout := time.After(opTimeout * 2 / 3)
	var out []*sarama.ConsumerMessage
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case err := <-pc.Errors():
			s.t.Fatalf("sarama consuming %s/%d: %v", s.topic, partition, err)
		case <-timeout:
			s.t.Fatalf("sarama consuming %s/%d: %d messages, none at offset %d", s.topic, partition, len(out), end-1)
		}
	}
	return out
}

// saramaGroup is a consumer group handler that passes on what it consumes
// and marks it (committed when the group closes).
type saramaGroup chan *sarama.ConsumerMessage

func (saramaGroup) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaGroup) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaGroup) ConsumeClaim(sess sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		sess.MarkMessage(m, "")
		select {
		case h <- m:
		case <-sess.Context().Done():
			return nil
		}
	}
	return nil
}

// consumeGroup consumes n messages as a member of the group, calls stay while
// still a member, then closes the group (committing what it marked).
func (s *saramaOps) consumeGroup(n int, stay func()) []*sarama.ConsumerMessage {
	s.t.Helper()
	g, err := sarama.NewConsumerGroup([]string{s.addr}, s.group, s.cfg)
	if err != nil {
		s.t.Fatalf("sarama NewConsumerGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := make(saramaGroup)
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{s.topic}, h); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	timeout := time.After(opTimeout * 2 / 3)
	var out []*sarama.ConsumerMessage
	for len(out) < n {
		select {
		case m := <-h:
			out = append(out, m)
		case err := <-done:
			s.t.Fatalf("sarama group %s: %v after %d of %d messages", s.group, err, len(out), n)
		case <-timeout:
			s.t.Fatalf("sarama group %s: %d of %d messages", s.group, len(out), n)
		}
	}
	if stay != nil {
		stay()
	}
	cancel()
	if err := errors.Join(<-done, g.Close()); err != nil {
		s.t.Fatalf("sarama group %s: %v", s.group, err)
	}
	return out
}

func (s *saramaOps) describe(name string) sarama.ConfigEntry {
	s.t.Helper()
	entries, err := s.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: s.topic, ConfigNames: []string{name}})
	if err != nil {
		s.t.Fatalf("sarama DescribeConfig %s: %v", s.topic, err)
	}
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	s.t.Fatalf("sarama DescribeConfig %s: no %s in %+v", s.topic, name, entries)
	return sarama.ConfigEntry{}
}

func (s *saramaOps) smoke() {
	// `kaf topic create` sends Kafka's default cleanup.policy explicitly.
	s.create(3, map[string]string{"cleanup.policy": "delete"})
	// `kaf topics`: ListTopics asks DescribeConfigs for every topic.
	topics, err := s.admin.ListTopics()
	if err != nil {
		s.t.Fatalf("sarama ListTopics: %v", err)
	}
	if d, ok := topics[s.topic]; !ok || d.NumPartitions != 3 || d.ConfigEntries["cleanup.policy"] == nil ||
		*d.ConfigEntries["cleanup.policy"] != "delete" {
		s.t.Errorf("sarama ListTopics: %s is %+v (listed %v), want 3 partitions, cleanup.policy=delete", s.topic, d, ok)
	}
	var msgs []*sarama.ProducerMessage
	var want, got []string
	for i := range 20 {
		msgs = append(msgs, keyed(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%02d", i)))
		want = append(want, fmt.Sprintf("k%02d=v%02d", i, i))
	}
	s.mustProduce(msgs...)
	for _, m := range s.consumeGroup(20, nil) {
		got = append(got, fmt.Sprintf("%s=%s", m.Key, m.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		s.t.Errorf("sarama consumed %v, want %v", got, want)
	}
}

func (s *saramaOps) configs() {
	s.create(1, nil)
	v := "7200000"
	if err := s.admin.AlterConfig(sarama.TopicResource, s.topic, map[string]*string{"retention.ms": &v}, false); err != nil {
		s.t.Fatalf("sarama AlterConfig %s: %v", s.topic, err)
	}
	if e := s.describe("retention.ms"); e.Value != "7200000" {
		s.t.Errorf("sarama DescribeConfig %s: retention.ms %+v, want 7200000", s.topic, e)
	}
}

func (s *saramaOps) incremental() {
	s.create(1, nil)
	retention, segment := "7200000", "3600000"
	alter := func(entries map[string]sarama.IncrementalAlterConfigsEntry) {
		s.t.Helper()
		if err := s.admin.IncrementalAlterConfig(sarama.TopicResource, s.topic, entries, false); err != nil {
			s.t.Fatalf("sarama IncrementalAlterConfig %s: %v", s.topic, err)
		}
	}
	alter(map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &retention},
		"segment.ms":   {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &segment},
	})
	if e := s.describe("segment.ms"); e.Value != segment {
		s.t.Fatalf("sarama DescribeConfig %s after SET: segment.ms %+v, want %s", s.topic, e, segment)
	}
	alter(map[string]sarama.IncrementalAlterConfigsEntry{"segment.ms": {Operation: sarama.IncrementalAlterConfigsOperationDelete}})
	if e := s.describe("retention.ms"); e.Value != retention {
		s.t.Errorf("sarama DescribeConfig %s: retention.ms %+v, want %s", s.topic, e, retention)
	}
	if e := s.describe("segment.ms"); e.Value != "604800000" || e.Source == sarama.SourceTopic {
		s.t.Errorf("sarama DescribeConfig %s after DELETE: segment.ms %+v, want Kafka's default 604800000", s.topic, e)
	}
	// cleanup.policy is a list: APPEND adds to its value (Kafka's default,
	// delete, when the topic has none), SUBTRACT takes away.
	compact, del := "compact", "delete"
	alter(map[string]sarama.IncrementalAlterConfigsEntry{"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationAppend, Value: &compact}})
	if e := s.describe("cleanup.policy"); e.Value != "delete,compact" {
		s.t.Errorf("sarama DescribeConfig %s after APPEND compact: cleanup.policy %+v, want delete,compact", s.topic, e)
	}
	alter(map[string]sarama.IncrementalAlterConfigsEntry{"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSubtract, Value: &del}})
	if e := s.describe("cleanup.policy"); e.Value != "compact" {
		s.t.Errorf("sarama DescribeConfig %s after SUBTRACT delete: cleanup.policy %+v, want compact", s.topic, e)
	}
}

func (s *saramaOps) brokerConfigs() {
	entries, err := s.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "0"})
	if err != nil {
		s.t.Fatalf("sarama DescribeConfig broker 0: %v", err)
	}
	i := slices.IndexFunc(entries, func(e sarama.ConfigEntry) bool { return e.Name == "num.partitions" })
	if i < 0 || entries[i].Value == "" {
		s.t.Fatalf("sarama DescribeConfig broker 0: no num.partitions in %+v", entries)
	}
	s.t.Logf("broker 0: %d configs, num.partitions=%s", len(entries), entries[i].Value)
}

func (s *saramaOps) partitions() {
	s.create(1, nil)
	if err := s.admin.CreatePartitions(s.topic, 3, nil, false); err != nil {
		s.t.Fatalf("sarama CreatePartitions %s: %v", s.topic, err)
	}
	msg := &sarama.ProducerMessage{Key: sarama.StringEncoder("p2"), Value: sarama.StringEncoder("in partition 2"), Partition: 2}
	cfg := *s.cfg
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{s.addr}, &cfg)
	if err != nil {
		s.t.Fatalf("sarama NewSyncProducer: %v", err)
	}
	msg.Topic = s.topic
	_, _, err = p.SendMessage(msg)
	p.Close()
	if err != nil {
		s.t.Fatalf("sarama SyncProducer %s partition 2: %v", s.topic, err)
	}
	got := s.readPartition(2, 1)
	if len(got) != 1 || string(got[0].Key) != "p2" || string(got[0].Value) != "in partition 2" || got[0].Offset != 0 {
		s.t.Errorf("sarama read partition 2: %+v", got)
	}
}

func (s *saramaOps) deleteRecords() {
	s.create(1, nil)
	var msgs []*sarama.ProducerMessage
	for i := range 10 {
		msgs = append(msgs, keyed(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
	}
	s.mustProduce(msgs...)
	if err := s.admin.DeleteRecords(s.topic, map[int32]int64{0: 5}); err != nil {
		s.t.Fatalf("sarama DeleteRecords %s below 5: %v", s.topic, err)
	}
	res, err := s.admin.ListOffsets(map[string]map[int32]int64{s.topic: {0: sarama.OffsetOldest}}, nil)
	if err != nil || res[s.topic][0] == nil {
		s.t.Fatalf("sarama ListOffsets %s earliest: %+v, %v", s.topic, res, err)
	}
	if got := res[s.topic][0]; got.Err != sarama.ErrNoError || got.Offset != 5 {
		s.t.Errorf("sarama ListOffsets %s earliest after DeleteRecords below 5: %+v", s.topic, got)
	}
	got := s.readPartition(0, 10)
	if len(got) != 5 || got[0].Offset != 5 || string(got[0].Value) != "v5" {
		s.t.Errorf("sarama read %s from the beginning: %d messages, first at %d", s.topic, len(got), got[0].Offset)
	}
}

func (s *saramaOps) compaction() {
	s.create(1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01"})
	for r := range compactRounds {
		var msgs []*sarama.ProducerMessage
		for k := range compactKeys {
			msgs = append(msgs, keyed(fmt.Sprintf("key%d", k), fmt.Sprintf("key%d-r%d", k, r)))
		}
		s.mustProduce(msgs...)
	}
	deadline := time.Now().Add(opTimeout * 2 / 3)
	for pass := 1; ; pass++ {
		// A record of the filler key rolls the segment holding the last round
		// (segment.ms), so the cleaner may clean all of it.
		filler := keyed(compactFiller, "f")
		s.mustProduce(filler)
		var recs []record
		for _, m := range s.readPartition(0, filler.Offset+1) {
			recs = append(recs, record{m.Offset, string(m.Key), string(m.Value)})
		}
		err := compacted(recs)
		if err == nil {
			s.t.Logf("compacted: %d records (%d keys and the filler's) left of %d, after %d reads",
				len(recs), compactKeys, compactKeys*compactRounds+pass, pass)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sarama read %s: %v, after %d reads", s.topic, err, pass)
		}
	}
}

func (s *saramaOps) internal() {
	s.create(1, nil)
	s.mustProduce(keyed("k", "v"))
	s.consumeGroup(1, nil) // a group's commit: Kafka creates __consumer_offsets for it
	md, err := s.admin.DescribeTopics([]string{"__consumer_offsets"})
	if err != nil || len(md) != 1 || md[0].Err != sarama.ErrNoError || !md[0].IsInternal {
		s.t.Fatalf("sarama DescribeTopics __consumer_offsets: %+v, %v; want it, internal", md, err)
	}
	err = s.produce("__consumer_offsets", keyed("k", "written by a client"))
	if err == nil {
		s.t.Fatal("sarama: a produce to __consumer_offsets succeeded")
	}
	if pe, ok := errors.AsType[sarama.ProducerErrors](err); ok && len(pe) > 0 {
		err = pe[0].Err
	}
	s.t.Logf("produce to __consumer_offsets refused: %v", err)
}

func (s *saramaOps) groups() {
	s.create(1, nil)
	s.mustProduce(keyed("k0", "v0"), keyed("k1", "v1"), keyed("k2", "v2"))
	s.consumeGroup(3, func() {
		listed, err := s.admin.ListConsumerGroups()
		if err != nil {
			s.t.Fatalf("sarama ListConsumerGroups: %v", err)
		}
		if listed[s.group] != "consumer" {
			s.t.Errorf("sarama ListConsumerGroups: %s has protocol type %q, want consumer (%v)", s.group, listed[s.group], listed)
		}
		gs, err := s.admin.DescribeConsumerGroups([]string{s.group})
		if err != nil || len(gs) != 1 {
			s.t.Fatalf("sarama DescribeConsumerGroups %s: %+v, %v", s.group, gs, err)
		}
		g := gs[0]
		s.t.Logf("DescribeConsumerGroups: %s %s %s %s, %d member(s)", g.GroupId, g.State, g.ProtocolType, g.Protocol, len(g.Members))
		if g.Err != sarama.ErrNoError || g.ProtocolType != "consumer" || g.State != "Stable" || g.Protocol == "" || len(g.Members) != 1 {
			s.t.Errorf("sarama DescribeConsumerGroups %s: %+v", s.group, g)
		}
	})
}

func (s *saramaOps) offsetDelete() {
	s.create(1, nil)
	s.mustProduce(keyed("k0", "v0"), keyed("k1", "v1"))
	s.consumeGroup(2, nil) // then leaves: Kafka deletes no offset of a topic the group consumes
	fetch := func() int64 {
		s.t.Helper()
		resp, err := s.admin.ListConsumerGroupOffsets(s.group, map[string][]int32{s.topic: {0}})
		if err != nil || resp.GetBlock(s.topic, 0) == nil {
			s.t.Fatalf("sarama ListConsumerGroupOffsets %s: %+v, %v", s.group, resp, err)
		}
		return resp.GetBlock(s.topic, 0).Offset
	}
	if got := fetch(); got != 2 {
		s.t.Fatalf("sarama ListConsumerGroupOffsets %s: committed %d before DeleteConsumerGroupOffset, want 2", s.group, got)
	}
	if err := s.admin.DeleteConsumerGroupOffset(s.group, s.topic, 0); err != nil {
		s.t.Fatalf("sarama DeleteConsumerGroupOffset %s %s/0: %v", s.group, s.topic, err)
	}
	if got := fetch(); got != -1 {
		s.t.Errorf("sarama ListConsumerGroupOffsets %s: committed %d after DeleteConsumerGroupOffset, want none (-1)", s.group, got)
	}
}

func (s *saramaOps) logDirs() {
	s.create(1, nil)
	var msgs []*sarama.ProducerMessage
	for i := range 10 {
		msgs = append(msgs, keyed(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
	}
	s.mustProduce(msgs...)
	brokers, _, err := s.admin.DescribeCluster()
	if err != nil || len(brokers) == 0 {
		s.t.Fatalf("sarama DescribeCluster: %v, %v", brokers, err)
	}
	var ids []int32
	for _, b := range brokers {
		ids = append(ids, b.ID())
	}
	dirs, err := s.admin.DescribeLogDirs(ids)
	if err != nil {
		s.t.Fatalf("sarama DescribeLogDirs %v: %v", ids, err)
	}
	for id, ds := range dirs {
		for _, d := range ds {
			for _, dt := range d.Topics {
				for _, p := range dt.Partitions {
					if dt.Topic == s.topic && p.PartitionID == 0 {
						s.t.Logf("broker %d, %s: %s/0 holds %d bytes", id, d.Path, s.topic, p.Size)
						if d.ErrorCode != sarama.ErrNoError || p.Size <= 0 {
							s.t.Errorf("sarama DescribeLogDirs: %s/0 in %s (error %v) has size %d, want > 0", s.topic, d.Path, d.ErrorCode, p.Size)
						}
						return
					}
				}
			}
		}
	}
	s.t.Errorf("sarama DescribeLogDirs %v: no %s/0 in %+v", ids, s.topic, dirs)
}

// transactions: three transactions of five records each through sarama's
// transactional producer (committed, aborted, committed); a read_committed
// consumer sees the ten committed records, a read_uncommitted one all
// fifteen.
func (s *saramaOps) transactions() {
	s.create(1, nil)
	cfg := *s.cfg
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = s.topic + "-tx"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{s.addr}, &cfg)
	if err != nil {
		s.t.Fatalf("sarama transactional NewSyncProducer: %v", err)
	}
	defer p.Close()
	values := func(name string) []string {
		var out []string
		for i := range 5 {
			out = append(out, fmt.Sprintf("%s-%d", name, i))
		}
		return out
	}
	for _, txn := range []struct {
		name   string
		commit bool
	}{{"c0", true}, {"a", false}, {"c1", true}} {
		if err := p.BeginTxn(); err != nil {
			s.t.Fatalf("sarama BeginTxn %s: %v", txn.name, err)
		}
		var msgs []*sarama.ProducerMessage
		for _, v := range values(txn.name) {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: s.topic, Partition: 0, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)})
		}
		if err := p.SendMessages(msgs); err != nil {
			s.t.Fatalf("sarama transaction %s: SendMessages: %v", txn.name, err)
		}
		end := p.CommitTxn
		if !txn.commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			s.t.Fatalf("sarama transaction %s: ending it (commit %v): %v", txn.name, txn.commit, err)
		}
	}
	// Offsets: c0 0-4, marker 5, a 6-10, marker 11, c1 12-16, marker 17.
	read := func(level sarama.IsolationLevel) []string {
		rcfg := *s.cfg
		rcfg.Consumer.IsolationLevel = level
		saved := s.cfg
		s.cfg = &rcfg
		defer func() { s.cfg = saved }()
		var out []string
		for _, m := range s.readPartition(0, 17) {
			out = append(out, string(m.Value))
		}
		return out
	}
	if got, want := read(sarama.ReadCommitted), append(values("c0"), values("c1")...); !slices.Equal(got, want) {
		s.t.Errorf("sarama read_committed read %v, want %v", got, want)
	}
	if got, want := read(sarama.ReadUncommitted), slices.Concat(values("c0"), values("a"), values("c1")); !slices.Equal(got, want) {
		s.t.Errorf("sarama read_uncommitted read %v, want %v", got, want)
	}
}

// restart: after the broker restarted, the groups operation's group (s.topic
// is its topic), now empty.
func (s *saramaOps) restart() {
	listed, err := s.admin.ListConsumerGroups()
	if err != nil {
		s.t.Fatalf("sarama ListConsumerGroups: %v", err)
	}
	if listed[s.group] != "consumer" {
		s.t.Errorf("sarama ListConsumerGroups after the restart: %s has protocol type %q, want consumer (%v)", s.group, listed[s.group], listed)
	}
	gs, err := s.admin.DescribeConsumerGroups([]string{s.group})
	if err != nil || len(gs) != 1 {
		s.t.Fatalf("sarama DescribeConsumerGroups %s: %+v, %v", s.group, gs, err)
	}
	if g := gs[0]; g.Err != sarama.ErrNoError || g.ProtocolType != "consumer" || g.State != "Empty" || len(g.Members) != 0 {
		s.t.Errorf("sarama DescribeConsumerGroups %s after the restart: %+v, want an empty consumer group", s.group, g)
	}
	resp, err := s.admin.ListConsumerGroupOffsets(s.group, map[string][]int32{s.topic: {0}})
	if err != nil || resp.GetBlock(s.topic, 0) == nil || resp.GetBlock(s.topic, 0).Offset != 3 {
		s.t.Errorf("sarama ListConsumerGroupOffsets %s after the restart: %+v, %v; want %s/0 at 3", s.group, resp, err, s.topic)
	}
}
