package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/txn"
	"github.com/weir-broker/weir/node"
)

// TestTxnGuardFranz: KIP-890 part 1's guard with franz-go's transactional
// producer. Its first produce of a transaction is held between the
// coordinator's yes and the append while the transaction aborts (the
// producer's own EndTxn abort, as after a request timeout) and its marker
// is written: the late batch is refused with INVALID_TXN_STATE, and the
// partition's last stable offset is its high watermark (without the
// guard it would stay at the late batch forever). Then a new incarnation
// runs three transactions of several produce requests per partition
// (committed, aborted, committed): the coordinator is asked once per
// transaction and partition, a read_committed consumer reads exactly the
// committed records, and no transaction hangs.
func TestTxnGuardFranz(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu         sync.Mutex
		asked      []string // topic/partition of every verification the coordinator passed
		abortFirst atomic.Bool
	)
	n, addr := startServedWith(t, memstore.NewServer(), 1, func(n *node.Node) {
		n.WrapTxnVerifier(func(verify node.TxnVerifier) node.TxnVerifier {
			return func(ctx context.Context, id string, pid int64, epoch int16, topic string, p int32) error {
				if err := verify(ctx, id, pid, epoch, topic, p); err != nil {
					return err
				}
				mu.Lock()
				asked = append(asked, fmt.Sprintf("%s/%d", topic, p))
				mu.Unlock()
				if abortFirst.CompareAndSwap(true, false) {
					abortBetween(ctx, t, n, id, pid, epoch)
				}
				return nil
			}
		})
	})
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateTopic(ctx, node.CreateTopic{Name: "out", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	producer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("guard"), kgo.DefaultProduceTopic("out"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	stable := func(what string, want [2]int64) {
		t.Helper()
		a := kadm.NewClient(adm)
		hw, err := a.ListEndOffsets(ctx, "out")
		if err != nil {
			t.Fatal(err)
		}
		lso, err := a.ListCommittedOffsets(ctx, "out")
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			h, _ := hw.Lookup("out", p)
			l, _ := lso.Lookup("out", p)
			if h.Err != nil || l.Err != nil || h.Offset != want[p] || l.Offset != h.Offset {
				t.Fatalf("%s: out/%d: high watermark %d (%v), last stable offset %d (%v); want both %d",
					what, p, h.Offset, h.Err, l.Offset, l.Err, want[p])
			}
		}
	}

	cl := producer()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	abortFirst.Store(true)
	err = cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("late")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("produce whose transaction aborted after its verification: %v, want INVALID_TXN_STATE", err)
	}
	if abortFirst.Load() {
		t.Fatal("the verification hook never ran")
	}
	stable("after the late batch", [2]int64{1, 0}) // out/0 holds the abort marker only
	cl.Close()

	mu.Lock()
	asked = nil
	mu.Unlock()
	cl = producer()
	defer cl.Close()
	var want []string
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			for p := range int32(2) {
				v := fmt.Sprintf("t%d-%d-%d", i, p, j)
				if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatalf("transaction %d: %v", i, err)
				}
				if commit {
					want = append(want, v)
				}
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end of transaction %d: %v", i, err)
		}
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	slices.Sort(got)
	if wantAsked := []string{"out/0", "out/0", "out/0", "out/1", "out/1", "out/1"}; !slices.Equal(got, wantAsked) {
		t.Errorf("coordinator asked about %v for 3 transactions of 3 produces per partition; want %v", got, wantAsked)
	}
	// Each partition: 3 transactions of 3 records and a marker (out/0 also
	// the first abort marker).
	stable("after three transactions", [2]int64{13, 12})

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"out": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var read []string
	for len(read) < len(want) && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
	}
	slices.Sort(read)
	slices.Sort(want)
	if !slices.Equal(read, want) {
		t.Fatalf("read_committed read %v; want %v", read, want)
	}
}

// abortBetween aborts producer pid's transaction id from inside a
// verification, after the coordinator's yes and before the append, and
// returns once the abort markers are written.
func abortBetween(ctx context.Context, t *testing.T, n *node.Node, id string, pid int64, epoch int16) {
	if err := n.EndTxn(ctx, id, pid, epoch, false); err != nil {
		t.Errorf("abort between verification and append: %v", err)
		return
	}
	for ctx.Err() == nil {
		d, err := n.DescribeTransaction(ctx, id)
		if err == nil && d.State == txn.CompleteAbort {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("the abort did not complete: %v", ctx.Err())
}
