package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// The durability lab's acks=all loss (README, "The cluster fault lab"): a
// leader comes back from a power cut with a shortened log (or with its
// partition directory gone, a lost disk) while no controller can react (the
// controller is cut off from the store, so its session, and its
// controllership, live on), finds the partition's state still naming it
// leader in the epoch it led before, and must not take that leadership up:
// the follower that holds every acknowledged record would truncate to its
// log. It resigns from the ISR instead, and serves nothing. Then either a
// new controller takes over (the old one's session expires: it knows only
// the new registration, and acts on the resignation), or the old one comes
// back (it sees the bounce); both hand the leadership to the follower in a
// new epoch. No acknowledged record is lost, the follower never truncated
// below the high watermark, and the replicas end identical.
func TestLeaderBackFromUncleanShutdownDoesNotLead(t *testing.T) {
	for _, fault := range []string{"power cut", "partition directory lost"} {
		for _, heal := range []string{"new controller", "controller returns"} {
			t.Run(fault+", "+heal, func(t *testing.T) { uncleanLeaderBack(t, fault, heal) })
		}
	}
}

func uncleanLeaderBack(t *testing.T, fault, heal string) {
	// Each broker's debug lines too, to see the follower's epoch queries.
	debug := map[int32]*brokertest.LogBuffer{1: {}, 2: {}, 3: {}}
	c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) {
		cfg.Logger = slog.New(slog.NewMultiHandler(cfg.Logger.Handler(),
			slog.NewTextHandler(debug[cfg.NodeID], &slog.HandlerOptions{Level: slog.LevelDebug})))
	})
	var ctl int32 = -1
	eventually(t, "a controller", func() (bool, string) {
		ctl = c.Member(1).Broker().Node().ControllerID()
		return ctl >= 0, fmt.Sprint("controller ", ctl)
	})
	var others []int32
	for _, id := range c.IDs() {
		if id != ctl {
			others = append(others, id)
		}
	}
	leader, follower := others[0], others[1]
	// Flush policy never: only the page cache holds the records, which
	// the leader's power cut drops.
	brokertest.CreateTopicOnReplicas(t, c.Member(1).Addr, "u", []int32{leader, follower, ctl},
		map[string]string{"min.insync.replicas": "2", "weir.flush.policy": "never"})
	p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("u"), kgo.RecordRetries(1000), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	acked := brokertest.ProduceAcked(context.Background(), p, "v", 0, n)
	p.Close()
	if len(acked) != n {
		t.Fatalf("%d of %d records acknowledged", len(acked), n)
	}
	inSync(t, c, "u", 0)
	if l := leaderOf(t, c, "u", 0); l != leader {
		t.Fatalf("u-0 led by %d, want %d", l, leader)
	}
	hw, _ := c.Member(leader).Broker().Node().ReplicaHighWatermark("u", 0)
	if hw < n {
		t.Fatalf("high watermark %d before the cut, want %d", hw, n)
	}

	// The controller cannot react: cut off from the store, its session
	// (and so its controllership) lives on, and no other is elected.
	c.Store.Disconnect(c.Member(ctl).Coord)
	c.PowerCut(leader)
	if fault == "partition directory lost" {
		if err := c.Member(leader).FS.RemoveAll("/data/u-0"); err != nil {
			t.Fatal(err)
		}
	}
	c.Start(leader)
	if end := replicaLog(t, c.Member(leader).Broker(), "u", 0).EndOffset(); end >= n {
		t.Fatalf("the %s left the leader's log at %d: it should have lost what was not fsynced", fault, end)
	}
	fn := c.Member(follower).Broker().Node()
	eventually(t, fmt.Sprintf("broker %d to see broker %d back as the recorded leader", follower, leader), func() (bool, string) {
		l := fn.LeaderOf("u", 0)
		return l == leader, fmt.Sprint("leader ", l)
	})
	// The follower fetches from the leader, or asks it where its epoch
	// ends (when it saw the leader go and come back): the leader, back
	// from an unclean shutdown, has resigned and refuses (without the fix
	// it answers from its shortened log, and the follower truncates).
	// Wait for either, and for the resignation to be written.
	watch := c.Store.Connect()
	defer watch.Close()
	resigned := func() bool {
		rs, _, err := layout.ReadResignations(context.Background(), watch)
		return err == nil && slices.ContainsFunc(rs, func(r meta.Resignation) bool {
			return r.Broker == leader && r.Topic == "u" && r.Partition == 0
		})
	}
	eventually(t, fmt.Sprintf("broker %d to be refused by broker %d (or to truncate)", follower, leader), func() (bool, string) {
		end := replicaLog(t, c.Member(follower).Broker(), "u", 0).EndOffset()
		refused := debug[follower].Contains("refused", "partition=u-0", "KAFKA_STORAGE_ERROR")
		return end < hw || (refused && resigned()), fmt.Sprintf("follower's log end %d, refused %v, resigned %v", end, refused, resigned())
	})
	if end := replicaLog(t, c.Member(follower).Broker(), "u", 0).EndOffset(); end < hw {
		t.Fatalf("broker %d truncated u-0 to %d, below the high watermark %d, following broker %d back from a %s",
			follower, end, hw, leader, fault)
	}

	m := c.Member(ctl)
	if heal == "new controller" {
		// The old one's session expires, and it comes back with a new one.
		c.Store.Expire(m.Coord)
		c.Store.Reconnect(m.Coord) // it learns of the expiry
	}
	c.Store.Reconnect(m.Coord) // connected again (after an expiry: a new session)
	eventually(t, "the leadership to move off the broker back from the power cut", func() (bool, string) {
		l := fn.LeaderOf("u", 0)
		return l != leader && l >= 0, fmt.Sprint("leader ", l)
	})
	inSync(t, c, "u", 0)
	sameBytes(t, c, "u", 0)
	exactlyOnce(t, acked, consumeAll(t, c, "u", len(acked)))
	if end := replicaLog(t, c.Member(follower).Broker(), "u", 0).EndOffset(); end < hw {
		t.Fatalf("broker %d's u-0 ends at %d, below the high watermark %d", follower, end, hw)
	}
}
