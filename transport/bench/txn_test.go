package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The transaction benchmarks' shape: 1 KiB records over 8 partitions.
const (
	txnSize       = 1024
	txnPartitions = 8
)

// txnCommits are the commit cadences of BenchmarkTransactionalProduce:
// none is the idempotent producer (the baseline), the others a
// transactional producer committing every 100 ms or every 1,000 records.
var txnCommits = []string{"none", "100ms", "1000records"}

// BenchmarkTransactionalProduce: one franz-go producer as fast as it goes,
// idempotent (commit=none) or transactional, committing on a cadence; one op
// is 1 MiB of record values. The goal: commit=100ms at least 0.9x
// commit=none.
func BenchmarkTransactionalProduce(b *testing.B) {
	for _, commit := range txnCommits {
		for _, im := range ordered(impls) {
			name := fmt.Sprintf("size=%s/partitions=%d/commit=%s/impl=%s", sizeName(txnSize), txnPartitions, commit, im.name)
			b.Run(name, func(b *testing.B) {
				b.StopTimer()
				addr := im.start(b)
				createTopic(b, addr, txnPartitions, nil)
				n := b.N * (opBytes / txnSize)
				elapsed, txns := produceTransactions(b, b, addr, commit, n)
				reportThroughput(b, txnSize, opBytes/txnSize, elapsed)
				if txns > 0 {
					b.ReportMetric(float64(n)/float64(txns), "records/txn")
				}
			})
		}
	}
}

// produceTransactions produces n records of txnSize to topic, idempotent
// (commit "none") or in transactions ended on commit's cadence, and returns
// the time from the first record to the last acknowledgement (the last
// commit included) and how many transactions committed. The client's start
// (InitProducerId, metadata) is not timed.
func produceTransactions(tb testing.TB, tm timer, addr, commit string, n int) (time.Duration, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if commit != "none" {
		opts = append(opts, kgo.TransactionalID("bench-"+commit), kgo.TransactionTimeout(time.Minute))
	}
	cl := newClient(tb, addr, opts...)
	v := value(txnSize)
	var failed error
	var mu sync.Mutex
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
	}
	txns := 0
	begin := func() {
		if commit != "none" {
			if err := cl.BeginTransaction(); err != nil {
				tb.Fatalf("BeginTransaction: %v", err)
			}
		}
	}
	end := func() {
		if err := cl.Flush(ctx); err != nil {
			tb.Fatalf("Flush: %v", err)
		}
		if commit != "none" {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				tb.Fatalf("EndTransaction: %v", err)
			}
			txns++
		}
	}
	// Warm-up: one record (in a transaction of its own), untimed.
	begin()
	cl.Produce(ctx, &kgo.Record{Value: v}, done)
	end()
	txns = 0

	var tick <-chan time.Time
	if commit == "100ms" {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	tm.StartTimer()
	start := time.Now()
	begin()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: v}, done)
		switch {
		case commit == "1000records" && (i+1)%1000 == 0 && i+1 < n:
			end()
			begin()
		case tick != nil:
			select {
			case <-tick:
				end()
				begin()
			default:
			}
		}
	}
	end()
	elapsed := time.Since(start)
	tm.StopTimer()
	if failed != nil {
		tb.Fatalf("a record failed: %v", failed)
	}
	return elapsed, txns
}

// BenchmarkLSOLag: how long a committed transaction takes to become visible
// to a read_committed consumer: a transactional producer writes one record
// per transaction to one partition and commits; a read_committed consumer
// polling the partition notes when each record arrives. One op is one
// transaction; p50-us and p99-us are from the EndTransaction call to the
// record's arrival.
func BenchmarkLSOLag(b *testing.B) {
	for _, im := range ordered(impls) {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.StopTimer()
			addr := im.start(b)
			createTopic(b, addr, 1, nil)
			lags := lsoLag(b, b, addr, b.N)
			b.ReportMetric(lags.percentile(50), "p50-us")
			b.ReportMetric(lags.percentile(99), "p99-us")
		})
	}
}

// lsoLag runs n one-record transactions and returns, sorted, the time from
// each EndTransaction call to a read_committed consumer receiving its
// record.
func lsoLag(tb testing.TB, tm timer, addr string, n int) latencies {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := newClient(tb, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("bench-lso"))
	c := newClient(tb, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(time.Second))
	arrived := make(chan map[int]time.Time, 1)
	go func() {
		got := map[int]time.Time{}
		for len(got) < n+1 && ctx.Err() == nil {
			fs := c.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if i, err := strconv.Atoi(string(r.Value)); err == nil {
					got[i] = now
				}
			})
		}
		arrived <- got
	}()
	txn := func(i int) time.Time {
		if err := p.BeginTransaction(); err != nil {
			tb.Fatalf("BeginTransaction: %v", err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			tb.Fatalf("producing: %v", err)
		}
		at := time.Now()
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			tb.Fatalf("EndTransaction: %v", err)
		}
		return at
	}
	committed := make([]time.Time, n+1)
	committed[0] = txn(0) // warm-up, untimed
	tm.StartTimer()
	start := time.Now()
	for i := 1; i <= n; i++ {
		committed[i] = txn(i)
	}
	got := <-arrived
	elapsed := time.Since(start)
	tm.StopTimer()
	if len(got) < n+1 {
		tb.Fatalf("the read_committed consumer received %d of %d records", len(got), n+1)
	}
	lats := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		lats = append(lats, got[i].Sub(committed[i]))
	}
	slices.Sort(lats)
	return latencies{sorted: lats, elapsed: elapsed}
}
