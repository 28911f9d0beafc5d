package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
)

// describedValue returns the value n describes for one config of topic.
func describedValue(t *testing.T, n *Node, topic, key string) (string, topicconfig.Source) {
	t.Helper()
	es, err := n.DescribeTopicConfigs(topic)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(es, func(e topicconfig.Entry) bool { return e.Name == key })
	if i < 0 || es[i].Value == nil {
		t.Fatalf("%s: no value for %s", topic, key)
	}
	return *es[i].Value, es[i].Source
}

// settingsOn returns the settings of every replica of topic's partition 0
// that n holds.
func settingsOn(t *testing.T, n *Node, topic string) *replicated {
	t.Helper()
	im, _ := n.image.load()
	p, ok := n.localPartition(topic, im.Topics[topic].ID, 0)
	if !ok {
		t.Fatalf("broker %d holds no replica of %s-0", n.cfg.NodeID, topic)
	}
	return p
}

func sv(s string) *string { return &s }

// TestConfigsAcrossCluster: a topic config altered on one broker is seen by
// DescribeConfigs on the others and applied to their replicas; a broker
// default altered on a third changes the topics that do not set the key, on
// every broker; a broker that restarts comes back with both.
func TestConfigsAcrossCluster(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("three brokers", func(im *meta.Image) bool { return len(im.Brokers) == 3 })
	ctx := context.Background()
	if _, err := c.nodes[1].CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	err := c.nodes[1].AlterTopicConfigs(ctx, "t", []ConfigChange{{Name: "min.insync.replicas", Op: ConfigSet, Value: sv("2")},
		{Name: "retention.ms", Op: ConfigSet, Value: sv("3600000")}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	c.await("the altered configs", func(im *meta.Image) bool {
		tp := im.Topics["t"]
		return tp != nil && tp.Configs["min.insync.replicas"] == "2"
	})
	for id, n := range c.nodes {
		if v, src := describedValue(t, n, "t", "retention.ms"); v != "3600000" || src != topicconfig.SourceTopic {
			t.Errorf("broker %d: retention.ms %s from %d", id, v, src)
		}
		if got := settingsOn(t, n, "t").Settings().MinInsyncReplicas; got != 2 {
			t.Errorf("broker %d: replica's min.insync.replicas %d", id, got)
		}
	}

	// A cluster-wide broker default, altered on broker 3.
	err = c.nodes[3].AlterBrokerConfigs(ctx, "", []ConfigChange{{Name: "weir.durable.acks", Op: ConfigSet, Value: sv("true")},
		{Name: "log.retention.ms", Op: ConfigSet, Value: sv("60000")}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	c.await("the broker default", func(im *meta.Image) bool {
		return im.BrokerConfigs["<default>"]["weir.durable.acks"] == "true"
	})
	for id, n := range c.nodes {
		if !settingsOn(t, n, "t").Settings().DurableAcks {
			t.Errorf("broker %d: durable acks not applied from the broker default", id)
		}
		// The topic's own retention.ms wins over the default.
		if v, src := describedValue(t, n, "t", "retention.ms"); v != "3600000" || src != topicconfig.SourceTopic {
			t.Errorf("broker %d: retention.ms %s from %d", id, v, src)
		}
		if v, src := describedValue(t, n, "t", "weir.durable.acks"); v != "true" || src != topicconfig.SourceDynamicDefaultBroker {
			t.Errorf("broker %d: weir.durable.acks %s from %d", id, v, src)
		}
	}
	// One broker's own default, over the cluster's.
	if err := c.nodes[1].AlterBrokerConfigs(ctx, "2", []ConfigChange{{Name: "weir.durable.acks", Op: ConfigSet, Value: sv("false")}},
		false, false); err != nil {
		t.Fatal(err)
	}
	c.await("broker 2's default", func(im *meta.Image) bool { return im.BrokerConfigs["2"]["weir.durable.acks"] == "false" })
	if settingsOn(t, c.nodes[2], "t").Settings().DurableAcks || !settingsOn(t, c.nodes[3], "t").Settings().DurableAcks {
		t.Error("broker 2's own default not applied to broker 2 only")
	}

	// Restart keeps both.
	c.kill(2)
	n2 := c.start(2)
	c.await("broker 2 back", func(im *meta.Image) bool { return im.Live(2) && led(im, "t") })
	if got := settingsOn(t, n2, "t").Settings(); got.MinInsyncReplicas != 2 || got.DurableAcks {
		t.Errorf("after restart: min.insync.replicas %d, durable acks %v", got.MinInsyncReplicas, got.DurableAcks)
	}
	if v, src := describedValue(t, n2, "t", "weir.durable.acks"); v != "false" || src != topicconfig.SourceDynamicBroker {
		t.Errorf("after restart: weir.durable.acks %s from %d", v, src)
	}
}

// TestConfigsSurviveRestart: on the single node's file store, altered topic
// and broker configs are there after a restart, and applied.
func TestConfigsSurviveRestart(t *testing.T) {
	fs := vfs.NewMem()
	cfg := Config{DataDir: "/data", FS: fs, Advertised: "localhost:9092", Logger: testLogger(t)}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"cleanup.policy": "delete"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.AlterTopicConfigs(ctx, "t", []ConfigChange{{Name: "cleanup.policy", Op: ConfigAppend, Value: sv("compact")},
		{Name: "min.compaction.lag.ms", Op: ConfigSet, Value: sv("1000")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if err := n.AlterBrokerConfigs(ctx, "", []ConfigChange{{Name: "log.cleaner.max.compaction.lag.ms", Op: ConfigSet, Value: sv("60000")}},
		false, false); err != nil {
		t.Fatal(err)
	}
	// Validate-only and invalid changes leave everything as it is.
	if err := n.AlterTopicConfigs(ctx, "t", []ConfigChange{{Name: "segment.ms", Op: ConfigSet, Value: sv("5")}}, false, true); err != nil {
		t.Fatal(err)
	}
	err = n.AlterTopicConfigs(ctx, "t", []ConfigChange{{Name: "min.compaction.lag.ms", Op: ConfigSet, Value: sv("120000")}}, false, false)
	if !errors.Is(err, topicconfig.ErrInvalidConfig) {
		t.Fatalf("min.compaction.lag.ms above the default max: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ti, err := n.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "delete,compact", "min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "60000"}
	if !maps.Equal(ti.Configs, want) {
		t.Errorf("after restart: %v, want %v", ti.Configs, want)
	}
	comp := settingsOn(t, n, "t").Settings().Compaction
	if !comp.Enabled || comp.MinCompactionLag.Milliseconds() != 1000 || comp.MaxCompactionLag.Milliseconds() != 60000 {
		t.Errorf("after restart, compaction settings %+v", comp)
	}
}
