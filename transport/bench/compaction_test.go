package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker"
)

// compactionLoad is the fixed load of BenchmarkProduceWhileCleaning.
type compactionLoad struct {
	records   int // produced as fast as the client goes
	keys      int // keys drawn in turn: each is overwritten records/keys times
	size      int // value bytes
	paced     int // records of the paced run, at rate
	rate      int // records/s
	throttle  int64
	segment   int64 // segment.bytes
	cleanerOn time.Duration
}

// compactionRun is what one broker measured under the load.
type compactionRun struct {
	elapsed      time.Duration // the unpaced records, first Produce to last ack
	lat          latencies     // the paced records
	cleanedBytes float64       // segment bytes the cleaner read meanwhile
	passes       float64
	logBytes     int64 // the log's size at the end
}

// BenchmarkProduceWhileCleaning: a keyed producer (acks=all, 100-byte
// values over 10,000 keys, 1 partition, 1 MiB segments, cleanup.policy=compact,
// min.cleanable.dirty.ratio=0.01) against two in-process brokers in turn,
// one whose cleaner looks every 10 ms, so that it cleans all the time the
// producer writes (cleaner=on), and one whose cleaner never comes round
// (cleaner=off), with the cleaner's I/O unbounded (throttle=none) and held
// to 16 and 48 MiB/s (--cleaner-io-max-bytes-per-second). One op is both: 200,000 records as fast as the client goes
// (MB/s of values), then 20,000 records paced at 20,000 records/s (p99 of
// Produce to acknowledgement). Reported per broker: on-MB/s, off-MB/s,
// on-p99-us, off-p99-us, and their ratios in the same op (on/off-MB/s,
// on/off-p99), the bytes the cleaner read while the load ran
// (cleaned-MB) and the log's final size against the off broker's
// (on/off-size): each the median over the ops. The order of the two
// alternates from op to op.
//
//	go test -run '^$' -bench '^BenchmarkProduceWhileCleaning$' -benchtime 3x -count 5 ./transport/bench/
func BenchmarkProduceWhileCleaning(b *testing.B) {
	for _, throttle := range []int64{-1, 16 << 20, 48 << 20} {
		name := "throttle=none"
		if throttle > 0 {
			name = fmt.Sprintf("throttle=%dMiBps", throttle>>20)
		}
		b.Run(name, func(b *testing.B) {
			load := compactionLoad{records: 200_000, keys: 10_000, size: 100, paced: 20_000, rate: 20_000,
				throttle: throttle, segment: 1 << 20, cleanerOn: 10 * time.Millisecond}
			var on, off []compactionRun
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				for j := range 2 {
					if (i+j)%2 == 0 {
						on = append(on, produceCompacted(b, load, true))
					} else {
						off = append(off, produceCompacted(b, load, false))
					}
				}
				b.StartTimer()
			}
			mbps := func(r compactionRun) float64 {
				return float64(load.records*load.size) / 1e6 / r.elapsed.Seconds()
			}
			// Medians over the ops, the ratios taken op by op (the two
			// brokers of an op ran back to back).
			var onMB, offMB, mbRatio, onP99, offP99, p99Ratio, cleaned, sizeRatio []float64
			for k := range on {
				if on[k].passes == 0 {
					b.Fatalf("the cleaner made no pass while the load ran")
				}
				onMB, offMB = append(onMB, mbps(on[k])), append(offMB, mbps(off[k]))
				mbRatio = append(mbRatio, mbps(on[k])/mbps(off[k]))
				onP99, offP99 = append(onP99, on[k].lat.percentile(99)), append(offP99, off[k].lat.percentile(99))
				p99Ratio = append(p99Ratio, on[k].lat.percentile(99)/off[k].lat.percentile(99))
				cleaned = append(cleaned, on[k].cleanedBytes/1e6)
				sizeRatio = append(sizeRatio, float64(on[k].logBytes)/float64(off[k].logBytes))
			}
			b.ReportMetric(median(onMB), "on-MB/s")
			b.ReportMetric(median(offMB), "off-MB/s")
			b.ReportMetric(median(mbRatio), "on/off-MB/s")
			b.ReportMetric(median(onP99), "on-p99-us")
			b.ReportMetric(median(offP99), "off-p99-us")
			b.ReportMetric(median(p99Ratio), "on/off-p99")
			b.ReportMetric(median(cleaned), "cleaned-MB")
			b.ReportMetric(median(sizeRatio), "on/off-size")
		})
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// produceCompacted starts a broker (cleaner on or off), creates the
// compacted topic, runs the load and returns what it measured.
func produceCompacted(tb testing.TB, load compactionLoad, cleaner bool) compactionRun {
	tb.Helper()
	backoff := 24 * time.Hour // never comes round
	if cleaner {
		backoff = load.cleanerOn
	}
	br, err := broker.Start(broker.Config{DataDir: tb.TempDir(), Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
		CleanerBackoff: backoff, CleanerIOMaxBytesPerSecond: load.throttle})
	if err != nil {
		tb.Fatalf("broker.Start: %v", err)
	}
	defer func() {
		if err := br.Close(); err != nil {
			tb.Errorf("broker.Close: %v", err)
		}
	}()
	addr := br.Addr()
	createTopic(tb, addr, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": fmt.Sprint(load.segment),
		"min.cleanable.dirty.ratio": "0.01"})
	before := cleanerCounters(tb, br.MetricsAddr())
	var r compactionRun
	r.elapsed = produceKeyed(tb, addr, load, load.records, 0)
	r.lat = produceKeyedPaced(tb, addr, load)
	after := cleanerCounters(tb, br.MetricsAddr())
	r.cleanedBytes = after["weir_log_cleaner_bytes_read_total"] - before["weir_log_cleaner_bytes_read_total"]
	r.passes = after["weir_log_cleaner_passes_total"] - before["weir_log_cleaner_passes_total"]
	p, err := br.Node().Partition(topic, 0)
	if err != nil {
		tb.Fatal(err)
	}
	r.logBytes = p.Stats().Size
	return r
}

// keyedRecord is record i of the load: key i mod keys.
func keyedRecord(load compactionLoad, i int, v []byte) *kgo.Record {
	return &kgo.Record{Key: fmt.Appendf(nil, "key-%06d", i%load.keys), Value: v}
}

// produceKeyed produces n keyed records (from record from on) as fast as the
// client takes them and returns the time from the first Produce to the last
// acknowledgement.
func produceKeyed(tb testing.TB, addr string, load compactionLoad, n, from int) time.Duration {
	tb.Helper()
	cl := newClient(tb, addr, producerOpts("all")...)
	ctx := context.Background()
	v := value(load.size)
	warmUpKeyed(tb, ctx, cl, v)
	var failures atomic.Int64
	var firstErr atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	start := time.Now()
	for i := range n {
		cl.Produce(ctx, keyedRecord(load, from+i, v), done)
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d records failed, first: %v", f, n, *firstErr.Load())
	}
	cl.Close()
	return elapsed
}

// produceKeyedPaced is producePaced with the load's keyed records.
func produceKeyedPaced(tb testing.TB, addr string, load compactionLoad) latencies {
	tb.Helper()
	cl := newClient(tb, addr, append(producerOpts("all"), kgo.ProducerLinger(0))...)
	defer cl.Close()
	ctx := context.Background()
	v := value(load.size)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, load.paced)
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
	warmUpKeyed(tb, ctx, cl, v)
	interval := time.Second / time.Duration(load.rate)
	start := time.Now()
	for sent := 0; sent < load.paced; {
		due := min(load.paced, int(time.Since(start)/interval)+1)
		for ; sent < due; sent++ {
			r := keyedRecord(load, sent, v)
			r.Context = context.WithValue(ctx, sentKey{}, time.Now())
			cl.Produce(r.Context, r, done)
		}
		if sent < load.paced {
			time.Sleep(time.Until(start.Add(time.Duration(sent) * interval)))
		}
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d records failed, first: %v", f, load.paced, *firstErr.Load())
	}
	slices.Sort(lats)
	return latencies{sorted: lats, elapsed: elapsed}
}

// cleanerCounters scrapes the weir_log_cleaner_* counters of a broker's
// /metrics.
func cleanerCounters(tb testing.TB, metricsAddr string) map[string]float64 {
	tb.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		tb.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, v, ok := metricLine(sc.Text()); ok {
			m[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("metrics: %v", err)
	}
	return m
}

// TestProduceWhileCleaningSetup runs BenchmarkProduceWhileCleaning's body
// once with a tiny load (1 KiB segments, so that even a few hundred records
// roll and the cleaner cleans them): both brokers, the throttle, the
// counters, and a log the cleaner made smaller than the one it left alone.
func TestProduceWhileCleaningSetup(t *testing.T) {
	load := compactionLoad{records: 2000, keys: 20, size: 100, paced: 200, rate: 20_000,
		throttle: 1 << 20, segment: 1024, cleanerOn: 10 * time.Millisecond}
	on := produceCompacted(t, load, true)
	off := produceCompacted(t, load, false)
	if len(on.lat.sorted) != load.paced || on.lat.percentile(99) <= 0 {
		t.Errorf("paced run: %d latencies, p99 %.0f us", len(on.lat.sorted), on.lat.percentile(99))
	}
	if off.passes != 0 || off.logBytes == 0 {
		t.Errorf("cleaner off: %v passes, log %d bytes", off.passes, off.logBytes)
	}
	if on.passes == 0 || on.logBytes >= off.logBytes {
		t.Errorf("cleaner on: %v passes, log %d bytes against %d with the cleaner off", on.passes, on.logBytes, off.logBytes)
	}
	t.Logf("on: %v passes, %.0f bytes cleaned, log %d bytes; off: log %d bytes", on.passes, on.cleanedBytes, on.logBytes, off.logBytes)
}

// warmUpKeyed is warmUp with a keyed record (a compacted topic's records
// have keys).
func warmUpKeyed(tb testing.TB, ctx context.Context, cl *kgo.Client, v []byte) {
	tb.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("warm-up"), Value: v}).FirstErr(); err != nil {
		tb.Fatalf("warm-up record: %v", err)
	}
}
