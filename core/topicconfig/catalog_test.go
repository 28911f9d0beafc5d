package topicconfig

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// kafkaTopicKeys are the topic configs of Kafka 3.x (TopicConfig, LogConfig
// and QuotaConfig): every one must be accepted.
var kafkaTopicKeys = []string{
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
	"delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
	"follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
	"local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
	"message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
	"message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
	"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
	"retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
	"unclean.leader.election.enable",
}

// Every Kafka key is known, and its Kafka default is a value weir accepts,
// so a tool that writes back what DescribeConfigs said never fails.
func TestCatalogAcceptsKafkaDefaults(t *testing.T) {
	for _, name := range kafkaTopicKeys {
		k, ok := Lookup(name)
		if !ok {
			t.Errorf("%s: not in the catalog", name)
			continue
		}
		if k.Default == nil {
			t.Errorf("%s: no default", name)
			continue
		}
		if _, err := Normalize(map[string]string{name: *k.Default}, BuiltinPlugins{}); err != nil {
			t.Errorf("%s=%q (Kafka's default): %v", name, *k.Default, err)
		}
		if !k.Honoured && !strings.HasPrefix(k.Doc, ignoredDoc) {
			t.Errorf("%s is ignored but its documentation does not say so: %q", name, k.Doc)
		}
		if k.Type == 0 || k.Doc == "" {
			t.Errorf("%s: type %d, doc %q", name, k.Type, k.Doc)
		}
	}
	if got := len(Keys()); got != len(kafkaTopicKeys)+2 {
		t.Errorf("%d keys, want Kafka's %d and weir's 2: %v", got, len(kafkaTopicKeys), Keys())
	}
	// The kaf complaint: Kafka's default cleanup.policy with every other
	// key a client may send when creating a topic.
	all := map[string]string{}
	for _, k := range Catalog() {
		if k.Default != nil {
			all[k.Name] = *k.Default
		}
	}
	if _, err := Normalize(all, BuiltinPlugins{}); err != nil {
		t.Errorf("all of Kafka's defaults at once: %v", err)
	}
}

func TestCatalogValues(t *testing.T) {
	for _, m := range []map[string]string{
		{"compression.gzip.level": "-1"}, {"compression.gzip.level": "9"}, {"compression.zstd.level": "-131072"},
		{"compression.lz4.level": "17"}, {"leader.replication.throttled.replicas": "*"},
		{"follower.replication.throttled.replicas": "0:1, 1:2"}, {"message.format.version": "2.8"},
		{"message.timestamp.type": "LogAppendTime"}, {"local.retention.ms": "-2"}, {"preallocate": "TRUE"},
		{"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "100"}, {"segment.index.bytes": "4"},
	} {
		if _, err := Normalize(m, BuiltinPlugins{}); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
	for _, tc := range []struct{ key, value string }{
		{"compression.gzip.level", "0"}, {"compression.gzip.level", "10"}, {"compression.zstd.level", "23"},
		{"compression.lz4.level", "0"}, {"leader.replication.throttled.replicas", "0-1"},
		{"follower.replication.throttled.replicas", "a:1"}, {"message.format.version", "latest"},
		{"message.timestamp.type", "createtime"}, {"local.retention.ms", "-3"}, {"preallocate", "1"},
		{"max.compaction.lag.ms", "0"}, {"min.compaction.lag.ms", "-1"}, {"segment.index.bytes", "3"},
		{"remote.storage.enable", "true"}, {"segment.jitter.ms", "-1"}, {"file.delete.delay.ms", "x"},
	} {
		_, err := Normalize(map[string]string{tc.key: tc.value}, BuiltinPlugins{})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.value) {
			t.Errorf("%s=%q: got %v, want ErrInvalidConfig naming both", tc.key, tc.value, err)
		}
	}
	_, err := Normalize(map[string]string{"min.compaction.lag.ms": "101", "max.compaction.lag.ms": "100"}, BuiltinPlugins{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "max.compaction.lag.ms") {
		t.Errorf("min above max compaction lag: %v", err)
	}
	if err := CheckEffective(map[string]string{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "4"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("CheckEffective: %v", err)
	}
}

func TestParseCompactionLagAndGzipLevel(t *testing.T) {
	for _, tc := range []struct {
		configs  map[string]string
		min, max time.Duration
		codec    string
	}{
		{nil, 0, math.MaxInt64, ""},
		{map[string]string{"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "60000"}, time.Second, time.Minute, ""},
		{map[string]string{"max.compaction.lag.ms": "9223372036854775807"}, 0, math.MaxInt64, ""},
		{map[string]string{"compression.type": "gzip", "compression.gzip.level": "3"}, 0, math.MaxInt64, "gzip:level=3"},
		{map[string]string{"compression.type": "gzip", "compression.gzip.level": "-1"}, 0, math.MaxInt64, "gzip"},
		{map[string]string{"compression.type": "zstd", "compression.gzip.level": "3"}, 0, math.MaxInt64, "zstd"},
	} {
		m, err := Normalize(tc.configs, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(m, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		if got.MinCompactionLag != tc.min || got.MaxCompactionLag != tc.max || got.Compression != tc.codec {
			t.Errorf("%v: min %v max %v codec %q", tc.configs, got.MinCompactionLag, got.MaxCompactionLag, got.Compression)
		}
	}
}

func TestBrokerToTopic(t *testing.T) {
	got, err := BrokerToTopic(map[string]string{"log.retention.ms": "1000", "log.roll.ms": " 60000", "message.max.bytes": "2000",
		"weir.durable.acks": "true", "log.cleaner.min.compaction.lag.ms": "5"}, BuiltinPlugins{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "segment.ms": "60000", "max.message.bytes": "2000",
		"weir.durable.acks": "true", "min.compaction.lag.ms": "5"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	for _, m := range []map[string]string{{"retention.ms": "1"}, {"log.retention.hours": "1"}, {"log.retention.ms": "-5"},
		{"listeners": "PLAINTEXT://:9092"}} {
		_, err := BrokerToTopic(m, BuiltinPlugins{})
		if !errors.Is(err, ErrInvalidBrokerConfig) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v, want ErrInvalidBrokerConfig", m, err)
			continue
		}
		for k := range m {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("%v: %q does not name the key", m, err)
			}
		}
	}
}

// entry returns the named entry of es.
func entry(t *testing.T, es []Entry, name string) Entry {
	t.Helper()
	i := slices.IndexFunc(es, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		t.Fatalf("no entry %s", name)
	}
	return es[i]
}

func TestDescribeTopic(t *testing.T) {
	l := Layers{
		Topic:          map[string]string{"retention.ms": "1000", "flush.ms": "5"},
		Broker:         map[string]string{"retention.ms": "2000", "segment.bytes": "4096"},
		ClusterDefault: map[string]string{"retention.ms": "3000", "segment.bytes": "8192", "weir.flush.policy": "every-batch"},
		Static:         map[string]string{"retention.ms": "4000", "min.insync.replicas": "2"},
	}
	es := DescribeTopic(l)
	if len(es) != len(Keys()) {
		t.Fatalf("%d entries, want %d", len(es), len(Keys()))
	}
	type syn struct {
		name, value string
		src         Source
	}
	for _, tc := range []struct {
		key   string
		value string
		src   Source
		syns  []syn
	}{
		{"retention.ms", "1000", SourceTopic, []syn{{"retention.ms", "1000", SourceTopic}, {"log.retention.ms", "2000", SourceDynamicBroker},
			{"log.retention.ms", "3000", SourceDynamicDefaultBroker}, {"log.retention.ms", "4000", SourceStaticBroker},
			{"log.retention.ms", "604800000", SourceDefault}}},
		{"segment.bytes", "4096", SourceDynamicBroker, []syn{{"log.segment.bytes", "4096", SourceDynamicBroker},
			{"log.segment.bytes", "8192", SourceDynamicDefaultBroker}, {"log.segment.bytes", "1073741824", SourceDefault}}},
		{"min.insync.replicas", "2", SourceStaticBroker, []syn{{"min.insync.replicas", "2", SourceStaticBroker}, {"min.insync.replicas", "1", SourceDefault}}},
		{"cleanup.policy", "delete", SourceDefault, []syn{{"log.cleanup.policy", "delete", SourceDefault}}},
		// The topic sets a flush key: the broker's flush policy does not apply.
		{"weir.flush.policy", "", SourceDefault, nil},
		{"flush.ms", "5", SourceTopic, []syn{{"flush.ms", "5", SourceTopic}, {"log.flush.interval.ms", "9223372036854775807", SourceDefault}}},
	} {
		e := entry(t, es, tc.key)
		v := ""
		if e.Value != nil {
			v = *e.Value
		}
		if v != tc.value || e.Source != tc.src {
			t.Errorf("%s = %q from %d, want %q from %d", tc.key, v, e.Source, tc.value, tc.src)
		}
		var got []syn
		for _, s := range e.Synonyms {
			got = append(got, syn{s.Name, *s.Value, s.Source})
		}
		if !slices.Equal(got, tc.syns) {
			t.Errorf("%s synonyms %v, want %v", tc.key, got, tc.syns)
		}
	}

	bs := DescribeBroker(l, false)
	if e := entry(t, bs, "log.retention.ms"); *e.Value != "2000" || e.Source != SourceDynamicBroker || len(e.Synonyms) != 4 {
		t.Errorf("broker log.retention.ms: %q from %d, %d synonyms", *e.Value, e.Source, len(e.Synonyms))
	}
	if e := entry(t, bs, "log.cleanup.policy"); *e.Value != "delete" || e.Source != SourceDefault {
		t.Errorf("broker log.cleanup.policy: %q from %d", *e.Value, e.Source)
	}
	ds := DescribeBroker(l, true)
	if len(ds) != 3 {
		t.Errorf("cluster default: %d entries, want the 3 it sets", len(ds))
	}
	if e := entry(t, ds, "log.segment.bytes"); *e.Value != "8192" || e.Source != SourceDynamicDefaultBroker {
		t.Errorf("cluster default log.segment.bytes: %q from %d", *e.Value, e.Source)
	}
}
