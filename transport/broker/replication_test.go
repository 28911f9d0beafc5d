package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// eventually checks cond every 20 ms until it holds, for up to 30 s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, state)
		}
		<-tick.C
	}
}

func createReplicated(t *testing.T, addr, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
}

// replicaLog returns broker b's log of topic-p, however it serves it.
func replicaLog(t *testing.T, b *broker.Broker, topic string, p int32) *partlog.Log {
	t.Helper()
	l, err := b.Node().ReplicaLog(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// inSync waits until every running replica of topic-p has the same log end
// and high watermark as the leader's.
func inSync(t *testing.T, c *brokertest.MemCluster, topic string, p int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s-%d in sync on every broker", topic, p), func() (bool, string) {
		var ends, hws []int64
		for _, id := range c.IDs() {
			m := c.Member(id)
			if m.Broker() == nil {
				continue
			}
			l, err := m.Broker().Node().ReplicaLog(topic, p)
			if err != nil {
				return false, err.Error()
			}
			hw, _ := m.Broker().Node().ReplicaHighWatermark(topic, p)
			ends, hws = append(ends, l.EndOffset()), append(hws, hw)
		}
		same := len(ends) > 0 && !slices.ContainsFunc(ends, func(e int64) bool { return e != ends[0] }) &&
			!slices.ContainsFunc(hws, func(h int64) bool { return h != ends[0] })
		return same, fmt.Sprintf("log ends %v, high watermarks %v", ends, hws)
	})
}

// batches returns the log's batches, each a copy.
func batches(t *testing.T, l *partlog.Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		sl, err := l.Read(off, 1<<20, partlog.NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(b[:h.Size()]))
			b = b[h.Size():]
		}
		off = next
	}
	return out
}

// sameBytes checks that every running replica holds the same batches,
// byte for byte (offsets, leader epochs, CRCs).
func sameBytes(t *testing.T, c *brokertest.MemCluster, topic string, p int32) int {
	t.Helper()
	var ref [][]byte
	for _, id := range c.IDs() {
		m := c.Member(id)
		if m.Broker() == nil {
			continue
		}
		got := batches(t, replicaLog(t, m.Broker(), topic, p))
		if ref == nil {
			ref = got
			continue
		}
		if !slices.EqualFunc(got, ref, bytes.Equal) {
			t.Fatalf("broker %d's %s-%d differs from the first replica's: %d batches against %d", id, topic, p, len(got), len(ref))
		}
	}
	return len(ref)
}

// acks=all over three real replicas: a franz-go idempotent producer's
// records are acknowledged once every in-sync replica has them, every
// replica ends up byte-identical, and a consumer reads them all.
func TestReplicatedAcksAll(t *testing.T) {
	c := brokertest.StartMemCluster(t, 3)
	addr := c.Member(1).Addr
	createReplicated(t, addr, "r", 2, 3, map[string]string{"min.insync.replicas": "2"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	const n = 600
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "r", Partition: int32(i % 2), Value: []byte(fmt.Sprintf("v%04d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		inSync(t, c, "r", p)
		if sameBytes(t, c, "r", p) == 0 {
			t.Fatalf("r-%d holds no batches", p)
		}
	}
}

func leaderOf(t *testing.T, c *brokertest.MemCluster, topic string, p int32) int32 {
	t.Helper()
	for _, id := range c.IDs() {
		if m := c.Member(id); m.Broker() != nil {
			if l := m.Broker().Node().LeaderOf(topic, p); l >= 0 {
				return l
			}
		}
	}
	t.Fatalf("no leader of %s-%d", topic, p)
	return -1
}

// consumeAll reads topic-0 from the start on any broker until it has n
// records (or 30 s pass), as a consumer (up to the high watermark).
func consumeAll(t *testing.T, c *brokertest.MemCluster, topic string, n int) []string {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// exactlyOnce checks that every acknowledged value was read once.
func exactlyOnce(t *testing.T, acked, got []string) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, v := range acked {
		if seen[v] != 1 {
			t.Fatalf("acknowledged record %s read %d times", v, seen[v])
		}
	}
}

// Faults under an idempotent acks=all load (min.insync.replicas 2 of 3):
// afterwards every acknowledged record is read exactly once and every
// replica is byte-identical.
func TestReplicationUnderFaults(t *testing.T) {
	for _, fault := range []struct {
		name   string
		inject func(t *testing.T, c *brokertest.MemCluster, leader int32) (heal func())
	}{
		{"follower power cut", func(t *testing.T, c *brokertest.MemCluster, leader int32) func() {
			f := leader%3 + 1
			c.PowerCut(f)
			return func() { c.Start(f) }
		}},
		{"leader power cut", func(t *testing.T, c *brokertest.MemCluster, leader int32) func() {
			c.PowerCut(leader)
			return func() { c.Start(leader) }
		}},
		{"leader cut off from the others and from the store", func(t *testing.T, c *brokertest.MemCluster, leader int32) func() {
			// The zombie keeps thinking it leads until it hears otherwise;
			// it can commit nothing (no follower fetches from it), while
			// the others elect a new leader from the ISR.
			c.Net.Isolate(leader, c.IDs()...)
			m := c.Member(leader)
			c.Store.Disconnect(m.Coord)
			c.Store.Expire(m.Coord)
			return func() {
				c.Net.Heal()
				c.Store.Reconnect(m.Coord) // it learns of the expiry
				c.Store.Reconnect(m.Coord) // and opens a new session
			}
		}},
	} {
		t.Run(fault.name, func(t *testing.T) {
			c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) { cfg.ReplicaLagTimeMax = 2 * time.Second })
			createReplicated(t, c.Member(1).Addr, "x", 1, 3, map[string]string{"min.insync.replicas": "2"})
			p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.DefaultProduceTopic("x"), kgo.RecordRetries(1000), kgo.RetryTimeout(60*time.Second),
				kgo.MetadataMinAge(50*time.Millisecond), kgo.ProduceRequestTimeout(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			acked := brokertest.ProduceAcked(ctx, p, "a", 0, 200)
			leader := leaderOf(t, c, "x", 0)
			during := make(chan []string)
			go func() { during <- brokertest.ProduceAcked(ctx, p, "b", 0, 400) }()
			heal := fault.inject(t, c, leader)
			acked = append(acked, <-during...)
			heal()
			acked = append(acked, brokertest.ProduceAcked(ctx, p, "c", 0, 200)...)
			if len(acked) < 600 {
				t.Fatalf("%d of 800 records acknowledged", len(acked))
			}
			inSync(t, c, "x", 0)
			sameBytes(t, c, "x", 0)
			exactlyOnce(t, acked, consumeAll(t, c, "x", len(acked)))
		})
	}
}
