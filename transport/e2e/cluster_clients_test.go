package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

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
