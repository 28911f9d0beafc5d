package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/record"
)

// BenchmarkConsumeIsolation: a franz-go consumer reading a partition of
// committed transactions from the start (200 transactions of 10 batches of
// 50 records of 100 bytes, from 4 producers in turn, each ended by its
// commit marker), with read_uncommitted and with read_committed; records/s
// per read of the whole partition. The goal: read_committed at
// least 0.95x read_uncommitted.
//
//	go test ./transport -run '^$' -bench BenchmarkConsumeIsolation -benchtime 20x
func BenchmarkConsumeIsolation(b *testing.B) {
	br := startBroker(b)
	br.createTopic(b, "tx", 1, nil)
	const (
		txns, batches, perBatch, producers = 200, 10, 50, 4
	)
	seq := map[int64]int32{}
	val := make([]byte, 100)
	recs := make([]record.Record, perBatch)
	for i := range recs {
		recs[i] = record.Record{Value: val, Timestamp: 1_700_000_000_000}
	}
	for i := range txns {
		id := int64(100 + i%producers)
		for range batches {
			opts := record.DefaultBuildOptions()
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = id, 0, seq[id], true
			bt, err := record.Build(opts, recs)
			if err != nil {
				b.Fatal(err)
			}
			br.produce(b, "tx", 0, bt)
			seq[id] += perBatch
		}
		if err := br.node.WriteTxnMarker(context.Background(), logs.Marker{ProducerID: id, Commit: true}, "tx", 0); err != nil {
			b.Fatal(err)
		}
	}
	const total = txns * batches * perBatch
	for _, level := range []struct {
		name string
		opt  kgo.IsolationLevel
	}{{"read_uncommitted", kgo.ReadUncommitted()}, {"read_committed", kgo.ReadCommitted()}} {
		b.Run(level.name, func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				cl := kgoClient(b, br, kgo.FetchIsolationLevel(level.opt),
					kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tx": {0: kgo.NewOffset().AtStart()}}))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				start := time.Now()
				n := 0
				for n < total {
					fs := cl.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						b.Fatalf("read %d of %d records: %v", n, total, err)
					}
					fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
					n += fs.NumRecords()
				}
				elapsed += time.Since(start)
				cancel()
				cl.Close()
				if n != total {
					b.Fatal(fmt.Sprintf("read %d records, want %d", n, total))
				}
			}
			b.ReportMetric(float64(total)*float64(b.N)/elapsed.Seconds(), "records/s")
		})
	}
}
