package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

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

func TestMain(m *testing.M) {
	code := m.Run()
	brokertest.RemoveWeirBinary()
	os.Exit(code)
}

// weirBinary is cmd/weir, built on first use for the tests that run real
// processes.
func weirBinary(t testing.TB) string { return brokertest.WeirBinary(t) }

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

// terminate stops the broker with SIGTERM (a controlled shutdown: the
// controller moves its leaderships away first) and waits for it to exit
// cleanly.
func (b *procBroker) terminate() {
	b.t.Helper()
	begin := time.Now()
	if err := b.p.Stop(); err != nil {
		b.t.Fatalf("broker %d: SIGTERM: %v", b.id, err)
	}
	b.t.Logf("broker %d stopped by SIGTERM in %v; its output:\n%s", b.id, time.Since(begin), b.p.Output())
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
	if !b3.p.Logged("waiting for it to expire") {
		t.Errorf("broker 3 restarted within its old session without saying it waited for it:\n%s", b3.p.Output())
	}
	produced = append(produced, produceFranzSeqWith(t, producer, topic, "rec", 500, 100)...)
	collect(t, consumer, &consumed, len(produced))
	ends = endOffsets(t, boot, topic, partitions)
	checkExactlyOnce(t, "the consumer after the second kill", produced, consumed, ends)
}
