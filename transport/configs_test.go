package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
)

func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// topicConfig returns one config of a described topic, failing the test if
// the topic failed or has no such config.
func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s: no config %s", topic, key)
	return kadm.Config{}
}

func wantConfig(t *testing.T, adm *kadm.Client, topic, key, value string, src kmsg.ConfigSource) {
	t.Helper()
	c := topicConfig(t, adm, topic, key)
	if c.MaybeValue() != value || c.Source != src {
		t.Errorf("%s %s = %q from %v, want %q from %v", topic, key, c.MaybeValue(), c.Source, value, src)
	}
}

// wantAltered checks that every resource of an alter answered as wanted
// (nil: success), and that a failure's message names what is in text.
func wantAltered(t *testing.T, rs kadm.AlterConfigsResponses, err error, want map[string]error, text string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(want) {
		t.Fatalf("%d answers, want %d", len(rs), len(want))
	}
	for _, r := range rs {
		if w, ok := want[r.Name]; !ok || r.Err != w {
			t.Errorf("%s: %v (%s), want %v", r.Name, r.Err, r.ErrMessage, w)
		}
		if r.Err != nil && !strings.Contains(r.ErrMessage, text) {
			t.Errorf("%s: message %q does not say %q", r.Name, r.ErrMessage, text)
		}
	}
}

func set(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v}
}

// TestConfigsKadm: franz-go's admin client describes and alters topic and
// broker configs (incremental, legacy, validate-only), and one bad resource
// does not fail the others.
func TestConfigsKadm(t *testing.T) {
	b := startBroker(t, withMemCoord)
	b.createTopic(t, "c", 1, map[string]string{"retention.ms": "1000"})
	b.createTopic(t, "d", 1, nil)
	adm := newAdmin(t, b.addr)
	ctx := context.Background()

	rcs, err := adm.DescribeTopicConfigs(ctx, "c", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("nope", nil); rc.Err != kerr.UnknownTopicOrPartition {
		t.Errorf("unknown topic: %v", rc.Err)
	}
	if rc, _ := rcs.On("c", nil); rc.Err != nil || len(rc.Configs) != len(topicconfig.Keys()) {
		t.Fatalf("c: %v, %d configs, want %d", rc.Err, len(rc.Configs), len(topicconfig.Keys()))
	}
	wantConfig(t, adm, "c", "retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, adm, "c", "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, adm, "c", "preallocate", "false", kmsg.ConfigSourceDefaultConfig)
	if c := topicConfig(t, adm, "c", "retention.ms"); len(c.Synonyms) != 2 || c.Synonyms[1].Key != "log.retention.ms" ||
		c.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms synonyms: %+v", c.Synonyms)
	}

	// Incremental: SET, APPEND to a list, DELETE back to the default.
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("segment.ms", "60000"),
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "c", "nope")
	wantAltered(t, rs, err, map[string]error{"c": nil, "nope": kerr.UnknownTopicOrPartition}, "nope")
	wantConfig(t, adm, "c", "segment.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, adm, "c", "cleanup.policy", "delete,compact", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, adm, "c", "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}, "c")
	wantAltered(t, rs, err, map[string]error{"c": nil}, "")
	wantConfig(t, adm, "c", "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)

	// Bad values name the key and value; nothing changes.
	for _, tc := range []struct {
		acs  []kadm.AlterConfig
		text string
	}{
		{[]kadm.AlterConfig{set("retention.ms", "-5")}, `retention.ms="-5"`},
		{[]kadm.AlterConfig{set("no.such.key", "1")}, "no.such.key"},
		{[]kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "retention.ms"},
		{[]kadm.AlterConfig{set("max.compaction.lag.ms", "0")}, `max.compaction.lag.ms="0"`},
		{[]kadm.AlterConfig{set("min.compaction.lag.ms", "10"), set("max.compaction.lag.ms", "5")}, "min.compaction.lag.ms"},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, tc.acs, "c", "d")
		wantAltered(t, rs, err, map[string]error{"c": kerr.InvalidConfig, "d": kerr.InvalidConfig}, tc.text)
	}
	wantConfig(t, adm, "c", "segment.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)

	// Validate only: answered, not applied.
	rs, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{set("segment.ms", "1234")}, "c")
	wantAltered(t, rs, err, map[string]error{"c": nil}, "")
	wantConfig(t, adm, "c", "segment.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)

	// Legacy AlterConfigs replaces the whole set.
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{set("max.message.bytes", "2000")}, "c")
	wantAltered(t, rs, err, map[string]error{"c": nil}, "")
	wantConfig(t, adm, "c", "max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, adm, "c", "segment.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, adm, "c", "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// Broker defaults: every broker's, then this one's; topics follow
	// unless they set the key.
	brs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(brs) != 1 || brs[0].Err != nil || len(brs[0].Configs) != 0 {
		t.Fatalf("cluster default before: %+v, %v", brs, err)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "123456")})
	wantAltered(t, rs, err, map[string]error{"": nil}, "")
	wantConfig(t, adm, "d", "retention.ms", "123456", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "222")}, 0)
	wantAltered(t, rs, err, map[string]error{"0": nil}, "")
	wantConfig(t, adm, "d", "retention.ms", "222", kmsg.ConfigSourceDynamicBrokerConfig)
	brs, err = adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(brs) != 1 || brs[0].Err != nil {
		t.Fatalf("broker 0: %+v, %v", brs, err)
	}
	i := slices.IndexFunc(brs[0].Configs, func(c kadm.Config) bool { return c.Key == "log.retention.ms" })
	if i < 0 || brs[0].Configs[i].MaybeValue() != "222" || len(brs[0].Configs[i].Synonyms) != 3 {
		t.Errorf("broker 0 log.retention.ms: %+v", brs[0].Configs)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("listeners", "PLAINTEXT://:1")})
	wantAltered(t, rs, err, map[string]error{"": kerr.InvalidConfig}, "listeners")
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, 0)
	wantAltered(t, rs, err, map[string]error{"0": nil}, "")
	wantConfig(t, adm, "d", "retention.ms", "123456", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
}

// TestDescribeConfigsVersions: every version served answers with what it
// carries (v0 is_default, v1+ sources and synonyms, v3+ types and docs).
func TestDescribeConfigsVersions(t *testing.T) {
	b := startBroker(t, withMemCoord)
	b.createTopic(t, "v", 1, map[string]string{"flush.ms": "100"})
	rc := b.dial(t)
	for v := int16(0); v <= apiByKey[32].max; v++ {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version, req.IncludeSynonyms, req.IncludeDocumentation = v, true, true
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "v", []string{"flush.ms", "preallocate"}
		req.Resources = append(req.Resources, r)
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBrokerLogger, "0", nil
		req.Resources = append(req.Resources, r)
		resp := rc.do(req).(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 2 {
			t.Fatalf("v%d: %+v", v, resp.Resources)
		}
		if resp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("v%d: BROKER_LOGGER answered %d", v, resp.Resources[1].ErrorCode)
		}
		flush, pre := resp.Resources[0].Configs[0], resp.Resources[0].Configs[1]
		if *flush.Value != "100" || flush.IsDefault || (v == 0) != pre.IsDefault && v == 0 {
			t.Errorf("v%d: flush.ms %q default=%v, preallocate default=%v", v, *flush.Value, flush.IsDefault, pre.IsDefault)
		}
		if v >= 1 && (flush.Source != kmsg.ConfigSourceDynamicTopicConfig || len(flush.ConfigSynonyms) != 2) {
			t.Errorf("v%d: flush.ms source %v, synonyms %+v", v, flush.Source, flush.ConfigSynonyms)
		}
		if v >= 3 && (pre.ConfigType != kmsg.ConfigTypeBoolean || pre.Documentation == nil ||
			!strings.Contains(*pre.Documentation, "ignored by weir")) {
			t.Errorf("v%d: preallocate type %v doc %v", v, pre.ConfigType, pre.Documentation)
		}
	}
}

// TestConfigsSarama: sarama's ClusterAdmin lists topics (which describes
// every topic's configs), describes and alters them.
func TestConfigsSarama(t *testing.T) {
	b := startBroker(t, withMemCoord)
	b.createTopic(t, "s", 2, map[string]string{"retention.ms": "1000"})
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	adm, err := sarama.NewClusterAdmin([]string{b.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if d, ok := topics["s"]; !ok || d.NumPartitions != 2 || d.ConfigEntries["retention.ms"] == nil || *d.ConfigEntries["retention.ms"] != "1000" {
		t.Fatalf("ListTopics: %+v", topics)
	}
	if err := adm.AlterConfig(sarama.TopicResource, "s", map[string]*string{"retention.ms": kadm.StringPtr("5000"),
		"cleanup.policy": kadm.StringPtr("delete")}, false); err != nil {
		t.Fatalf("AlterConfig: %v", err)
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Value
	}
	if got["retention.ms"] != "5000" || got["cleanup.policy"] != "delete" || got["segment.bytes"] != "1073741824" {
		t.Errorf("after AlterConfig: %v", got)
	}
	err = adm.AlterConfig(sarama.TopicResource, "s", map[string]*string{"retention.ms": kadm.StringPtr("x")}, false)
	if err == nil || !strings.Contains(err.Error(), "retention.ms") {
		t.Errorf("bad value: %v", err)
	}
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "s", map[string]sarama.IncrementalAlterConfigsEntry{
		"segment.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: kadm.StringPtr("10000")}}, false); err != nil {
		t.Fatalf("IncrementalAlterConfig: %v", err)
	}
	entries, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "s", ConfigNames: []string{"segment.ms", "retention.ms"}})
	if err != nil || len(entries) != 2 {
		t.Fatalf("%+v %v", entries, err)
	}
	for _, e := range entries {
		if (e.Name == "segment.ms" && e.Value != "10000") || (e.Name == "retention.ms" && e.Value != "5000") {
			t.Errorf("%s = %s", e.Name, e.Value)
		}
	}
}

// fetchCodecs fetches a partition from offset and returns the codec (the
// attributes' low 3 bits) of each batch.
func fetchCodecs(t *testing.T, rc *rawConn, topic string, offset int64) []int {
	t.Helper()
	resp := rc.do(fetchReq(11, 0, 0, 1<<20, topic, map[int32]int64{0: offset})).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	var out []int
	for b := p.RecordBatches; len(b) >= 61; {
		n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		out = append(out, int(binary.BigEndian.Uint16(b[21:23])&7))
		b = b[n:]
	}
	return out
}

// TestConfigsApplyLive: altered configs change the running partitions
// without a restart: retention deletes old segments at once, a flush policy
// fsyncs the next append, a codec recompresses the next batches, a smaller
// max.message.bytes refuses the next large batch, and min.insync.replicas
// refuses acks=all on one broker.
func TestConfigsApplyLive(t *testing.T) {
	b := startBroker(t, withMemCoord)
	b.createTopic(t, "live", 1, map[string]string{"segment.bytes": "1024"})
	adm := newAdmin(t, b.addr)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Records an hour old: retention.ms=1 finds their segments expired.
	produce := func(n, size int) error {
		for range n {
			r := &kgo.Record{Topic: "live", Value: make([]byte, size), Timestamp: time.Now().Add(-time.Hour)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	alter := func(k, v string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set(k, v)}, "live")
		wantAltered(t, rs, err, map[string]error{"live": nil}, "")
	}
	if err := produce(20, 300); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "live", 0); st.LogStartOffset != 0 {
		t.Fatalf("start %d before retention", st.LogStartOffset)
	}
	// retention.ms=1: every sealed segment is older; the pass runs at the
	// change, not at the next retention interval (5 minutes).
	alter("retention.ms", "1")
	if st := b.stats(t, "live", 0); st.LogStartOffset == 0 {
		t.Fatalf("retention.ms=1 applied, log start still 0 (end %d)", st.LogEndOffset)
	}
	alter("retention.ms", "-1")
	alter("segment.bytes", "1048576")

	// Flush: with the default (never), appends are not fsynced.
	before := b.stats(t, "live", 0)
	if err := produce(3, 10); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "live", 0); st.Fsyncs != before.Fsyncs {
		t.Fatalf("fsyncs %d -> %d without a flush policy", before.Fsyncs, st.Fsyncs)
	}
	alter("flush.messages", "1")
	before = b.stats(t, "live", 0)
	if err := produce(3, 10); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "live", 0); st.Fsyncs < before.Fsyncs+3 || st.FlushedOffset != st.LogEndOffset {
		t.Fatalf("flush.messages=1: fsyncs %d -> %d, flushed %d of %d", before.Fsyncs, st.Fsyncs, st.FlushedOffset, st.LogEndOffset)
	}

	// Codec: uncompressed batches stored as produced, then recompressed.
	rc := b.dial(t)
	from := b.stats(t, "live", 0).LogEndOffset
	if err := produce(1, 100); err != nil {
		t.Fatal(err)
	}
	alter("compression.type", "zstd")
	if err := produce(1, 100); err != nil {
		t.Fatal(err)
	}
	if got := fetchCodecs(t, rc, "live", from); !slices.Equal(got, []int{0, int(record.CodecZstd)}) {
		t.Fatalf("codecs before and after compression.type=zstd: %v", got)
	}

	// max.message.bytes and min.insync.replicas (the codec back to
	// producer: the limit applies to the batch as stored).
	alter("compression.type", "producer")
	alter("max.message.bytes", "200")
	if err := produce(1, 500); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("500 bytes with max.message.bytes=200: %v", err)
	}
	alter("min.insync.replicas", "2")
	all, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0),
		kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if err := all.ProduceSync(ctx, &kgo.Record{Topic: "live", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas=2 on one broker: %v", err)
	}
}

// The config APIs' version cases (versions_test.go): each describes or
// alters (validate-only) the test topic "t".
func init() {
	versionCases[32] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version, req.IncludeSynonyms, req.IncludeDocumentation = v, true, true
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
			req.Resources = append(req.Resources, r)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
	}
	versionCases[33] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrAlterConfigsRequest()
			req.Version, req.ValidateOnly = v, true
			r := kmsg.NewAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
			r.Configs = append(r.Configs, c)
			req.Resources = append(req.Resources, r)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode },
	}
	versionCases[44] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.Version, req.ValidateOnly = v, true
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("compact")
			r.Configs = append(r.Configs, c)
			req.Resources = append(req.Resources, r)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
	}
}
