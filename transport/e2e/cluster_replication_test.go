package e2e_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
// third a `weir broker` process leading a partition replicated on all three
// (min.insync.replicas 2). While a franz-go idempotent producer writes with
// acks=all, the leader is SIGKILLed (it fails over when ZooKeeper expires its
// session) or stopped with SIGTERM (its controlled shutdown hands the
// leadership over first); the producer goes on to the new leader, the
// stopped broker comes back and catches up, and a consumer reads every
// acknowledged record exactly once, in order.
func TestClusterReplicatedLeaderStops(t *testing.T) {
	zktest.Require(t)
	weirBinary(t)
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			c := brokertest.StartCluster(t, 2)
			b3 := newProcBroker(t, c, 3)
			awaitCluster(t, c, 1, 2, 3)
			boot := c.Member(1).Addr
			topic := "replicated-" + how
			createLedBy(t, boot, topic, []int32{3, 1, 2})
			p := newClient(t, boot, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.RecordRetries(1000), kgo.RetryTimeout(2*waitTimeout), kgo.MetadataMinAge(100*time.Millisecond),
				kgo.ProduceRequestTimeout(5*time.Second))
			acked := brokertest.ProduceAcked(testContext(t), p, "a", 0, 300)
			during := make(chan []string)
			go func() { during <- brokertest.ProduceAcked(testContext(t), p, "b", 0, 600) }()
			begin := time.Now()
			if how == "SIGKILL" {
				b3.kill()
			} else {
				if err := b3.p.Stop(); err != nil {
					t.Fatalf("SIGTERM: %v", err)
				}
				t.Logf("broker 3 stopped by SIGTERM in %v; its output:\n%s", time.Since(begin), b3.p.Output())
				b3.p = nil
			}
			awaitLeaders(t, boot, topic, func(ls []int32) bool { return len(ls) == 1 && ls[0] != 3 && ls[0] != -1 })
			t.Logf("a new leader %v after the %s", time.Since(begin).Round(time.Millisecond), how)
			acked = append(acked, <-during...)
			b3.start()
			acked = append(acked, brokertest.ProduceAcked(testContext(t), p, "c", 0, 300)...)
			if len(acked) < 900 {
				t.Fatalf("%d of 1200 records acknowledged", len(acked))
			}
			cons := newClient(t, boot, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
				kgo.FetchMaxWait(200*time.Millisecond))
			var got []seqRec
			collect(t, cons, &got, len(acked))
			seen := map[string]int{}
			for i, r := range got {
				seen[r.Value]++
				if r.Offset != int64(i) {
					t.Fatalf("record %d at offset %d", i, r.Offset)
				}
			}
			for _, v := range acked {
				if seen[v] != 1 {
					t.Fatalf("acknowledged record %s read %d times", v, seen[v])
				}
			}
			// Broker 3 catches up and is back in the ISR.
			pc := pin(boot)
			eventually(t, 2*waitTimeout, "broker 3 back in the ISR", func() (bool, string) {
				md, err := pc.metadata(testContext(t), topic)
				if err != nil {
					return false, err.Error()
				}
				tp := topicOf(md, topic)
				if tp == nil || len(tp.Partitions) != 1 {
					return false, "no partition"
				}
				return slices.Contains(tp.Partitions[0].ISR, 3), fmt.Sprintf("ISR %v", tp.Partitions[0].ISR)
			})
			if len(got) != len(acked) {
				t.Errorf("read %d records, %d acknowledged", len(got), len(acked))
			}
		})
	}
}
