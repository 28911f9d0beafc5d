package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// The cluster tests: three (or four) brokers joined through a real
// ZooKeeper (Debian's, run by cluster/zk/zktest), driven by the real
// clients. Brokers ask for a 3 s ZooKeeper session, so a broker that dies
// without closing its session is forgotten within seconds.

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

// pinnedClient sends each request given to ask to the broker at addr and no
// other (a client's own routing would pick any broker it knows), through a
// franz-go client of its own, closed after the request.
type pinnedClient struct{ addr string }

func pin(addr string) pinnedClient { return pinnedClient{addr} }

func (p pinnedClient) ask(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata asks one broker for the metadata of topics (all topics when
// none), letting it auto-create them.
func (p pinnedClient) metadata(ctx context.Context, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	if len(topics) == 0 {
		req.Topics = nil
	}
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := p.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// topicOf returns the named topic of a Metadata response.
func topicOf(md *kmsg.MetadataResponse, topic string) *kmsg.MetadataResponseTopic {
	for i := range md.Topics {
		if t := &md.Topics[i]; t.Topic != nil && *t.Topic == topic {
			return t
		}
	}
	return nil
}

// partitionLeaders returns each partition's leader (by partition index) and
// error code as a Metadata response gives them; nil when the topic is
// missing or in error.
func partitionLeaders(md *kmsg.MetadataResponse, topic string) (leaders []int32, codes []int16) {
	t := topicOf(md, topic)
	if t == nil || t.ErrorCode != 0 {
		return nil, nil
	}
	leaders, codes = make([]int32, len(t.Partitions)), make([]int16, len(t.Partitions))
	for _, p := range t.Partitions {
		if int(p.Partition) < len(leaders) {
			leaders[p.Partition], codes[p.Partition] = p.Leader, p.ErrorCode
		}
	}
	return leaders, codes
}

func brokerIDs(md *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// eventually polls cond every 50 ms until it holds, failing the test after
// timeout with the last state cond described.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// awaitCluster waits until every running broker of c answers Metadata with
// exactly the brokers ids and a controller among them, and returns the
// controller. Every broker must give the same cluster id.
func awaitCluster(t testing.TB, c *brokertest.Cluster, ids ...int32) int32 {
	t.Helper()
	ctx := testContext(t)
	var controller int32
	clusterIDs := map[string][]string{}
	eventually(t, waitTimeout, fmt.Sprintf("every broker to see brokers %v and one controller", ids), func() (bool, string) {
		controller = -2
		clear(clusterIDs)
		for _, addr := range c.Addrs() {
			md, err := pin(addr).metadata(ctx)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", addr, err)
			}
			if got := brokerIDs(md); !slices.Equal(got, ids) || !slices.Contains(ids, md.ControllerID) {
				return false, fmt.Sprintf("%s: brokers %v, controller %d", addr, got, md.ControllerID)
			}
			if controller != -2 && md.ControllerID != controller {
				return false, fmt.Sprintf("controllers %d and %d", controller, md.ControllerID)
			}
			controller = md.ControllerID
			if md.ClusterID != nil {
				clusterIDs[*md.ClusterID] = append(clusterIDs[*md.ClusterID], addr)
			}
		}
		return true, ""
	})
	if len(clusterIDs) != 1 {
		t.Errorf("cluster ids by broker: %v, want one id for the whole cluster", clusterIDs)
	}
	return controller
}

// createClusterTopic creates a topic through the broker at addr and waits
// until that broker names a leader for every partition; it returns them.
func createClusterTopic(t testing.TB, addr, topic string, partitions int32) []int32 {
	t.Helper()
	createTopic(t, addr, topic, partitions, nil)
	return awaitLeaders(t, addr, topic, func(ls []int32) bool { return !slices.Contains(ls, -1) })
}

// awaitLeaders polls the broker at addr until the topic's partition leaders
// satisfy ok, and returns them.
func awaitLeaders(t testing.TB, addr, topic string, ok func([]int32) bool) []int32 {
	t.Helper()
	ctx := testContext(t)
	p := pin(addr)
	var leaders []int32
	eventually(t, waitTimeout, "the leaders of "+topic, func() (bool, string) {
		md, err := p.metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		leaders, _ = partitionLeaders(md, topic)
		return leaders != nil && ok(leaders), fmt.Sprint(leaders)
	})
	return leaders
}

// countLeaders counts the partitions each broker leads.
func countLeaders(leaders []int32) map[int32]int {
	n := map[int32]int{}
	for _, l := range leaders {
		n[l]++
	}
	return n
}

// clusterJavaHash is Java's String.hashCode (ASCII input), Kafka's way of
// mapping a group to its partition of __consumer_offsets.
func clusterJavaHash(s string) int32 {
	var h int32
	for _, r := range s {
		h = 31*h + r
	}
	return h
}

func clusterJavaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	}
	return n
}

// groupCoordinatedElsewhere returns a group name starting with prefix whose
// coordinator (the leader of its partition of __consumer_offsets) is not
// broker avoid, and that coordinator; it checks that FindCoordinator, asked
// of the broker at addr, agrees.
func groupCoordinatedElsewhere(t testing.TB, addr, prefix string, avoid int32) (string, int32) {
	t.Helper()
	return groupCoordinatedBy(t, addr, prefix, func(id int32) bool { return id != avoid })
}

// groupCoordinatedBy returns a group name starting with prefix whose
// coordinator satisfies ok, and that coordinator, checked as
// groupCoordinatedElsewhere does.
func groupCoordinatedBy(t testing.TB, addr, prefix string, ok func(int32) bool) (string, int32) {
	t.Helper()
	ctx := testContext(t)
	p := pin(addr)
	// The first request for __consumer_offsets creates it.
	var leaders []int32
	eventually(t, waitTimeout, "leaders of "+offsetsTopic, func() (bool, string) {
		md, err := p.metadata(ctx, offsetsTopic)
		if err != nil {
			return false, err.Error()
		}
		leaders, _ = partitionLeaders(md, offsetsTopic)
		return len(leaders) > 0 && !slices.Contains(leaders, -1), fmt.Sprint(leaders)
	})
	for k := 0; k < 1000; k++ {
		group := fmt.Sprintf("%s-%d", prefix, k)
		coordinator := leaders[clusterJavaAbs(clusterJavaHash(group))%int32(len(leaders))]
		if !ok(coordinator) {
			continue
		}
		got, err := findCoordinator(ctx, p, group)
		if err != nil || got != coordinator {
			t.Fatalf("FindCoordinator %s at %s: broker %d, %v; want broker %d (leader of %s partition %d)",
				group, addr, got, err, coordinator, offsetsTopic, clusterJavaAbs(clusterJavaHash(group))%int32(len(leaders)))
		}
		return group, coordinator
	}
	t.Fatalf("no group %s-<n> has a coordinator as wanted; leaders of %s: %v", prefix, offsetsTopic, leaders)
	return "", -1
}

// findCoordinator asks one broker for the group's coordinator.
func findCoordinator(ctx context.Context, p pinnedClient, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := p.ask(ctx, req)
	if err != nil {
		return -1, err
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	id, code := fc.NodeID, fc.ErrorCode
	if len(fc.Coordinators) > 0 {
		id, code = fc.Coordinators[0].NodeID, fc.Coordinators[0].ErrorCode
	}
	return id, kerr.ErrorForCode(code)
}

// notCoordinator checks that the broker at addr refuses to serve the group's
// offsets (NOT_COORDINATOR): its state lives on its coordinator.
func notCoordinator(t testing.TB, addr, group, topic string) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, []int32{0}
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := pin(addr).ask(testContext(t), req)
	if err != nil {
		t.Fatalf("OffsetFetch %s at %s: %v", group, addr, err)
	}
	of := resp.(*kmsg.OffsetFetchResponse)
	code := of.ErrorCode
	if len(of.Groups) > 0 {
		code = of.Groups[0].ErrorCode
	}
	if !errors.Is(kerr.ErrorForCode(code), kerr.NotCoordinator) {
		t.Errorf("OffsetFetch of group %s at the bootstrap broker %s: %v, want NOT_COORDINATOR", group, addr, kerr.ErrorForCode(code))
	}
}

// seqRec is one record of the cluster tests: its value is "<prefix>-<seq>",
// seq counting in production order.
type seqRec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func seqValue(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

func seqOf(v string) int {
	n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
	return n
}

// checkExactlyOnce checks what a consumer got (in the order it got them)
// against what was produced: every record once, none other; per
// partition, offsets 0, 1, 2... up to the partition's end (the one
// producer's records, in its order); and where the producer reported where
// a record went (Offset >= 0), there it was.
func checkExactlyOnce(t testing.TB, who string, produced, consumed []seqRec, ends []int64) {
	t.Helper()
	checkExactlyOnceFrom(t, who, produced, consumed, make([]int64, len(ends)), ends)
}

// checkExactlyOnceFrom is checkExactlyOnce for a consumer that started at
// offsets from (committed offsets): produced holds what lies past them.
func checkExactlyOnceFrom(t testing.TB, who string, produced, consumed []seqRec, from, ends []int64) {
	t.Helper()
	want := map[string]seqRec{}
	for _, r := range produced {
		want[r.Value] = r
	}
	seen := map[string]bool{}
	next := slices.Clone(from)
	lastSeq := make([]int, len(ends))
	for i := range lastSeq {
		lastSeq[i] = -1
	}
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= 5 {
			t.Errorf(who+": "+format, args...)
		}
	}
	for _, r := range consumed {
		w, ok := want[r.Value]
		switch {
		case !ok:
			fail("consumed %q (%d@%d), which was never produced", r.Value, r.Partition, r.Offset)
			continue
		case seen[r.Value]:
			fail("consumed %q twice (again at %d@%d)", r.Value, r.Partition, r.Offset)
			continue
		case int(r.Partition) >= len(ends) || r.Partition < 0:
			fail("consumed %q from partition %d", r.Value, r.Partition)
			continue
		}
		seen[r.Value] = true
		if w.Offset >= 0 && (w.Partition != r.Partition || w.Offset != r.Offset) {
			fail("%q consumed at %d@%d, acknowledged at %d@%d", r.Value, r.Partition, r.Offset, w.Partition, w.Offset)
		}
		if r.Offset != next[r.Partition] {
			fail("partition %d: offset %d consumed after %d (%q)", r.Partition, r.Offset, next[r.Partition]-1, r.Value)
		}
		next[r.Partition] = r.Offset + 1
		if s := seqOf(r.Value); s <= lastSeq[r.Partition] {
			fail("partition %d: %q consumed after record %d of the producer: out of order", r.Partition, r.Value, lastSeq[r.Partition])
		} else {
			lastSeq[r.Partition] = s
		}
	}
	if len(seen) != len(want) {
		fail("consumed %d distinct records, want the %d produced", len(seen), len(want))
	}
	if !slices.Equal(next, ends) {
		fail("consumed partitions up to %v, want the end offsets %v", next, ends)
	}
}

// TestClusterClients: franz-go, sarama and kcat each produce to a
// 6-partition topic led by all three brokers, bootstrapped from broker 1
// only, and consume it back in a consumer group coordinated by another
// broker: every record exactly once, in order per partition; the group's
// committed offsets read back at the end offsets; and broker 1 refuses to
// serve the group's offsets (NOT_COORDINATOR).
func TestClusterClients(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	boot := c.Member(1).Addr
	const partitions, n = 6, 300

	setup := func(t *testing.T, name string) (topic, group string) {
		topic = "cluster-" + name
		leaders := createClusterTopic(t, boot, topic, partitions)
		if got := countLeaders(leaders); len(got) != 3 || got[1] == 0 || got[2] == 0 || got[3] == 0 {
			t.Fatalf("leaders of %s: %v, want every broker to lead some", topic, leaders)
		}
		md, err := pin(boot).metadata(testContext(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range md.Brokers {
			if want := c.Member(b.NodeID).Addr; fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
				t.Errorf("metadata: broker %d at %s:%d, want %s", b.NodeID, b.Host, b.Port, want)
			}
		}
		group, coordinator := groupCoordinatedElsewhere(t, boot, topic+"-g", 1)
		t.Logf("topic %s leaders %v; group %s coordinated by broker %d", topic, leaders, group, coordinator)
		return topic, group
	}
	finish := func(t *testing.T, who, topic, group string, produced, consumed []seqRec) {
		t.Helper()
		ends := endOffsets(t, boot, topic, partitions)
		for p, e := range ends {
			if e == 0 {
				t.Errorf("partition %d of %s got no records (ends %v)", p, topic, ends)
			}
		}
		checkExactlyOnce(t, who, produced, consumed, ends)
		if committed := committedOffsets(t, boot, group, topic, partitions); !slices.Equal(committed, ends) {
			t.Errorf("%s: committed offsets %v, want the end offsets %v", who, committed, ends)
		}
		notCoordinator(t, boot, group, topic)
	}

	t.Run("franz-go", func(t *testing.T) {
		topic, group := setup(t, "franz")
		produced := produceFranzSeq(t, boot, topic, "franz", n)
		cl := newClient(t, boot,
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond))
		ctx := testContext(t)
		var consumed []seqRec
		for len(consumed) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("franz-go group: %d of %d records before the deadline", len(consumed), n)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				consumed = append(consumed, seqRec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
			})
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
		cl.Close()
		finish(t, "franz-go", topic, group, produced, consumed)
	})

	t.Run("sarama", func(t *testing.T) {
		topic, group := setup(t, "sarama")
		produced := produceSaramaSeq(t, boot, topic, "sarama", n)
		consumed := consumeSaramaGroup(t, boot, group, topic, n)
		finish(t, "sarama", topic, group, produced, consumed)
	})

	t.Run("kcat", func(t *testing.T) {
		kcatPath(t)
		topic, group := setup(t, "kcat")
		checkKcatMetadata(t, boot, topic, partitions)
		var in strings.Builder
		var produced []seqRec
		for i := range n {
			v := seqValue("kcat", i)
			fmt.Fprintf(&in, "k%d\t%s\n", i, v)
			produced = append(produced, seqRec{Offset: -1, Key: fmt.Sprint("k", i), Value: v})
		}
		runKcat(t, []byte(in.String()), "-b", boot, "-P", "-t", topic, "-K", `\t`, "-X", "acks=all")
		out := runKcat(t, nil, "-b", boot, "-G", group, "-c", fmt.Sprint(n), "-q", "-f", `%p\t%o\t%k\t%s\n`,
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=200",
			topic)
		var consumed []seqRec
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 4 {
				t.Fatalf("kcat -G printed %q", line)
			}
			p, _ := strconv.Atoi(f[0])
			off, _ := strconv.ParseInt(f[1], 10, 64)
			consumed = append(consumed, seqRec{int32(p), off, f[2], f[3]})
		}
		finish(t, "kcat", topic, group, produced, consumed)
	})
}

// produceFranzSeq produces n keyed records with franz-go (idempotent,
// acks=all) and returns where each was acknowledged.
func produceFranzSeq(t testing.TB, addr, topic, prefix string, n int) []seqRec {
	t.Helper()
	return produceFranzSeqWith(t, newClient(t, addr, kgo.DefaultProduceTopic(topic)), topic, prefix, 0, n)
}

func produceFranzSeqWith(t testing.TB, cl *kgo.Client, topic, prefix string, from, n int) []seqRec {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", from+i), Value: []byte(seqValue(prefix, from+i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce to %s: %v", topic, err)
	}
	out := make([]seqRec, n)
	for i, r := range recs {
		out[i] = seqRec{r.Partition, r.Offset, string(r.Key), string(r.Value)}
	}
	return out
}

// produceSaramaSeq produces n keyed records with a sarama SyncProducer
// (acks=all) and returns where each was acknowledged.
func produceSaramaSeq(t testing.TB, addr, topic, prefix string, n int) []seqRec {
	t.Helper()
	p, err := sarama.NewSyncProducer([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	defer p.Close()
	pms := make([]*sarama.ProducerMessage, n)
	for i := range pms {
		pms[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint("k", i)),
			Value: sarama.StringEncoder(seqValue(prefix, i))}
	}
	if err := p.SendMessages(pms); err != nil {
		t.Fatalf("sarama produce to %s: %v", topic, err)
	}
	out := make([]seqRec, n)
	for i, pm := range pms {
		out[i] = seqRec{pm.Partition, pm.Offset, fmt.Sprint("k", i), seqValue(prefix, i)}
	}
	return out
}

// saramaRecorder is a sarama consumer group handler that records every
// message in the order it is given them and marks each for commit.
type saramaRecorder struct {
	mu  sync.Mutex
	got []seqRec
}

func (*saramaRecorder) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaRecorder) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaRecorder) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.got = append(h.got, seqRec{m.Partition, m.Offset, string(m.Key), string(m.Value)})
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaRecorder) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

// consumeSaramaGroup consumes n messages as the only member of a sarama
// consumer group, then closes it (committing what it marked).
func consumeSaramaGroup(t testing.TB, addr, group, topic string, n int) []seqRec {
	t.Helper()
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 3 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	h := &saramaRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				t.Logf("sarama group: %v", err)
				return
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			t.Logf("sarama group: %v", err)
		}
	}()
	eventually(t, waitTimeout, fmt.Sprintf("sarama's group to consume %d messages", n), func() (bool, string) {
		return h.len() >= n, fmt.Sprintf("%d consumed", h.len())
	})
	cancel()
	<-done
	if err := cg.Close(); err != nil {
		t.Errorf("sarama group: close: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

// checkKcatMetadata: librdkafka's Metadata (v4 at most) sees the three
// brokers and the topic's partitions, each with a leader among them.
func checkKcatMetadata(t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	out := runKcat(t, nil, "-b", addr, "-L", "-t", topic)
	text := string(out)
	if !strings.Contains(text, " 3 brokers:") {
		t.Errorf("kcat -L: want 3 brokers:\n%s", text)
	}
	leaders, seen := map[string]bool{}, 0
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "partition" && f[2] == "leader" {
			seen++
			leaders[strings.TrimSuffix(f[3], ",")] = true
			if strings.Contains(line, "err") {
				t.Errorf("kcat -L: %s", line)
			}
		}
	}
	if seen != partitions || len(leaders) != 3 {
		t.Errorf("kcat -L: %d partitions led by %v, want %d led by all three brokers:\n%s", seen, leaders, partitions, text)
	}
}

// TestClusterControllerKilled: the controller dies without closing its
// ZooKeeper session (cut off ZooKeeper, then stopped): once ZooKeeper
// expires the session, which takes the session timeout, another broker is
// elected, every survivor's metadata names it, CreateTopics works again
// and the new topic's partitions are led by the survivors. The old
// controller, restarted on its data, rejoins without taking control back.
func TestClusterControllerKilled(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	old := awaitCluster(t, c, 1, 2, 3)
	var survivors []int32
	for _, id := range c.IDs() {
		if id != old {
			survivors = append(survivors, id)
		}
	}
	c.Kill(old)
	killed := time.Now()
	ctx := testContext(t)
	// A topic asked for while the dead controller still holds /controller:
	// CreateTopics waits until the new controller has elected its leaders.
	early := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 20_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "during-failover", 3, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, newClient(t, c.Member(survivors[0]).Addr))
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		early <- err
	}()
	var controller int32
	took := eventually(t, waitTimeout, "a new controller", func() (bool, string) {
		var state []string
		controller = -2
		for _, id := range survivors {
			md, err := pin(c.Member(id).Addr).metadata(ctx)
			if err != nil {
				return false, err.Error()
			}
			state = append(state, fmt.Sprintf("broker %d: controller %d, brokers %v", id, md.ControllerID, brokerIDs(md)))
			if md.ControllerID == -1 || md.ControllerID == old || !slices.Equal(brokerIDs(md), survivors) {
				return false, strings.Join(state, "; ")
			}
			if controller != -2 && controller != md.ControllerID {
				return false, strings.Join(state, "; ")
			}
			controller = md.ControllerID
		}
		return true, ""
	})
	t.Logf("controller %d killed; broker %d elected after %v (session timeout %v)", old, controller, took, c.SessionTimeout)
	if limit := c.SessionTimeout + 2*time.Second; time.Since(killed) > limit {
		t.Errorf("a new controller took %v after the old one died, want at most the session timeout %v and 2 s", took, c.SessionTimeout)
	}
	if !slices.Contains(survivors, controller) {
		t.Fatalf("controller %d is not a survivor %v", controller, survivors)
	}

	addr := c.Member(survivors[0]).Addr
	if err := <-early; err != nil {
		t.Errorf("CreateTopics sent while the dead controller's session lingered: %v", err)
	}
	if ls := awaitLeaders(t, addr, "during-failover", func(ls []int32) bool { return !slices.Contains(ls, -1) }); slices.Contains(ls, old) {
		t.Errorf("leaders of the topic created during the failover: %v, with the dead broker %d", ls, old)
	}
	leaders := createClusterTopic(t, addr, "after-failover", 4)
	if slices.Contains(leaders, old) || len(countLeaders(leaders)) != 2 {
		t.Errorf("leaders of a topic created after the failover: %v, want both survivors %v and never %d", leaders, survivors, old)
	}
	produced := produceFranzSeq(t, addr, "after-failover", "after", 40)
	checkExactlyOnce(t, "after the failover", produced, consumeSeq(t, addr, "after-failover", 40), endOffsets(t, addr, "after-failover", 4))

	c.Restart(old)
	if got := awaitCluster(t, c, 1, 2, 3); got != controller {
		t.Errorf("after broker %d rejoined the controller is %d, want %d still", old, got, controller)
	}
}

// consumeSeq reads n records of topic from the start with a franz-go
// direct consumer, in the order it gets them.
func consumeSeq(t testing.TB, addr, topic string, n int) []seqRec {
	t.Helper()
	var out []seqRec
	for _, r := range consumeFranz(t, addr, topic, n) {
		out = append(out, seqRec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
	}
	return out
}

// weirBin is cmd/weir, built on first use (weirBinary) for the tests that
// SIGKILL a real `weir broker` process; TestMain removes it.
var (
	weirOnce   sync.Once
	weirDir    string
	weirBin    string
	weirBinErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if weirDir != "" {
		os.RemoveAll(weirDir)
	}
	os.Exit(code)
}

func weirBinary(t testing.TB) string {
	t.Helper()
	weirOnce.Do(func() {
		if weirDir, weirBinErr = os.MkdirTemp("", "weir-e2e-bin-"); weirBinErr != nil {
			return
		}
		weirBin = filepath.Join(weirDir, "weir")
		out, err := exec.Command("go", "build", "-o", weirBin, "github.com/weir-broker/weir/cmd/weir").CombinedOutput()
		if err != nil {
			weirBinErr = fmt.Errorf("go build cmd/weir: %w\n%s", err, out)
		}
	})
	if weirBinErr != nil {
		t.Fatal(weirBinErr)
	}
	return weirBin
}

// procBroker is a `weir broker` subprocess joined to a test cluster, on a
// data directory and address kept across restarts.
type procBroker struct {
	t    testing.TB
	id   int32
	dir  string
	addr string
	zk   string
	p    *brokerproc.Process
}

func newProcBroker(t testing.TB, c *brokertest.Cluster, id int32) *procBroker {
	b := &procBroker{t: t, id: id, dir: t.TempDir(), addr: brokertest.FreeAddr(t), zk: c.ZK.ConnectString()}
	t.Cleanup(func() {
		if b.p != nil {
			if err := b.p.Stop(); err != nil {
				t.Errorf("broker %d: %v", id, err)
			}
		}
	})
	b.start()
	return b
}

// start starts the broker and returns once it listens (it may still be
// joining the cluster).
func (b *procBroker) start() {
	b.t.Helper()
	p, err := brokerproc.Start(testContext(b.t), brokerproc.Options{
		Weir: weirBinary(b.t), DataDir: b.dir, Listen: b.addr, DeathSignal: syscall.SIGKILL,
		Flags: []string{"--broker-id", fmt.Sprint(b.id), "--zookeeper", b.zk,
			"--zookeeper-session-timeout", brokertest.DefaultSessionTimeout.String(),
			"--group-initial-rebalance-delay", "0", "--group-min-session-timeout", "100ms", "--log-level", "info"},
	})
	if err != nil {
		b.t.Fatalf("broker %d: %v", b.id, err)
	}
	b.p = p
}

// kill SIGKILLs the broker: no shutdown at all, its ZooKeeper session left
// to expire and its logs unsealed.
func (b *procBroker) kill() {
	b.t.Helper()
	if err := b.p.Cmd.Process.Kill(); err != nil {
		b.t.Fatal(err)
	}
	<-b.p.Exited()
	b.t.Logf("broker %d SIGKILLed; its output:\n%s", b.id, b.p.Output())
	b.p = nil
}

// collect polls a franz-go consumer until it has n records in all.
func collect(t testing.TB, cl *kgo.Client, got *[]seqRec, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for len(*got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer: %d of %d records before the deadline", len(*got), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("consumer: fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			*got = append(*got, seqRec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		})
	}
}

// TestClusterBrokerKilled: broker 3, a `weir broker` process, is SIGKILLed.
// Once ZooKeeper expires its session its partitions have no leader
// (LEADER_NOT_AVAILABLE, leader -1) while the others are served. Restarted
// on the same data directory and address it leads them again, with every
// record acknowledged before the kill; a consumer and a producer that kept
// running resume, nothing lost, nothing twice. Killed again and restarted at
// once, within its old session, it waits for the old registration to expire
// (and says so) instead of failing.
func TestClusterBrokerKilled(t *testing.T) {
	zktest.Require(t)
	weirBinary(t) // before the cluster: a build on a small machine starves ZooKeeper sessions
	c := brokertest.StartCluster(t, 2)
	b3 := newProcBroker(t, c, 3)
	awaitCluster(t, c, 1, 2, 3)
	boot := c.Member(1).Addr
	const topic, partitions = "cluster-kill", 6
	leaders := createClusterTopic(t, boot, topic, partitions)
	var on3 []int32
	for p, l := range leaders {
		if l == 3 {
			on3 = append(on3, int32(p))
		}
	}
	if len(on3) != 2 {
		t.Fatalf("leaders %v: want broker 3 to lead two partitions", leaders)
	}

	group, _ := groupCoordinatedBy(t, boot, topic+"-g", func(id int32) bool { return id == 3 })

	producer := newClient(t, boot, kgo.DefaultProduceTopic(topic))
	consumer := newClient(t, boot, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	var produced, consumed []seqRec
	produced = append(produced, produceFranzSeqWith(t, producer, topic, "rec", 0, 200)...)
	collect(t, consumer, &consumed, len(produced))
	// A group coordinated by broker 3 consumes these and commits.
	member := func() *kgo.Client {
		return newClient(t, boot, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond))
	}
	m := member()
	var groupGot []seqRec
	collect(t, m, &groupGot, len(produced))
	if err := m.CommitUncommittedOffsets(testContext(t)); err != nil {
		t.Fatalf("group %s: commit: %v", group, err)
	}
	m.Close()
	committed := committedOffsets(t, boot, group, topic, partitions)
	if ends := endOffsets(t, boot, topic, partitions); !slices.Equal(committed, ends) {
		t.Fatalf("group %s committed %v, want the end offsets %v", group, committed, ends)
	}
	firstBatch := len(produced)
	produced = append(produced, produceFranzSeqWith(t, producer, topic, "rec", 200, 200)...)

	b3.kill()
	ctx := testContext(t)
	p1 := pin(boot)
	took := eventually(t, waitTimeout, "broker 3's partitions to lose their leader", func() (bool, string) {
		md, err := p1.metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		ls, codes := partitionLeaders(md, topic)
		if ls == nil || slices.Contains(brokerIDs(md), 3) {
			return false, fmt.Sprintf("brokers %v, leaders %v", brokerIDs(md), ls)
		}
		for p, l := range ls {
			want, code := leaders[p], int16(0)
			if slices.Contains(on3, int32(p)) {
				want, code = -1, kerr.LeaderNotAvailable.Code
			}
			if l != want || codes[p] != code {
				return false, fmt.Sprintf("partition %d: leader %d, %v", p, l, kerr.ErrorForCode(codes[p]))
			}
		}
		return true, ""
	})
	t.Logf("broker 3's partitions leaderless %v after the kill", took)
	if _, err := findCoordinator(ctx, p1, group); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Errorf("FindCoordinator %s while its coordinator is down: %v, want COORDINATOR_NOT_AVAILABLE", group, err)
	}

	// A producer keeps going: records for the other partitions are
	// acknowledged now, records for broker 3's wait for it.
	manual := newClient(t, boot, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	waiting := make(chan error, 1)
	var pending []*kgo.Record
	for i := range 50 {
		pending = append(pending, &kgo.Record{Partition: on3[i%2], Key: fmt.Appendf(nil, "w%d", i), Value: []byte(seqValue("rec", 400+i))})
	}
	go func() { waiting <- manual.ProduceSync(testContext(t), pending...).FirstErr() }()
	var others []*kgo.Record
	for p, l := range leaders {
		if l != 3 {
			others = append(others, &kgo.Record{Partition: int32(p), Key: fmt.Appendf(nil, "o%d", p), Value: []byte(seqValue("rec", 450+p))})
		}
	}
	if err := manual.ProduceSync(ctx, others...).FirstErr(); err != nil {
		t.Fatalf("produce to the partitions of live brokers while broker 3 is down: %v", err)
	}
	select {
	case err := <-waiting:
		t.Fatalf("produce to broker 3's partitions while it is down returned %v, want it to wait", err)
	default:
	}

	b3.start()
	awaitLeaders(t, boot, topic, func(ls []int32) bool { return slices.Equal(ls, leaders) })
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("produce held while broker 3 was down: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("produce held while broker 3 was down never finished")
	}
	for _, r := range append(pending, others...) {
		produced = append(produced, seqRec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
	}
	collect(t, consumer, &consumed, len(produced))
	ends := endOffsets(t, boot, topic, partitions)
	checkExactlyOnce(t, "the consumer that kept running", produced, consumed, ends)
	checkExactlyOnce(t, "a new consumer", produced, consumeSeq(t, boot, topic, len(produced)), ends)
	// The group resumes where it committed before the kill.
	m = member()
	groupGot = nil
	collect(t, m, &groupGot, len(produced)-firstBatch)
	m.Close()
	checkExactlyOnceFrom(t, "the group after its coordinator's restart", produced[firstBatch:], groupGot, committed, ends)

	// Killed and restarted at once: its old session still holds broker id 3
	// (so the others still list it, at its address, where the new process
	// accepts connections and answers nothing until it has joined).
	b3.kill()
	b3.start()
	took = eventually(t, waitTimeout, "the restarted broker 3 to answer", func() (bool, string) {
		md, err := pin(b3.addr).metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		ls, _ := partitionLeaders(md, topic)
		return slices.Equal(brokerIDs(md), []int32{1, 2, 3}) && slices.Equal(ls, leaders), fmt.Sprintf("brokers %v, leaders %v", brokerIDs(md), ls)
	})
	t.Logf("broker 3, restarted within its old session, answered after %v", took)
	awaitCluster(t, c, 1, 2, 3)
	awaitLeaders(t, boot, topic, func(ls []int32) bool { return slices.Equal(ls, leaders) })
	if out := b3.p.Output(); !strings.Contains(out, "waiting for it to expire") {
		t.Errorf("broker 3 restarted within its old session without saying it waited for it:\n%s", out)
	}
	produced = append(produced, produceFranzSeqWith(t, producer, topic, "rec", 500, 100)...)
	collect(t, consumer, &consumed, len(produced))
	ends = endOffsets(t, boot, topic, partitions)
	checkExactlyOnce(t, "the consumer after the second kill", produced, consumed, ends)
}

// TestClusterBrokerJoins: a fourth broker joins a running cluster. A
// franz-go client that was already running learns of it from its metadata
// refreshes, and a topic created afterwards puts partitions on it, which
// that client produces to and consumes from.
func TestClusterBrokerJoins(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	boot := c.Member(1).Addr
	cl := newClient(t, boot, kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// kgo keeps the brokers' ids to itself; how many it knows tells enough.
	known := func() int { return len(cl.DiscoveredBrokers()) }
	if err := cl.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the client to know three brokers", func() (bool, string) {
		return known() == 3, fmt.Sprint(known())
	})

	m4 := c.Add()
	awaitCluster(t, c, 1, 2, 3, 4)
	took := eventually(t, waitTimeout, "the running client to learn of broker 4", func() (bool, string) {
		return known() == 4, fmt.Sprint(known())
	})
	t.Logf("the running client knew of broker 4 %v after it joined", took)

	const topic, partitions = "cluster-grown", 8
	leaders := createClusterTopic(t, boot, topic, partitions)
	if n := countLeaders(leaders); len(n) != 4 || n[4] != 2 {
		t.Fatalf("leaders of a topic created with four brokers: %v, want two partitions each, broker 4 included", leaders)
	}
	produced := produceFranzSeqWith(t, cl, topic, "grown", 0, 200)
	on4 := 0
	for _, r := range produced {
		if leaders[r.Partition] == 4 {
			on4++
		}
	}
	if on4 == 0 {
		t.Fatalf("no record went to broker 4's partitions")
	}
	cl.AddConsumeTopics(topic)
	var consumed []seqRec
	collect(t, cl, &consumed, len(produced))
	checkExactlyOnce(t, "through a client that saw broker 4 join", produced, consumed, endOffsets(t, m4.Addr, topic, partitions))
}

// TestClusterZooKeeperOutage: ZooKeeper stops for 10 s. Meanwhile every
// broker keeps serving produce, fetch and metadata for what it leads;
// when ZooKeeper is back (same data, so the sessions survive) a topic can
// be created again. Then broker 2's session is expired from outside: it
// notices, registers again in a new session (its log says so) and leads
// its partitions again, and clients carry on.
func TestClusterZooKeeperOutage(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	const topic, partitions = "cluster-zk", 6
	boot := c.Member(1).Addr
	leaders := createClusterTopic(t, boot, topic, partitions)
	if len(countLeaders(leaders)) != 3 {
		t.Fatalf("leaders %v, want all three brokers", leaders)
	}
	producer := newClient(t, boot, kgo.DefaultProduceTopic(topic))
	consumer := newClient(t, boot, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	var produced, consumed []seqRec
	round := func(what string) {
		t.Helper()
		before := len(produced)
		produced = append(produced, produceFranzSeqWith(t, producer, topic, "zk", len(produced), 60)...)
		hit := map[int32]bool{}
		for _, r := range produced[before:] {
			hit[r.Partition] = true
		}
		if len(hit) != partitions {
			t.Fatalf("%s: 60 records went to partitions %v only", what, hit)
		}
		collect(t, consumer, &consumed, len(produced))
	}
	round("before the outage")

	zk := c.ZK.Servers[0]
	zk.Stop()
	stopped := time.Now()
	// New idempotent producers get their ids from any broker.
	for _, id := range c.IDs() {
		resp, err := pin(c.Member(id).Addr).ask(testContext(t), kmsg.NewPtrInitProducerIDRequest())
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.InitProducerIDResponse).ErrorCode)
		}
		if err != nil {
			t.Errorf("InitProducerID at broker %d while ZooKeeper is down: %v", id, err)
		}
	}
	rounds := 0
	ctx := testContext(t)
	for time.Since(stopped) < 10*time.Second {
		round("while ZooKeeper is down")
		rounds++
		for _, id := range c.IDs() {
			md, err := pin(c.Member(id).Addr).metadata(ctx, topic)
			if err != nil {
				t.Fatalf("metadata from broker %d while ZooKeeper is down: %v", id, err)
			}
			if ls, _ := partitionLeaders(md, topic); !slices.Equal(ls, leaders) || !slices.Equal(brokerIDs(md), []int32{1, 2, 3}) {
				t.Fatalf("metadata from broker %d while ZooKeeper is down: brokers %v, leaders %v; want 1-3 and %v", id, brokerIDs(md), ls, leaders)
			}
		}
	}
	zk.Start()
	t.Logf("%d rounds of produce and fetch over every partition while ZooKeeper was down for %v", rounds, time.Since(stopped).Round(time.Millisecond))
	createClusterTopic(t, c.Member(2).Addr, "after-zk", 3)
	round("after the outage")
	for _, id := range c.IDs() {
		if c.Member(id).Log.Contains("coordination session replaced") {
			t.Errorf("broker %d lost its session in the outage; ZooKeeper keeps sessions across a restart", id)
		}
	}

	// Session expiry, of a broker that is not the controller, then of the
	// controller: each notices, registers again in a new session (and says
	// so), and leads its partitions again; the cluster has a controller.
	expire := func(id int32) {
		t.Helper()
		m := c.Member(id)
		session, passwd, _ := m.Tap.Session()
		if err := zktest.ExpireSession(zk.Addr, session, passwd, 10*time.Second); err != nil {
			t.Fatalf("expire broker %d's session: %v", id, err)
		}
		took := eventually(t, waitTimeout, fmt.Sprintf("broker %d to register again in a new session", id), func() (bool, string) {
			return m.Log.Contains("coordination session replaced; registering again", fmt.Sprintf("old=%d", session)) &&
				m.Log.Contains("registered in the cluster", fmt.Sprintf("broker=%d", id)), "not logged"
		})
		if now, _, _ := m.Tap.Session(); now == session {
			t.Errorf("broker %d is still in session %#x", id, session)
		}
		t.Logf("broker %d registered again %v after its session %#x was expired", id, took, session)
		awaitCluster(t, c, 1, 2, 3)
		awaitLeaders(t, boot, topic, func(ls []int32) bool { return slices.Equal(ls, leaders) })
		round(fmt.Sprintf("after broker %d's session expired", id))
	}
	controller := awaitCluster(t, c, 1, 2, 3)
	expire(controller%3 + 1)
	expire(controller)
	createClusterTopic(t, boot, "after-expiry", 3)
	checkExactlyOnce(t, "the consumer that ran throughout", produced, consumed, endOffsets(t, boot, topic, partitions))
}

// TestClusterBrokerIDInUse: a broker started with the id of a live broker,
// at another address, refuses to start at once, with an error naming the id
// and the address that holds it; the live broker is unaffected.
func TestClusterBrokerIDInUse(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	awaitCluster(t, c, 1, 2)
	live := c.Member(2).Addr
	cfg := c.Config(2, t.TempDir(), nil)
	cfg.Listen = "127.0.0.1:0"
	begin := time.Now()
	b, err := broker.Start(cfg)
	if err == nil {
		b.Close()
		t.Fatal("a second broker 2 started while broker 2 is live")
	}
	took := time.Since(begin)
	msg := err.Error()
	if !errors.Is(err, node.ErrBrokerIDInUse) || !strings.Contains(msg, "broker 2") || !strings.Contains(msg, live) {
		t.Errorf("second broker 2: %q, want ErrBrokerIDInUse naming broker 2 and %s", msg, live)
	}
	if took > c.SessionTimeout {
		t.Errorf("second broker 2 took %v to refuse, want at once (it is not a restart of the live one)", took)
	}
	t.Logf("refused in %v: %v", took, err)
	awaitCluster(t, c, 1, 2)
	md, err := pin(c.Member(1).Addr).metadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, mb := range md.Brokers {
		if mb.NodeID == 2 && fmt.Sprintf("%s:%d", mb.Host, mb.Port) != live {
			t.Errorf("broker 2 is at %s:%d in metadata, want %s still", mb.Host, mb.Port, live)
		}
	}
}
