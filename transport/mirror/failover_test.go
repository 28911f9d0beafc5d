package mirror_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// TestMirrorTargetFailover mirrors into a weir cluster (three brokers
// coordinated by a real ZooKeeper, target topic at replication factor 3)
// and kills the broker leading the first target partition mid-mirror (its
// ZooKeeper session cut, as a crash looks): the mirror follows the new
// leader, copies what the source receives meanwhile, keeps going when the
// broker comes back, and in the end the target holds every source record,
// in the source's order in each partition (at least once: a re-sent run
// may repeat records after their first copy).
func TestMirrorTargetFailover(t *testing.T) {
	const parts = 3
	src := brokertest.Start(t, "").Addr()
	c := brokertest.StartCluster(t, 3)
	brokertest.CreateTopic(t, src, "events", parts, nil)
	cfg := testConfig(t, src, c.Addrs()[0], "events")
	cfg.Target = c.Addrs()
	cfg.ReplicationFactor = 3
	_, stop := runMirror(t, cfg)

	n := 0
	produceRound := func(count int) {
		produce(t, src, "events", parts, n, count)
		n += count
	}
	caughtUp := func(addr string) {
		t.Helper()
		want := int64(n)
		waitFor(t, fmt.Sprintf("the target holding %d records per partition", want), func() bool {
			return mirroredAtLeast(t, addr, "events", parts, want)
		})
	}
	produceRound(200)
	caughtUp(c.Addrs()[0])

	leader := targetLeader(t, c.Addrs()[0], "events", 0)
	c.Kill(leader)
	t.Logf("killed broker %d, the leader of events/0 on the target", leader)
	var alive string
	for _, id := range c.IDs() {
		if id != leader {
			alive = c.Member(id).Addr
			break
		}
	}
	produceRound(200) // while the leader is gone
	caughtUp(alive)
	if now := targetLeader(t, alive, "events", 0); now == leader || now < 0 {
		t.Fatalf("events/0 led by %d after broker %d was killed", now, leader)
	}
	c.Restart(leader)
	produceRound(100)
	ends := brokertest.ListOffsets(t, src, "events", parts, -1)
	waitFor(t, "the mirror's positions at the source's ends", func() bool {
		return fmt.Sprint(brokertest.CommittedOffsets(t, alive, mirror.DefaultName, "events", parts)) == fmt.Sprint(ends)
	})
	stop()

	want := readAll(t, src, "events", parts)
	got := readAll(t, alive, "events", parts)
	for p := range int32(parts) {
		i := 0
		for _, r := range got[p] {
			if i < len(want[p]) && string(r.Value) == string(want[p][i].Value) {
				i++
			}
		}
		if i != len(want[p]) {
			t.Errorf("partition %d: the target holds the source's records 0..%d in order, then not %s", p, i-1, want[p][i].Value)
		}
		t.Logf("partition %d: %d source records, %d in the target", p, len(want[p]), len(got[p]))
	}
}

// mirroredAtLeast reports whether every partition of topic at addr ends at
// or past want.
func mirroredAtLeast(t testing.TB, addr, topic string, parts int32, want int64) bool {
	adm := kadm.NewClient(brokertest.Client(t, addr))
	ends, err := adm.ListEndOffsets(brokertest.Context(t), topic)
	if err != nil || ends.Error() != nil {
		return false
	}
	for p := range parts {
		if o, ok := ends.Lookup(topic, p); !ok || o.Offset < want {
			return false
		}
	}
	return true
}

// targetLeader is the leader of topic/partition as the broker at addr
// describes it, -1 when it names none.
func targetLeader(t testing.TB, addr, topic string, partition int32) int32 {
	t.Helper()
	adm := kadm.NewClient(brokertest.Client(t, addr))
	md, err := adm.Metadata(brokertest.Context(t), topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	d, ok := md.Topics[topic]
	if !ok {
		return -1
	}
	if p, ok := d.Partitions[partition]; ok {
		return p.Leader
	}
	return -1
}
