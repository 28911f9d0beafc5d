package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/node"
)

// TestTxnOffsetGuardFranz: KIP-890 part 1's guard on transactional offset
// commits, with franz-go's GroupTransactSession (consume, produce, commit
// the offsets in the transaction). The session's first TxnOffsetCommit is
// held between the coordinator's yes and the append while the transaction
// aborts (as after a timeout) and its markers are written: the commit is
// refused with INVALID_TXN_STATE, the session does not commit, no
// partition of __consumer_offsets is left with an open transaction (last
// stable offset == high watermark), and the group has no committed offset.
// The session then goes on: it consumes the input again, its transaction
// commits, the group's offset is the input's end and a read_committed
// consumer of the output reads every input record once.
func TestTxnOffsetGuardFranz(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var abortCommit, askedOffsets atomic.Int32
	n, addr := startServedWith(t, memstore.NewServer(), 1, func(n *node.Node) {
		n.WrapTxnVerifier(func(verify node.TxnVerifier) node.TxnVerifier {
			return func(ctx context.Context, id string, pid int64, epoch int16, topic string, p int32) error {
				if err := verify(ctx, id, pid, epoch, topic, p); err != nil {
					return err
				}
				if topic == node.OffsetsTopic {
					askedOffsets.Add(1)
					if abortCommit.CompareAndSwap(1, 0) {
						abortBetween(ctx, t, n, id, pid, epoch)
					}
				}
				return nil
			}
		})
	})
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"in", "out"} {
		if _, err := n.CreateTopic(ctx, node.CreateTopic{Name: topic, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	var input []string
	for i := range 3 {
		v := fmt.Sprint("r", i)
		if err := adm.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		input = append(input, v)
	}
	a := kadm.NewClient(adm)
	committedIn := func() int64 {
		t.Helper()
		offs, err := a.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup("in", 0); ok && o.Err == nil {
			return o.At
		}
		return -1
	}
	stableOffsets := func(what string) {
		t.Helper()
		ti, err := n.Topic(node.OffsetsTopic)
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(len(ti.Partitions)) {
			np, err := n.Partition(node.OffsetsTopic, p)
			if err != nil {
				t.Fatal(err)
			}
			if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != hw {
				t.Fatalf("%s: %s-%d: last stable offset %d, high watermark %d", what, node.OffsetsTopic, p, lso, hw)
			}
		}
	}

	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("etl"), kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	round := func(abort bool) (bool, error) {
		t.Helper()
		var got []string
		for len(got) < len(input) && ctx.Err() == nil {
			s.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if !slices.Equal(got, input) {
			t.Fatalf("session consumed %v, want %v", got, input)
		}
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, v := range got {
			if err := s.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if abort {
			abortCommit.Store(1)
		}
		return s.End(ctx, kgo.TryCommit)
	}

	committed, err := round(true)
	if committed || !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("End with the transaction aborted before its offsets' append: committed %v, %v; want INVALID_TXN_STATE", committed, err)
	}
	if abortCommit.Load() != 0 {
		t.Fatal("the verification hook never ran")
	}
	stableOffsets("after the refused commit")
	if at := committedIn(); at != -1 {
		t.Fatalf("group g committed in/0 at %d after the refused commit, want none", at)
	}

	if committed, err = round(false); err != nil || !committed {
		t.Fatalf("the next transaction: committed %v, %v", committed, err)
	}
	if asked := askedOffsets.Load(); asked != 2 {
		t.Errorf("coordinator asked %d times about the offsets partition for two transactions, want 2", asked)
	}
	stableOffsets("after the committed transaction")
	if at := committedIn(); at != int64(len(input)) {
		t.Fatalf("group g committed in/0 at %d, want %d", at, len(input))
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"out": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var read []string
	hw, err := a.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := hw.Lookup("out", 0)
	for ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
		if p := fs.Records(); len(p) > 0 && p[len(p)-1].Offset+1 >= end.Offset-1 {
			break // the last data record before the commit marker
		}
	}
	if !slices.Equal(read, input) {
		t.Fatalf("read_committed read %v from out; want %v once", read, input)
	}
}
