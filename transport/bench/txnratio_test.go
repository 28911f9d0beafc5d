package bench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/transport/broker"
)

var txnRunTime = flag.Duration("txn-run-time", 3*time.Second,
	"BenchmarkTransactionalRatio: how long each producer run of an op produces (at least 2.5 s: 20 commits at 100 ms)")

var txnLinger = flag.Duration("txn-linger", -1,
	"BenchmarkTransactionalRatio: the producers' ProducerLinger in every mode (negative: franz-go's default, 10ms)")

// txnModes are the producer runs of one BenchmarkTransactionalRatio op:
// the idempotent producer (the baseline), the same producer flushing every
// 100 ms (the client's commit barrier without a transaction: what the
// client costs, not the broker), and the transactional producer committing
// every 100 ms and every 1,000 records.
var txnModes = []string{"none", "flush100ms", "100ms", "1000records"}

// BenchmarkTransactionalRatio: the comparison, interleaved. One
// broker for the whole benchmark; each op runs every mode of txnModes once,
// for -txn-run-time each (one franz-go producer as fast as it goes, 1 KiB
// records over 8 partitions), the first mode rotating from op to op, each run
// on a topic of its own deleted after it (so every run writes to a broker
// in the same state, its page cache not holding the previous runs' dirty
// pages). Reported: the median MB/s of each mode (<mode>-MB/s), the median
// of the per-op ratios to the idempotent run of the same op (<mode>-ratio;
// the goal: 100ms-ratio >= 0.9), and, for the modes that commit or flush,
// the commits per run and the p50/p99 of the Flush and EndTransaction calls
// and of the AddPartitionsToTxn and EndTxn requests (as the client's hooks
// time them, write to read), in ms; each commit's barrier as tail (from the
// last Produce request written before Flush returned: the broker finishing
// alone) and gap (to the first Produce request written after it: the broker
// idle); and the CPU seconds of the whole
// process (client and broker) per GB of each mode (<mode>-cpu-s/GB): a mode
// that costs the same CPU per GB but runs slower waits. ns/op is one round of the four runs.
func BenchmarkTransactionalRatio(b *testing.B) {
	dir := b.TempDir()
	br, err := broker.Start(broker.Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatalf("broker.Start: %v", err)
	}
	defer func() {
		if err := br.Close(); err != nil {
			b.Errorf("broker.Close: %v", err)
		}
	}()
	addr := br.Addr()
	mbs := map[string][]float64{}
	cpu := map[string][]float64{}
	ratios := map[string][]float64{}
	stats := map[string]*txnStats{}
	for _, m := range txnModes {
		stats[m] = &txnStats{}
	}
	b.ResetTimer()
	for i := range b.N {
		got := map[string]float64{}
		for k := range txnModes {
			mode := txnModes[(i+k)%len(txnModes)]
			name := fmt.Sprintf("txn-%s-%d", mode, i)
			createNamedTopic(b, addr, name, txnPartitions)
			c0 := procStatCPU(b, os.Getpid())
			r := produceForDuration(b, addr, name, mode, *txnRunTime)
			c := procStatCPU(b, os.Getpid()) - c0
			deleteNamedTopic(b, addr, dir, name, txnPartitions)
			got[mode] = float64(r.records) * txnSize / 1e6 / r.elapsed.Seconds()
			cpu[mode] = append(cpu[mode], c.Seconds()/(float64(r.records)*txnSize/1e9))
			mbs[mode] = append(mbs[mode], got[mode])
			stats[mode].add(r)
		}
		for _, m := range txnModes[1:] {
			ratios[m] = append(ratios[m], got[m]/got["none"])
		}
		b.Logf("op %d: MB/s %s", i, fmtModes(got))
	}
	b.StopTimer()
	for _, m := range txnModes {
		b.ReportMetric(median(mbs[m]), m+"-MB/s")
		b.ReportMetric(median(cpu[m]), m+"-cpu-s/GB")
		if m == "none" {
			continue
		}
		b.ReportMetric(median(ratios[m]), m+"-ratio")
		s := stats[m]
		b.ReportMetric(float64(s.commits)/float64(b.N), m+"-commits/run")
		b.ReportMetric(s.flush.ms(50), m+"-flush-p50-ms")
		b.ReportMetric(s.flush.ms(99), m+"-flush-p99-ms")
		b.ReportMetric(s.tail.ms(50), m+"-tail-p50-ms")
		b.ReportMetric(s.gap.ms(50), m+"-gap-p50-ms")
		b.ReportMetric(s.gap.ms(99), m+"-gap-p99-ms")
		if m != "flush100ms" {
			b.ReportMetric(s.end.ms(50), m+"-endtxn-call-p50-ms")
			b.ReportMetric(s.end.ms(99), m+"-endtxn-call-p99-ms")
			b.ReportMetric(s.req[int16(kmsg.EndTxn)].ms(50), m+"-EndTxn-p50-ms")
			b.ReportMetric(s.req[int16(kmsg.EndTxn)].ms(99), m+"-EndTxn-p99-ms")
			b.ReportMetric(s.toAdd.ms(50), m+"-to-AddPartitions-p50-ms")
			b.ReportMetric(s.addToProd.ms(50), m+"-AddPartitions-to-Produce-p50-ms")
			b.ReportMetric(float64(len(s.req[int16(kmsg.AddPartitionsToTxn)]))/float64(max(1, s.commits)), m+"-AddPartitions/commit")
			b.ReportMetric(s.req[int16(kmsg.AddPartitionsToTxn)].ms(50), m+"-AddPartitions-p50-ms")
			b.ReportMetric(s.req[int16(kmsg.AddPartitionsToTxn)].ms(99), m+"-AddPartitions-p99-ms")
		}
	}
	p := stats["none"].req[int16(kmsg.Produce)]
	b.ReportMetric(p.ms(50), "none-Produce-p50-ms")
	p = stats["100ms"].req[int16(kmsg.Produce)]
	b.ReportMetric(p.ms(50), "100ms-Produce-p50-ms")
	b.ReportMetric(p.ms(99), "100ms-Produce-p99-ms")
	b.Logf("ratios to none per op: %s", fmtRatios(ratios))
}

// fmtModes formats a value per mode, in txnModes' order.
func fmtModes(got map[string]float64) string {
	s := ""
	for _, m := range txnModes {
		s += fmt.Sprintf(" %s=%.0f", m, got[m])
	}
	return s
}

// fmtRatios formats the per-op ratios of each mode.
func fmtRatios(r map[string][]float64) string {
	s := ""
	for _, m := range txnModes[1:] {
		s += fmt.Sprintf(" %s=%.2f", m, r[m])
	}
	return s
}

// durs is a collection of durations, for percentiles.
type durs []time.Duration

// ms is the p-th percentile (nearest rank) in milliseconds, 0 when empty.
func (d durs) ms(p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	i := max(0, min(int(float64(len(s))*p/100+0.5)-1, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// txnRun is what one produceForDuration run measured.
type txnRun struct {
	records    int
	elapsed    time.Duration
	commits    int
	flush, end durs // each commit's Flush and EndTransaction calls
	tail, gap  durs // each commit's barrier split (reqTimer.barrier)
	toAdd      durs
	addToProd  durs
	req        map[int16]durs // request durations by API key, as the client's hooks saw them
}

// txnStats gathers the runs of one mode.
type txnStats struct {
	commits    int
	flush, end durs
	tail, gap  durs
	toAdd      durs
	addToProd  durs
	req        map[int16]durs
}

func (s *txnStats) add(r txnRun) {
	s.commits += r.commits
	s.flush = append(s.flush, r.flush...)
	s.end = append(s.end, r.end...)
	s.tail = append(s.tail, r.tail...)
	s.gap = append(s.gap, r.gap...)
	s.toAdd = append(s.toAdd, r.toAdd...)
	s.addToProd = append(s.addToProd, r.addToProd...)
	if s.req == nil {
		s.req = map[int16]durs{}
	}
	for k, d := range r.req {
		s.req[k] = append(s.req[k], d...)
	}
}

// reqTimer is a kgo hook noting every request's time from its write to
// its response read, by API key.
type reqTimer struct {
	mu       sync.Mutex
	by       map[int16]durs
	produced []time.Time // when each Produce request was written
	added    []time.Time // when each AddPartitionsToTxn request was written
}

func (h *reqTimer) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	switch key {
	case int16(kmsg.Produce):
		h.produced = append(h.produced, time.Now())
	case int16(kmsg.AddPartitionsToTxn):
		h.added = append(h.added, time.Now())
	}
	h.mu.Unlock()
}

// barrier splits each commit's barrier (flushed[i], the time its Flush
// returned) in two: tail, from the last Produce request written before it
// (what the broker still had to do alone: the pipeline emptying) and gap,
// to the first Produce request written after it (EndTransaction,
// AddPartitionsToTxn, the client building a request: the broker idle);
// and, in transactions, toAdd: from it to the first AddPartitionsToTxn
// request written after it, and addToProduce: from that to the first
// Produce request written after it.
func (h *reqTimer) barrier(flushed []time.Time) (tail, gap, toAdd, addToProduce durs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmp := func(a, b time.Time) int { return a.Compare(b) }
	for _, f := range flushed {
		i, _ := slices.BinarySearchFunc(h.produced, f, cmp)
		if i == 0 || i == len(h.produced) {
			continue
		}
		tail = append(tail, f.Sub(h.produced[i-1]))
		gap = append(gap, h.produced[i].Sub(f))
		if j, _ := slices.BinarySearchFunc(h.added, f, cmp); j < len(h.added) {
			toAdd = append(toAdd, h.added[j].Sub(f))
			if k, _ := slices.BinarySearchFunc(h.produced, h.added[j], cmp); k < len(h.produced) {
				addToProduce = append(addToProduce, h.produced[k].Sub(h.added[j]))
			}
		}
	}
	return tail, gap, toAdd, addToProduce
}

func (h *reqTimer) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil {
		return
	}
	h.mu.Lock()
	h.by[key] = append(h.by[key], e2e.DurationE2E())
	h.mu.Unlock()
}

// produceForDuration produces 1 KiB records to topic as fast as one client
// takes them for d, idempotent (mode "none"), idempotent flushing every
// 100 ms ("flush100ms"), or in transactions committed every 100 ms
// ("100ms") or every 1,000 records ("1000records"): Flush, then
// EndTransaction. The run ends with a last Flush (and commit); elapsed is
// from the first record to that end. The client's start and one warm-up
// record (its own transaction) are not counted.
func produceForDuration(tb testing.TB, addr, topic, mode string, d time.Duration) txnRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hook := &reqTimer{by: map[int16]durs{}}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(hook)}
	if *txnLinger >= 0 {
		opts = append(opts, kgo.ProducerLinger(*txnLinger))
	}
	txnl := mode == "100ms" || mode == "1000records"
	if txnl {
		opts = append(opts, kgo.TransactionalID("bench-"+topic), kgo.TransactionTimeout(time.Minute))
	}
	cl := newClient(tb, addr, opts...)
	defer cl.Close()
	v := value(txnSize)
	var mu sync.Mutex
	var failed error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
	}
	var r txnRun
	var flushed []time.Time
	begin := func() {
		if txnl {
			if err := cl.BeginTransaction(); err != nil {
				tb.Fatalf("BeginTransaction: %v", err)
			}
		}
	}
	end := func() {
		t0 := time.Now()
		if err := cl.Flush(ctx); err != nil {
			tb.Fatalf("Flush: %v", err)
		}
		t1 := time.Now()
		r.flush = append(r.flush, t1.Sub(t0))
		flushed = append(flushed, t1)
		if txnl {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				tb.Fatalf("EndTransaction: %v", err)
			}
			r.end = append(r.end, time.Since(t1))
		}
		r.commits++
	}
	begin()
	cl.Produce(ctx, &kgo.Record{Value: v}, done)
	end()
	r, flushed = txnRun{}, nil
	hook.mu.Lock()
	clear(hook.by)
	hook.produced, hook.added = nil, nil
	hook.mu.Unlock()

	var tick <-chan time.Time
	if mode == "100ms" || mode == "flush100ms" {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	begin()
	for {
		cl.Produce(ctx, &kgo.Record{Value: v}, done)
		r.records++
		if r.records%256 == 0 && time.Since(start) >= d {
			break
		}
		switch {
		case mode == "1000records" && r.records%1000 == 0:
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
	r.elapsed = time.Since(start)
	if mode == "none" {
		r.commits, r.flush = 0, nil
	}
	if failed != nil {
		tb.Fatalf("a record failed: %v", failed)
	}
	r.tail, r.gap, r.toAdd, r.addToProd = hook.barrier(flushed[:len(flushed)-1])
	hook.mu.Lock()
	r.req = hook.by
	hook.mu.Unlock()
	return r
}

// createNamedTopic creates topic with partitions partitions and waits
// until a client's metadata shows each with a leader.
func createNamedTopic(tb testing.TB, addr, topic string, partitions int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	adm := kadm.NewClient(newClient(tb, addr))
	defer adm.Close()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("CreateTopic %s: %v", topic, err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			tb.Fatalf("Metadata: %v", err)
		}
		if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == int(partitions) {
			ready := true
			for _, p := range t.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("topic %s not ready: %v", topic, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// deleteNamedTopic deletes topic and waits until the broker has removed
// its partitions' directories from dataDir (the broker closes, and so
// fsyncs, a partition before removing it: the next run must not share the
// disk with that).
func deleteNamedTopic(tb testing.TB, addr, dataDir, topic string, partitions int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	adm := kadm.NewClient(newClient(tb, addr))
	defer adm.Close()
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("DeleteTopic %s: %v", topic, err)
	}
	for p := range partitions {
		for {
			_, err := os.Stat(filepath.Join(dataDir, logs.DirName(topic, p)))
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			select {
			case <-ctx.Done():
				tb.Fatalf("topic %s deleted, its partition %d still on disk: %v", topic, p, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// TestTransactionalRatioSetup runs BenchmarkTransactionalRatio's body once
// per mode with short runs, so that `make test` keeps it working: each mode
// produces, the committing modes commit and their barriers are split, and
// a deleted run's topic leaves no partition directory behind.
func TestTransactionalRatioSetup(t *testing.T) {
	dir := t.TempDir()
	br, err := broker.Start(broker.Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("broker.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := br.Close(); err != nil {
			t.Errorf("broker.Close: %v", err)
		}
	})
	for _, mode := range txnModes {
		name := "setup-" + mode
		createNamedTopic(t, br.Addr(), name, txnPartitions)
		r := produceForDuration(t, br.Addr(), name, mode, 300*time.Millisecond)
		deleteNamedTopic(t, br.Addr(), dir, name, txnPartitions)
		if r.records < 256 || r.elapsed <= 0 {
			t.Errorf("%s: %d records in %v", mode, r.records, r.elapsed)
		}
		if mode == "none" {
			if r.commits != 0 || len(r.req[int16(kmsg.Produce)]) == 0 {
				t.Errorf("none: %d commits, %d Produce requests timed", r.commits, len(r.req[int16(kmsg.Produce)]))
			}
			continue
		}
		if r.commits < 2 || len(r.flush) != r.commits {
			t.Errorf("%s: %d commits, %d flushes timed", mode, r.commits, len(r.flush))
		}
		if len(r.tail) == 0 || len(r.gap) != len(r.tail) {
			t.Errorf("%s: barriers split %d tails, %d gaps", mode, len(r.tail), len(r.gap))
		}
		txnl := mode != "flush100ms"
		if got := len(r.end) == r.commits && len(r.toAdd) > 0 && len(r.req[int16(kmsg.EndTxn)]) >= r.commits; got != txnl {
			t.Errorf("%s: %d EndTransaction calls timed, %d EndTxn requests, %d AddPartitionsToTxn after a commit, for %d commits",
				mode, len(r.end), len(r.req[int16(kmsg.EndTxn)]), len(r.toAdd), r.commits)
		}
		if ents, err := os.ReadDir(dir); err != nil {
			t.Fatal(err)
		} else {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), name+"-") {
					t.Errorf("%s left behind after the delete", e.Name())
				}
			}
		}
	}
}
