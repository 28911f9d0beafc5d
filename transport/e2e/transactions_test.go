package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// etlRecords is how many records TestTransactETLBrokerKilled copies: enough
// for several transactions of every member on either side of the kill,
// small enough for CI.
const etlRecords = 3000

// etlPerTxn bounds the records of one transaction (PollRecords), so that
// the copy takes many transactions.
const etlPerTxn = 50

// TestTransactETLBrokerKilled is exactly-once end to end: members of a
// consumer group copy topic etl-in to etl-out with franz-go's
// GroupTransactSession (consume read_committed, produce, commit the offsets
// in the same transaction), while a paced producer keeps writing etl-in.
// Members join and leave (a third joins after a sixth of the input is
// copied, the first leaves after the broker restarts), and the broker, a
// `weir broker` process, is SIGKILLed once a third of the input is copied
// and restarted on the same data directory and address. Once the group has
// committed every input offset, etl-out read with read_committed holds every
// record of etl-in exactly once, each in the partition it came from and in
// its order.
func TestTransactETLBrokerKilled(t *testing.T) {
	dir, addr := t.TempDir(), brokertest.FreeAddr(t)
	bin := weirBinary(t) // built on first use: before any deadline starts
	start := func() *brokerproc.Process {
		t.Helper()
		p, err := brokerproc.Start(testContext(t), brokerproc.Options{
			Weir: bin, DataDir: dir, Listen: addr, DeathSignal: syscall.SIGKILL,
			Flags: []string{"--group-initial-rebalance-delay", "0", "--group-min-session-timeout", "100ms", "--log-level", "info"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	proc := start()
	t.Cleanup(func() {
		if proc != nil {
			if err := proc.Stop(); err != nil {
				t.Errorf("broker: %v", err)
			}
		}
	})

	const partitions = 3
	adm := kadm.NewClient(brokertest.Client(t, addr))
	for _, topic := range []string{"etl-in", "etl-out"} {
		if _, err := adm.CreateTopic(testContext(t), partitions, 1, nil, topic); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
	}

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()

	// The input: a paced idempotent producer, batches of 10 records every
	// 10 ms (at least 3 s in all), so that input still arrives and members
	// are mid-transaction when the kill comes. The pacing shapes the load; nothing waits on
	// it.
	var produced atomic.Int64
	produceErr := make(chan error, 1)
	go func() {
		cl := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < etlRecords; {
			var rs []*kgo.Record
			for ; i < etlRecords && len(rs) < 10; i++ {
				rs = append(rs, &kgo.Record{Topic: "etl-in", Key: fmt.Appendf(nil, "k%05d", i), Value: fmt.Appendf(nil, "v%05d", i)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				produceErr <- fmt.Errorf("producing etl-in: %w", err)
				return
			}
			produced.Add(int64(len(rs)))
			select {
			case <-tick.C:
			case <-ctx.Done():
				produceErr <- ctx.Err()
				return
			}
		}
		produceErr <- nil
	}()

	// The members.
	type member struct {
		stop context.CancelFunc
		done chan struct{}
	}
	var (
		mu        sync.Mutex
		ends      = map[string]int{} // "committed", "aborted", an End's error
		memberErr []error
	)
	startMember := func(id int) *member {
		mctx, stop := context.WithCancel(ctx)
		m := &member{stop: stop, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			s, err := kgo.NewGroupTransactSession(
				kgo.SeedBrokers(addr),
				kgo.ClientID(fmt.Sprintf("etl-member-%d", id)),
				kgo.TransactionalID(fmt.Sprintf("etl-%d", id)),
				kgo.TransactionTimeout(10*time.Second),
				kgo.ConsumerGroup("etl"),
				kgo.ConsumeTopics("etl-in"),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RequireStableFetchOffsets(),
				kgo.SessionTimeout(3*time.Second),
				kgo.HeartbeatInterval(300*time.Millisecond),
				kgo.FetchMaxWait(100*time.Millisecond),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
			)
			if err != nil {
				mu.Lock()
				memberErr = append(memberErr, fmt.Errorf("member %d: %w", id, err))
				mu.Unlock()
				return
			}
			defer s.Close()
			for mctx.Err() == nil {
				fs := s.PollRecords(mctx, etlPerTxn)
				if mctx.Err() != nil {
					return
				}
				fs.EachError(func(topic string, p int32, err error) { t.Logf("member %d: fetch %s/%d: %v", id, topic, p, err) })
				if err := s.Begin(); err != nil {
					mu.Lock()
					memberErr = append(memberErr, fmt.Errorf("member %d: Begin: %w", id, err))
					mu.Unlock()
					return
				}
				var failed atomic.Pointer[error] // the first produce error of this transaction
				fs.EachRecord(func(r *kgo.Record) {
					out := &kgo.Record{Topic: "etl-out", Partition: r.Partition, Key: r.Key, Value: r.Value}
					s.Produce(mctx, out, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.CompareAndSwap(nil, &err)
						}
					})
				})
				committed, err := s.End(mctx, kgo.TryCommit)
				if e := failed.Load(); e != nil && mctx.Err() == nil {
					t.Logf("member %d: producing to etl-out failed, so the transaction aborted: %v", id, *e)
				}
				mu.Lock()
				switch {
				case err != nil:
					ends[err.Error()]++
				case committed:
					ends["committed"]++
				default:
					ends["aborted"]++
				}
				mu.Unlock()
			}
		}()
		return m
	}

	committedTotal := func() int64 {
		lag, err := adm.Lag(ctx, "etl")
		if err != nil {
			return -1
		}
		var n int64
		for _, l := range lag["etl"].Lag["etl-in"] {
			if l.Commit.At > 0 {
				n += l.Commit.At
			}
		}
		return n
	}
	members := []*member{startMember(0), startMember(1)}
	waitForLong(t, "the group to copy a sixth of the input", func() bool { return committedTotal() >= etlRecords/6 })
	members = append(members, startMember(2))
	waitForLong(t, "the group to copy a third of the input", func() bool { return committedTotal() >= etlRecords/3 })

	before := committedTotal()
	if err := proc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-proc.Exited()
	t.Logf("broker SIGKILLed with %d records produced and at least %d committed by the group", produced.Load(), before)
	proc = start()

	waitForLong(t, "the group to copy half of the input after the restart", func() bool { return committedTotal() >= etlRecords/2 })
	members[0].stop()
	<-members[0].done
	if err := <-produceErr; err != nil {
		t.Fatal(err)
	}
	in := brokertest.ListOffsets(t, addr, "etl-in", partitions, -1)
	var total int64
	for _, n := range in {
		total += n
	}
	waitForLong(t, fmt.Sprintf("the group to commit all %d input records", total), func() bool { return committedTotal() == total })
	for _, m := range members[1:] {
		m.stop()
		<-m.done
	}
	mu.Lock()
	t.Logf("transactions ended: %v", ends)
	if len(memberErr) > 0 {
		t.Fatalf("members failed: %v", errors.Join(memberErr...))
	}
	if ends["committed"] < etlRecords/etlPerTxn {
		t.Fatalf("%d transactions committed, want at least %d (%d records, at most %d per transaction): %v",
			ends["committed"], etlRecords/etlPerTxn, etlRecords, etlPerTxn, ends)
	}
	mu.Unlock()

	// A sentinel after every transaction: reading etl-out up to it on every
	// partition reads everything committed.
	sentinels := make([]*kgo.Record, partitions)
	for p := range sentinels {
		sentinels[p] = &kgo.Record{Topic: "etl-out", Partition: int32(p), Key: []byte("sentinel"), Value: []byte("sentinel")}
	}
	if err := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, sentinels...).FirstErr(); err != nil {
		t.Fatalf("producing the sentinels: %v", err)
	}
	want := readPartitions(t, addr, "etl-in", kgo.ReadUncommitted(), func(map[int32][]string) bool { return true }, in)
	got := readPartitions(t, addr, "etl-out", kgo.ReadCommitted(), func(got map[int32][]string) bool {
		for p := range partitions {
			if l := got[int32(p)]; len(l) == 0 || l[len(l)-1] != "sentinel" {
				return false
			}
		}
		return true
	}, nil)
	for p := range partitions {
		g := got[int32(p)]
		g = g[:len(g)-1] // the sentinel
		if !slices.Equal(g, want[int32(p)]) {
			t.Errorf("etl-out/%d read_committed: %d records, want etl-in/%d's %d exactly once in order; first difference at %d",
				p, len(g), p, len(want[int32(p)]), firstDifference(g, want[int32(p)]))
		}
	}
}

// readPartitions reads topic from the start at isolation level until done
// holds for what it read (partition -> values) or, with ends set, until every
// partition's last record before its end offset is read.
func readPartitions(t *testing.T, addr, topic string, level kgo.IsolationLevel, done func(map[int32][]string) bool, ends []int64) map[int32][]string {
	t.Helper()
	cl := brokertest.Client(t, addr, kgo.FetchIsolationLevel(level), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	got := map[int32][]string{}
	next := map[int32]int64{}
	reached := func() bool {
		if ends == nil {
			return done(got)
		}
		for p, end := range ends {
			if next[int32(p)] < end {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(testContext(t), 2*waitTimeout)
	defer cancel()
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: deadline passed with %v records read per partition (next offsets %v)",
				topic, lens(got), next)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("reading %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			next[r.Partition] = r.Offset + 1
		})
	}
	return got
}

func lens(m map[int32][]string) map[int32]int {
	out := map[int32]int{}
	for _, p := range slices.Sorted(maps.Keys(m)) {
		out[p] = len(m[p])
	}
	return out
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// waitForLong is waitFor with room for a broker restart and the rebalances
// and transaction timeouts that follow it.
func waitForLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 4*waitTimeout, what, cond)
}
