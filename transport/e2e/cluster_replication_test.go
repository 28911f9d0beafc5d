package e2e_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// createLedBy creates topic with one partition replicated on replicas (the
// first, its preferred leader, leads it) and min.insync.replicas 2, and
// waits until that one leads.
func createLedBy(t *testing.T, addr, topic string, replicas []int32) {
	t.Helper()
	cl := newClient(t, addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
	awaitLeaders(t, addr, topic, func(ls []int32) bool { return len(ls) == 1 && ls[0] == replicas[0] })
}

// TestClusterReplicatedLeaderStops: three brokers on a real ZooKeeper, the
// third a `weir broker` process leading three partitions replicated on all
// three (min.insync.replicas 2), one per client: a franz-go idempotent acks=all
// producer, kcat (librdkafka, idempotent, acks=all) and a sarama idempotent
// SyncProducer (acks=all) produce to them without pause while the leader is
// SIGKILLed (it fails over when ZooKeeper expires its session) or stopped
// with SIGTERM (its controlled shutdown hands the leaderships over first);
// every client goes on to the new leader, the stopped broker comes back,
// catches up and rejoins the ISR, and each client's topic, read back, holds
// every record it acknowledged exactly once, in order. Meanwhile two
// franz-go consumer groups of one member each, committing after every poll,
// read the franz-go topic: one coordinated by the stopped broker (its
// coordinator moves; the new one restores the group's members from its
// metadata record, so it carries on if its member heartbeats in time, and
// otherwise rebalances, and may re-read only what followed its last
// acknowledged commit), the other elsewhere (it must not rebalance, and so reads every
// record once); both end with every acknowledged record once, in order,
// and their last commit read back.
func TestClusterReplicatedLeaderStops(t *testing.T) {
	zktest.Require(t)
	weirBinary(t)
	_, withKcat := findKcat(t)
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			c := brokertest.StartCluster(t, 2)
			b3 := newProcBroker(t, c, 3)
			awaitCluster(t, c, 1, 2, 3)
			boot := c.Member(1).Addr
			starts := map[string]func(*testing.T, string, string) *failoverLoad{
				"franz": startFranzLoad, "sarama": startSaramaLoad, "kcat": startKcatLoad}
			clients := []string{"franz", "sarama", "kcat"}
			if !withKcat {
				t.Log("kcat not found: install the Debian package kcat (make deps) to run kcat across the failover too")
				clients = clients[:2]
			}
			for _, name := range clients {
				createLedBy(t, boot, "failover-"+name, []int32{3, 1, 2})
			}
			moved := startGroupReader(t, boot, "failover-moved", "failover-franz", func(id int32) bool { return id == 3 })
			stays := startGroupReader(t, boot, "failover-stays", "failover-franz", func(id int32) bool { return id != 3 })
			var loads []*failoverLoad
			for _, name := range clients {
				loads = append(loads, starts[name](t, boot, "failover-"+name))
			}
			awaitAcked(t, "before the stop", 200, loads...)

			begin := time.Now()
			if how == "SIGKILL" {
				b3.kill()
			} else {
				b3.terminate()
			}
			for _, name := range clients {
				awaitLeaders(t, boot, "failover-"+name, func(ls []int32) bool { return len(ls) == 1 && ls[0] != 3 && ls[0] != -1 })
			}
			t.Logf("new leaders %v after the %s", time.Since(begin).Round(time.Millisecond), how)
			awaitAcked(t, "by the new leaders", 200, loads...)

			b3.start()
			for _, name := range clients {
				awaitInISR(t, boot, "failover-"+name, 3)
			}
			t.Logf("broker 3 back in every ISR %v after the %s", time.Since(begin).Round(time.Millisecond), how)
			awaitAcked(t, "after broker 3 is back", 100, loads...)
			for _, l := range loads {
				l.finish(t)
			}
			for _, l := range loads {
				l.check(t)
			}

			franz := loads[0]
			end := endOffsets(t, boot, franz.topic, 1)[0]
			moved.finish(t, boot, franz.produced, end)
			if rebalances, rereads := stays.finish(t, boot, franz.produced, end); rebalances != 0 || rereads != 0 {
				t.Errorf("group %s, whose coordinator ran throughout: %d rebalances, %d records read again; want none",
					stays.group, rebalances, rereads)
			}
		})
	}
}

// awaitInISR waits until the broker at addr lists broker id in the ISR of
// the topic's partition 0.
func awaitInISR(t *testing.T, addr, topic string, id int32) {
	t.Helper()
	ctx, p := testContext(t), pin(addr)
	eventually(t, waitTimeout, fmt.Sprintf("broker %d in the ISR of %s", id, topic), func() (bool, string) {
		md, err := p.metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		tp := topicOf(md, topic)
		if tp == nil || len(tp.Partitions) != 1 {
			return false, "no partition"
		}
		return slices.Contains(tp.Partitions[0].ISR, id), fmt.Sprintf("ISR %v", tp.Partitions[0].ISR)
	})
}
