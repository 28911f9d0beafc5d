package bench_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// opBytes is how many bytes of record values one op of the throughput
// benchmarks produces or consumes.
const opBytes = 1 << 20

var (
	sizes      = []int{100, 1024}
	partitions = []int32{1, 8}
	acks       = []string{"1", "all"}
)

// producerOpts are the client options for acks: "all" is franz-go's default
// (all in-sync replicas, idempotent); "1" needs idempotence off. Batches are
// not compressed (franz-go's default is snappy), so the brokers store and the
// benchmarks count the same bytes.
func producerOpts(acks string) []kgo.Opt {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if acks == "1" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// produceConfig is one cell of the produce matrix.
type produceConfig struct {
	size       int
	partitions int32
	acks       string
}

func (c produceConfig) name() string {
	return fmt.Sprintf("size=%s/partitions=%d/acks=%s", sizeName(c.size), c.partitions, c.acks)
}

func (c produceConfig) recordsPerOp() int { return opBytes / c.size }

// BenchmarkProduce: a franz-go producer as fast as it goes, against each
// implementation. See the package doc.
func BenchmarkProduce(b *testing.B) {
	for _, size := range sizes {
		for _, parts := range partitions {
			for _, ack := range acks {
				c := produceConfig{size, parts, ack}
				for _, im := range ordered(impls) {
					b.Run(c.name()+"/impl="+im.name, func(b *testing.B) {
						b.StopTimer()
						addr := im.start(b)
						createTopic(b, addr, c.partitions, nil)
						r := produce(b, b, addr, c, b.N*c.recordsPerOp())
						reportThroughput(b, c.size, c.recordsPerOp(), r.elapsed)
						b.ReportMetric(r.meanBatchBytes, "B/batch")
					})
				}
			}
		}
	}
}

// BenchmarkConsume: a franz-go consumer (no group) reading a topic filled
// beforehand, from the start. See the package doc.
func BenchmarkConsume(b *testing.B) {
	for _, size := range sizes {
		for _, parts := range partitions {
			c := produceConfig{size, parts, "all"}
			for _, im := range ordered(impls) {
				b.Run(fmt.Sprintf("size=%s/partitions=%d/impl=%s", sizeName(size), parts, im.name), func(b *testing.B) {
					b.StopTimer()
					addr := im.start(b)
					createTopic(b, addr, c.partitions, nil)
					n := b.N * c.recordsPerOp()
					produce(b, noTimer{}, addr, c, n)
					elapsed := consume(b, b, addr, n)
					reportThroughput(b, c.size, c.recordsPerOp(), elapsed)
				})
			}
		}
	}
}

func reportThroughput(b *testing.B, size, recordsPerOp int, elapsed time.Duration) {
	b.SetBytes(int64(size * recordsPerOp))
	b.ReportMetric(float64(b.N*recordsPerOp)/elapsed.Seconds(), "records/s")
}

// produce sends n records to topic at addr as fast as the client takes them,
// waits for every acknowledgement, and returns the time that took (timed
// with tm too) and the mean size of the batches the client sent, after one
// untimed record (see warmUp). It fails tb if any record fails.
func produce(tb testing.TB, tm timer, addr string, c produceConfig, n int) produceResult {
	tb.Helper()
	var batches, batchBytes atomic.Int64
	cl := newClient(tb, addr, append(producerOpts(c.acks), kgo.WithHooks(batchCounter{&batches, &batchBytes}))...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := value(c.size)
	var failures atomic.Int64
	var firstErr atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	warmUp(tb, ctx, cl, v)
	batches.Store(0)
	batchBytes.Store(0)
	tm.StartTimer()
	start := time.Now()
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: v}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	tm.StopTimer()
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d records failed, first: %v", f, n, *firstErr.Load())
	}
	return produceResult{elapsed: elapsed, meanBatchBytes: float64(batchBytes.Load()) / float64(max(1, batches.Load()))}
}

// produceResult is what a producer run measured.
type produceResult struct {
	elapsed        time.Duration
	meanBatchBytes float64 // record bytes per batch, as the client counted them
}

// consume reads at least n records of topic from the start with a new
// client, and returns the time that took, client start included (timed with
// tm too).
func consume(tb testing.TB, tm timer, addr string, n int) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tm.StartTimer()
	start := time.Now()
	cl := newClient(tb, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			tb.Fatalf("PollFetches after %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(t string, p int32, err error) {
			tb.Fatalf("fetch %s/%d: %v", t, p, err)
		})
		got += fs.NumRecords()
	}
	elapsed := time.Since(start)
	tm.StopTimer()
	return elapsed
}

// pacedRate is the rate of BenchmarkProduceLatency, in records per second.
const pacedRate = 100_000

// BenchmarkProduceLatency: a producer paced at pacedRate; one op is one
// record. See the package doc.
func BenchmarkProduceLatency(b *testing.B) {
	for _, parts := range partitions {
		for _, ack := range acks {
			c := produceConfig{100, parts, ack}
			for _, im := range ordered(impls) {
				b.Run(fmt.Sprintf("rate=%dk/%s/impl=%s", pacedRate/1000, c.name(), im.name), func(b *testing.B) {
					b.StopTimer()
					addr := startBrokerProcess(b, im.name, false).addr
					createTopic(b, addr, c.partitions, nil)
					lat := producePaced(b, b, addr, c, pacedRate, b.N)
					b.ReportMetric(lat.percentile(50), "p50-us")
					b.ReportMetric(lat.percentile(99), "p99-us")
					b.ReportMetric(lat.percentile(99.9), "p999-us")
					b.ReportMetric(float64(b.N)/lat.elapsed.Seconds(), "records/s")
				})
			}
		}
	}
}

// latencies are the acknowledgement latencies of a paced run, sorted.
type latencies struct {
	sorted  []time.Duration
	elapsed time.Duration
}

// percentile returns the p-th percentile in microseconds (nearest rank).
func (l latencies) percentile(p float64) float64 {
	if len(l.sorted) == 0 {
		return 0
	}
	i := int(float64(len(l.sorted))*p/100+0.5) - 1
	i = max(0, min(i, len(l.sorted)-1))
	return float64(l.sorted[i]) / float64(time.Microsecond)
}

// producePaced produces n records at rate records/s: it wakes, produces
// every record due by then, and sleeps a little, so records leave in small
// bursts of at most a few hundred microseconds' worth. A record's latency
// runs from its Produce call to its acknowledgement. The client lingers 0:
// it sends whenever it is not waiting for the previous request.
func producePaced(tb testing.TB, tm timer, addr string, c produceConfig, rate, n int) latencies {
	tb.Helper()
	cl := newClient(tb, addr, append(producerOpts(c.acks), kgo.ProducerLinger(0))...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := value(c.size)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, n)
	var failures atomic.Int64
	var firstErr atomic.Pointer[error]
	done := func(r *kgo.Record, err error) {
		if err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, &err)
			return
		}
		d := time.Since(r.Context.Value(sentKey{}).(time.Time))
		mu.Lock()
		lats = append(lats, d)
		mu.Unlock()
	}
	// Each record carries its send time in its context; a context per
	// record costs both implementations the same.
	interval := time.Second / time.Duration(rate)
	warmUp(tb, ctx, cl, v)
	tm.StartTimer()
	start := time.Now()
	for sent := 0; sent < n; {
		due := min(n, int(time.Since(start)/interval)+1)
		for ; sent < due; sent++ {
			now := time.Now()
			cl.Produce(context.WithValue(ctx, sentKey{}, now), &kgo.Record{Value: v}, done)
		}
		if sent < n {
			time.Sleep(time.Until(start.Add(time.Duration(sent) * interval)))
		}
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	tm.StopTimer()
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d records failed, first: %v", f, n, *firstErr.Load())
	}
	slices.Sort(lats)
	return latencies{sorted: lats, elapsed: elapsed}
}

type sentKey struct{}

// warmUp produces one record and waits for it, so that the timed part does
// not include the client's start: connecting, loading metadata and, for the
// idempotent producer, InitProducerId. The topic gets one record more.
func warmUp(tb testing.TB, ctx context.Context, cl *kgo.Client, v []byte) {
	tb.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
		tb.Fatalf("warm-up record: %v", err)
	}
}
