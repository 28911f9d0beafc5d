package transport

import (
	"context"
	"fmt"
	"slices"
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
// per read of the whole partition at each level, and the median of the
// ratio of read_committed's throughput to read_uncommitted's, op by op. The
// issue's goal: at least 0.95.
//
//	go test ./transport -run '^$' -bench BenchmarkConsumeIsolation -benchtime 20x
func BenchmarkConsumeIsolation(b *testing.B) {
	br := startBroker(b, withoutTxnVerification)
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
	read := func(level kgo.IsolationLevel) time.Duration {
		cl := kgoClient(b, br, kgo.FetchIsolationLevel(level),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tx": {0: kgo.NewOffset().AtStart()}}))
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
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
		if n != total {
			b.Fatal(fmt.Sprintf("read %d records, want %d", n, total))
		}
		return time.Since(start)
	}
	// Each op reads the partition once at each level, in alternating
	// order, so that both see the same load; the ratio is taken op by op.
	var unc, com time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var u, c time.Duration
		if i%2 == 0 {
			u, c = read(kgo.ReadUncommitted()), read(kgo.ReadCommitted())
		} else {
			c, u = read(kgo.ReadCommitted()), read(kgo.ReadUncommitted())
		}
		unc, com = unc+u, com+c
		ratios = append(ratios, u.Seconds()/c.Seconds())
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(total)*float64(b.N)/unc.Seconds(), "uncommitted-records/s")
	b.ReportMetric(float64(total)*float64(b.N)/com.Seconds(), "committed-records/s")
	b.ReportMetric(ratios[len(ratios)/2], "committed/uncommitted")
}

// BenchmarkMarkerVisibility: the time from a commit marker's append (node
// WriteTxnMarker called) to the record of its transaction reaching a
// read_committed franz-go consumer long-polling the partition, one
// transaction at a time; median and p99 over b.N transactions.
//
//	go test ./transport -run '^$' -bench BenchmarkMarkerVisibility -benchtime 500x
func BenchmarkMarkerVisibility(b *testing.B) {
	br := startBroker(b, withoutTxnVerification)
	br.createTopic(b, "lag", 1, nil)
	cl := kgoClient(b, br, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(5*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"lag": {0: kgo.NewOffset().AtStart()}}))
	got := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			for range fs.NumRecords() {
				got <- struct{}{}
			}
		}
	}()
	lags := make([]time.Duration, 0, b.N)
	const id = 500
	b.ResetTimer()
	for i := range b.N {
		opts := record.DefaultBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = id, 0, int32(i), true
		bt, err := record.Build(opts, []record.Record{{Value: []byte("v"), Timestamp: 1_700_000_000_000}})
		if err != nil {
			b.Fatal(err)
		}
		br.produce(b, "lag", 0, bt)
		start := time.Now()
		if err := br.node.WriteTxnMarker(ctx, logs.Marker{ProducerID: id, Commit: true}, "lag", 0); err != nil {
			b.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(time.Minute):
			b.Fatalf("transaction %d never became visible", i)
		}
		lags = append(lags, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-ms")
}
