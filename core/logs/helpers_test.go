package logs

import (
	"context"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
)

var ctx = context.Background()

// newClock returns a manual clock at a fixed time in 2023.
func newClock() *clocktest.Clock { return clocktest.New(time.UnixMilli(1_700_000_000_000)) }

// newManager returns a manager of /d on fsys with clk.
func newManager(t testing.TB, fsys vfs.FS, clk clock.Clock) *Manager {
	t.Helper()
	m, err := NewManager(Options{FS: fsys, Dir: "/d", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// topicConfig returns the PartitionConfig of a topic with configs (Kafka
// names), built as the broker builds it: the configs validated
// (topicconfig.Normalize, building the plugins they name with pl; with
// created set, as configs accepted at an earlier creation are, for syntax
// only), over no broker defaults, then ConfigFor with pl (nil: the
// built-ins) and clk. Its recompressor is closed when the test ends, after
// the partitions opened with it.
func topicConfig(t testing.TB, clk clock.Clock, pl topicconfig.Plugins, configs map[string]string, created bool) PartitionConfig {
	t.Helper()
	if pl == nil {
		pl = topicconfig.BuiltinPlugins{}
	}
	check := pl
	if created {
		check = nil
	}
	explicit, err := topicconfig.Normalize(configs, check)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := ConfigFor(topicconfig.Resolve(explicit, nil), pl, clk)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Recompress != nil {
		t.Cleanup(pc.Recompress.Close)
	}
	return pc
}

// testTopicID is the topic id the tests give topic: its name, padded.
func testTopicID(topic string) (id [16]byte) {
	copy(id[:15], topic)
	id[15] = 1
	return id
}

// openPartition opens partition 0 of topic with m and pc; it is closed when
// the test ends.
func openPartition(t testing.TB, m *Manager, topic string, pc PartitionConfig) *Partition {
	t.Helper()
	p, err := m.Open(topic, 0, testTopicID(topic), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// topicPartition opens partition 0 of a topic "t" with configs (Kafka names,
// see topicConfig) in /d on fsys (nil: a new MemFS) with clk.
func topicPartition(t testing.TB, fsys vfs.FS, clk clock.Clock, configs map[string]string) *Partition {
	t.Helper()
	if fsys == nil {
		fsys = vfs.NewMem()
	}
	return openPartition(t, newManager(t, fsys, clk), "t", topicConfig(t, clk, nil, configs, false))
}
