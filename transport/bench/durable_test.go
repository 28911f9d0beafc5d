package bench_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// durableBatchBytes is the batch size of BenchmarkDurableAcks: what
// kgo.ProducerBatchMaxBytes allows, under max.message.bytes (1048588).
const durableBatchBytes = 1 << 20

// durableRecordSize is the record size of BenchmarkDurableAcks.
const durableRecordSize = 1024

// BenchmarkDurableAcks: eight producers into one partition of weir, with
// acks after the page-cache write and after the covering fsync (group
// commit). See the package doc.
func BenchmarkDurableAcks(b *testing.B) {
	for _, producers := range []int{1, 8} {
		for _, durable := range ordered([]bool{false, true}) {
			name := fmt.Sprintf("batch=1MiB/producers=%d/partitions=1/durable=%v", producers, durable)
			b.Run(name, func(b *testing.B) {
				b.StopTimer()
				addr := startWeir(b)
				createTopic(b, addr, 1, map[string]string{"weir.durable.acks": strconv.FormatBool(durable)})
				perOp := opBytes / durableRecordSize
				r := produceConcurrently(b, b, addr, producers, b.N*perOp)
				reportThroughput(b, durableRecordSize, perOp, r.elapsed)
				b.ReportMetric(r.meanBatchBytes, "B/batch")
			})
		}
	}
}

type concurrentResult struct {
	elapsed        time.Duration
	meanBatchBytes float64 // record bytes per batch, as the client counted them
}

// produceConcurrently produces n records of durableRecordSize with acks=all
// from `producers` clients at once (each its own connection and goroutine,
// each an equal share), in batches of up to durableBatchBytes, and returns
// when every record is acknowledged.
func produceConcurrently(tb testing.TB, tm timer, addr string, producers, n int) concurrentResult {
	tb.Helper()
	var batches, batchBytes atomic.Int64
	hook := batchCounter{&batches, &batchBytes}
	clients := make([]*kgo.Client, producers)
	for i := range clients {
		clients[i] = newClient(tb, addr, append(producerOpts("all"),
			kgo.ProducerBatchMaxBytes(durableBatchBytes),
			kgo.WithHooks(hook))...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := value(durableRecordSize)
	var failures atomic.Int64
	var firstErr atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	for _, cl := range clients {
		warmUp(tb, ctx, cl, v)
	}
	var wg sync.WaitGroup
	flushErrs := make([]error, producers)
	batches.Store(0)
	batchBytes.Store(0)
	tm.StartTimer()
	start := time.Now()
	for i, cl := range clients {
		share := n / producers
		if i < n%producers {
			share++
		}
		wg.Go(func() {
			for range share {
				cl.Produce(ctx, &kgo.Record{Value: v}, done)
			}
			flushErrs[i] = cl.Flush(ctx)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	tm.StopTimer()
	for _, err := range flushErrs {
		if err != nil {
			tb.Fatalf("Flush: %v", err)
		}
	}
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d records failed, first: %v", f, n, *firstErr.Load())
	}
	r := concurrentResult{elapsed: elapsed}
	if nb := batches.Load(); nb > 0 {
		r.meanBatchBytes = float64(batchBytes.Load()) / float64(nb)
	}
	return r
}

// batchCounter counts the batches a client wrote and their record bytes.
type batchCounter struct{ batches, bytes *atomic.Int64 }

func (h batchCounter) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
	h.bytes.Add(int64(m.UncompressedBytes))
}
