package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs/errorfs"
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

// faultProducer is an idempotent acks=all producer of topic that retries
// through faults (a minute) and follows leaders quickly; it closes with the
// test.
func faultProducer(t *testing.T, c *brokertest.MemCluster, topic string) *kgo.Client {
	t.Helper()
	p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1000), kgo.RetryTimeout(60*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.ProduceRequestTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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
			p := faultProducer(t, c, "x")
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

// syncFaults fails the fsyncs of one partition's log files on the brokers
// it is switched on for, as a disk that starts returning EIO would.
type syncFaults struct {
	dir string // "/<topic>-<partition>/"
	on  sync.Map
}

func (f *syncFaults) wrap(cfg *broker.Config) {
	id := cfg.NodeID
	cfg.FS = errorfs.Wrap(cfg.FS, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if on, _ := f.on.Load(id); on == true && op == errorfs.OpSync && strings.Contains(path, f.dir) &&
			strings.HasSuffix(path, ".log") {
			return syscall.EIO
		}
		return nil
	}))
}

// A leader whose fsync fails resigns instead of cutting its log back under
// records its followers hold (Kafka takes the log directory offline): under
// an idempotent acks=all load (min.insync.replicas 2 of 3, an fsync per
// batch), the leader's log-file fsyncs start failing; another in-sync
// replica takes over, the producer goes on there, the old leader's log is
// cut back to its last fsync only once it follows, and it catches up and
// returns to the ISR. Every acknowledged record is read exactly once and
// the replicas end byte-identical. (Recovering in place as a single node
// does would give the cut offsets to new records in the same epoch, and
// the replicas would differ.)
func TestLeaderFsyncFailure(t *testing.T) {
	faults := &syncFaults{dir: "/x-0/"}
	c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) { cfg.ReplicaLagTimeMax = 2 * time.Second }, faults.wrap)
	createReplicated(t, c.Member(1).Addr, "x", 1, 3, map[string]string{"min.insync.replicas": "2", "flush.ms": "20"})
	p := faultProducer(t, c, "x")
	ctx := context.Background()
	acked := brokertest.ProduceAcked(ctx, p, "a", 0, 200)
	leader := leaderOf(t, c, "x", 0)
	old := replicaLog(t, c.Member(leader).Broker(), "x", 0)
	during := make(chan []string)
	go func() { during <- brokertest.ProduceAcked(ctx, p, "b", 0, 400) }()
	faults.on.Store(leader, true)
	eventually(t, fmt.Sprintf("broker %d's log to fail", leader), func() (bool, string) {
		return old.Err() != nil, fmt.Sprintf("flushed %d, end %d", old.FlushedOffset(), old.EndOffset())
	})
	faults.on.Store(leader, false) // the disk is fine again: only what the failed fsync covered is in doubt
	eventually(t, "another leader", func() (bool, string) {
		l := leaderOf(t, c, "x", 0)
		return l != leader && l >= 0, fmt.Sprintf("leader %d", l)
	})
	acked = append(acked, <-during...)
	acked = append(acked, brokertest.ProduceAcked(ctx, p, "c", 0, 200)...)
	if len(acked) < 600 {
		t.Fatalf("%d of 800 records acknowledged", len(acked))
	}
	eventually(t, fmt.Sprintf("broker %d back in the ISR", leader), func() (bool, string) {
		isr := c.Member(1).Broker().Node().ISROf("x", 0)
		return slices.Contains(isr, leader), fmt.Sprintf("ISR %v", isr)
	})
	inSync(t, c, "x", 0)
	if old.Recoveries() == 0 || old.Err() != nil {
		t.Fatalf("broker %d's log: %d recoveries, error %v; want it recovered", leader, old.Recoveries(), old.Err())
	}
	sameBytes(t, c, "x", 0)
	exactlyOnce(t, acked, consumeAll(t, c, "x", len(acked)))
	if n := metric(t, c.Member(leader).Broker(), "weir_replica_resignations_total", nil); n < 1 {
		t.Fatalf("broker %d's weir_replica_resignations_total is %v after its log failed", leader, n)
	}
	now := leaderOf(t, c, "x", 0)
	labels := map[string]string{"topic": "x", "partition": "0"}
	if v := metric(t, c.Member(now).Broker(), "weir_partition_under_replicated", labels); v != 0 {
		t.Fatalf("weir_partition_under_replicated %v on the leader once every replica is back", v)
	}
	if v := metric(t, c.Member(now).Broker(), "weir_isr_expands_total", nil); v < 1 {
		t.Fatalf("weir_isr_expands_total %v on the leader that took broker %d back", v, leader)
	}
}

// metric returns the value of a counter or gauge of b's registry whose
// labels include labels (0 when there is none).
func metric(t *testing.T, b *broker.Broker, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := b.Node().Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// readToHW reads topic-0 from the start until the leader's high watermark,
// as a consumer, and returns the values (none when the watermark is 0).
func readToHW(t *testing.T, c *brokertest.MemCluster, topic string) []string {
	t.Helper()
	leader := leaderOf(t, c, topic, 0)
	hw, err := c.Member(leader).Broker().Node().ReplicaHighWatermark(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hw == 0 {
		return nil
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for next := int64(0); next < hw; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read to offset %d of %d", next, hw)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			next = r.Offset + 1
		})
	}
	return got
}

// weir.durable.acks over the ISR: an acks=all produce is acknowledged only
// once every in-sync replica has fsynced the records (followers fsync what
// a fetch brought before fetching again, so the offset they fetch at, which
// the leader counts as theirs, is on their disk). A power cut of every
// replica at once then loses no acknowledged record, whichever replica
// leads afterwards (here a former follower). Without durable acks,
// acknowledged records live in the replicas' page caches, and the same cut
// loses them: that arm shows the cut really drops what was not fsynced.
func TestDurableAcksSurviveAPowerCutOfEveryReplica(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(map[bool]string{true: "durable", false: "page-cache"}[durable], func(t *testing.T) {
			c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) { cfg.ReplicaLagTimeMax = 2 * time.Second })
			createReplicated(t, c.Member(1).Addr, "d", 1, 3, map[string]string{"min.insync.replicas": "3",
				"weir.durable.acks": fmt.Sprint(durable)})
			p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.DefaultProduceTopic("d"), kgo.RecordRetries(1000), kgo.RetryTimeout(30*time.Second),
				kgo.MaxBufferedRecords(50), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			acked := brokertest.ProduceAcked(context.Background(), p, "v", 0, 300)
			p.Close()
			if len(acked) != 300 {
				t.Fatalf("%d of 300 records acknowledged", len(acked))
			}
			// The leader goes first and a follower last: the ISR keeps the
			// last one (the controller takes the dead out of it, but never
			// the last member), which alone comes back and leads, so what
			// is read is what a follower's disk kept.
			leader := leaderOf(t, c, "d", 0)
			last := leader%3 + 1
			c.PowerCut(leader)
			c.PowerCut(last%3 + 1)
			c.PowerCut(last)
			c.Start(last)
			eventually(t, fmt.Sprintf("broker %d to lead", last), func() (bool, string) {
				l := c.Member(last).Broker().Node().LeaderOf("d", 0)
				return l == last, fmt.Sprintf("leader %d", l)
			})
			inSync(t, c, "d", 0)
			got := readToHW(t, c, "d")
			seen := map[string]bool{}
			for _, v := range got {
				seen[v] = true
			}
			lost := 0
			for _, v := range acked {
				if !seen[v] {
					lost++
				}
			}
			t.Logf("durable acks %v: %d of %d acknowledged records lost to the power cut", durable, lost, len(acked))
			if durable && lost > 0 {
				t.Fatalf("%d acknowledged records lost with durable acks", lost)
			}
			if !durable && lost == 0 {
				t.Fatal("the power cut lost nothing without durable acks: it did not drop the page caches")
			}
		})
	}
}
