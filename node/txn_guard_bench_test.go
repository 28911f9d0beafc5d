package node_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
)

// BenchmarkTxnProduceVerify: produce requests of a transactional producer
// (one batch of 10 records of 100 bytes each, acks=1) to a partition. With
// brokers=2 one broker leads it while the other coordinates the
// transaction, so a verification is an AddPartitionsToTxn v4 VerifyOnly
// round trip between them; with brokers=1 it is a call to the local
// coordinator. verify=first is Produce as it is: only the transaction's first
// request to the partition asks the coordinator (the guard makes that
// safe); verify=each adds the round trip (node TxnVerify) before every
// request, as every transactional produce paid before the guard.
func BenchmarkTxnProduceVerify(b *testing.B) {
	for _, brokers := range []int32{1, 2} {
		b.Run(fmt.Sprintf("brokers=%d", brokers), func(b *testing.B) { benchTxnProduceVerify(b, brokers) })
	}
}

func benchTxnProduceVerify(b *testing.B, brokers int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := memstore.NewServer()
	nodes := map[int32]*node.Node{}
	for i := range brokers {
		nodes[i+1] = startServed(b, srv, i+1)
	}
	const id = "bench"
	var coordID int32
	retry(b, ctx, func() error {
		c, err := nodes[1].FindCoordinator(ctx, node.CoordinatorTransaction, id)
		coordID = c.ID
		return err
	})
	coord, leader := nodes[coordID], nodes[coordID]
	if brokers == 2 {
		leader = nodes[3-coordID]
	}
	if err := coord.AwaitTxnLoaded(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := coord.CreateTopic(ctx, node.CreateTopic{Name: "out", Partitions: 2, ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	pid, epoch, err := coord.InitTransactionalProducerID(ctx, id, 10*time.Minute, -1, -1)
	if err != nil {
		b.Fatal(err)
	}
	retry(b, ctx, func() error {
		errs, err := coord.AddPartitionsToTxn(ctx, id, pid, epoch, []node.TopicPartition{{Topic: "out", Partition: 0}, {Topic: "out", Partition: 1}})
		return errors.Join(append(errs, err)...)
	})
	if err := leader.AwaitTxnLoaded(ctx); err != nil {
		b.Fatal(err)
	}
	seq := int32(0)
	batch := func() []byte {
		opts := record.DefaultBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, true
		recs := make([]record.Record, 10)
		for i := range recs {
			recs[i] = record.Record{Value: make([]byte, 100), Timestamp: time.Now().UnixMilli()}
		}
		out, err := record.Build(opts, recs)
		if err != nil {
			b.Fatal(err)
		}
		seq += int32(len(recs))
		return out
	}
	tid := id
	produce := func(p int32, records []byte) error {
		req := node.ProduceRequest{TransactionalID: &tid, Acks: 1,
			Partitions: []node.ProducePartition{{Topic: "out", Partition: p, Records: records}}}
		leader.Produce(ctx, &req)
		return req.Partitions[0].Err
	}
	// The partition the leader leads; its first batch opens the
	// transaction there (the leader may not see the topic at once).
	part := int32(-1)
	first := batch()
	retry(b, ctx, func() error {
		var errs []error
		for p := range int32(2) {
			err := produce(p, append([]byte(nil), first...))
			if err == nil {
				part = p
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	for _, mode := range []string{"first", "each"} {
		b.Run("verify="+mode, func(b *testing.B) {
			batches := make([][]byte, b.N)
			for i := range batches {
				batches[i] = batch()
			}
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for i := range b.N {
				if mode == "each" {
					if err := leader.TxnVerify(ctx, id, pid, epoch, "out", part); err != nil {
						b.Fatal(err)
					}
				}
				if err := produce(part, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system, both
// brokers and the benchmark).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// retry calls f until it returns nil (the brokers learn of new topics and
// leaders asynchronously), failing tb at ctx's end.
func retry(tb testing.TB, ctx context.Context, f func() error) {
	tb.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("%v (%v)", err, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
}
