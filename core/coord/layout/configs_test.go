package layout_test

import (
	"maps"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
)

func TestTopicAndBrokerConfigs(t *testing.T) {
	_, ss := cluster(1)
	s := ss[0]
	must(t, layout.CreateTopic(ctx(t), s, topic("t1", []int32{1})))
	cfg, v, err := layout.ReadConfig(ctx(t), s, layout.ConfigTopicPath("t1"))
	must(t, err)
	if cfg["min.insync.replicas"] != "2" {
		t.Fatalf("read %v", cfg)
	}
	must(t, layout.WriteTopicConfig(ctx(t), s, "t1", map[string]string{"retention.ms": "1000"}, v))
	if data, _ := get(t, s, "/config/topics/t1"); data != `{"version":1,"config":{"retention.ms":"1000"}}` {
		t.Fatalf("config node %s", data)
	}
	// The version read before is stale now.
	err = layout.WriteTopicConfig(ctx(t), s, "t1", map[string]string{}, v)
	wantErr(t, err, errs(coord.ErrBadVersion), "t1")
	// No topic, no config.
	err = layout.WriteTopicConfig(ctx(t), s, "nope", map[string]string{"a": "b"}, -1)
	wantErr(t, err, errs(coord.ErrNoNode), "nope")
	if ok, _, _ := s.Exists(ctx(t), "/config/topics/nope"); ok {
		t.Fatal("config node written without its topic")
	}

	// Broker configs: the cluster default and one broker, Kafka's nodes.
	cfg, v, err = layout.ReadConfig(ctx(t), s, layout.BrokerConfigPath(layout.DefaultBrokerEntity))
	must(t, err)
	if len(cfg) != 0 || v != -1 {
		t.Fatalf("missing default: %v, version %d", cfg, v)
	}
	want := map[string]string{"log.retention.ms": "5000"}
	must(t, layout.WriteBrokerConfig(ctx(t), s, layout.DefaultBrokerEntity, want, -1))
	must(t, layout.WriteBrokerConfig(ctx(t), s, layout.BrokerEntity(3), map[string]string{}, -1))
	if data, _ := get(t, s, "/config/brokers/<default>"); data != `{"version":1,"config":{"log.retention.ms":"5000"}}` {
		t.Fatalf("default node %s", data)
	}
	cfg, v, err = layout.ReadConfig(ctx(t), s, "/config/brokers/<default>")
	must(t, err)
	if !maps.Equal(cfg, want) || v != 0 {
		t.Fatalf("default: %v, version %d", cfg, v)
	}
	err = layout.WriteBrokerConfig(ctx(t), s, layout.DefaultBrokerEntity, want, -1)
	wantErr(t, err, errs(coord.ErrNodeExists), "<default>")
	err = layout.WriteBrokerConfig(ctx(t), s, "x", want, -1)
	wantErr(t, err, errs(layout.ErrInvalid), "x")
	if !layout.IsBrokerEntity("<default>") || !layout.IsBrokerEntity("3") || layout.IsBrokerEntity("-1") || layout.IsBrokerEntity("03") {
		t.Fatal("IsBrokerEntity")
	}
}
