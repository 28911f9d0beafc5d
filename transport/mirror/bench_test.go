package mirror_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

var (
	benchMB         = flag.Int("mirror-mb", 64, "BenchmarkMirrorThroughput: MiB of record values in the source topic")
	benchRate       = flag.Int("mirror-rate", 5000, "BenchmarkMirrorLag: records per second produced")
	benchTime       = flag.Duration("mirror-lag-time", 10*time.Second, "BenchmarkMirrorLag: how long the paced load runs per op")
	benchFwd        = flag.Bool("mirror-forward", true, "BenchmarkMirrorThroughput and BenchmarkMirrorLag: forward batches byte for byte (Config.Forward); false: the record path")
	benchEOS        = flag.Bool("mirror-exactly-once", false, "BenchmarkMirrorThroughput: Config.ExactlyOnce (the record path; -mirror-forward is ignored)")
	benchParts      = flag.Int("mirror-partitions", 8, "partitions of the benchmark topic")
	benchKeep       = flag.Bool("mirror-keep", false, "BenchmarkMirrorThroughput: keep each pass's copy on the target (by default it is deleted after the pass, so that every pass writes to a target in the same state)")
	benchLanes      = flag.Int("mirror-lanes", 0, "BenchmarkMirrorThroughput: connections to each target leader when forwarding (0: the default)")
	benchFetchLanes = flag.Int("mirror-fetch-lanes", 0, "BenchmarkMirrorThroughput: connections to each source leader when forwarding (0: the default)")
	benchProf       = flag.String("mirror-target-cpuprofile", "", "BenchmarkMirrorThroughput: write the target broker's CPU profile of the mirror passes to this file")
)

// benchBrokers starts a source and a target `weir broker`, each a process
// of its own so that their CPU time reads apart from the mirror's and the
// consumer's (which run in the benchmark process).
func benchBrokers(b testing.TB) (src, dst *brokerproc.Process) {
	b.Helper()
	weir := weirBinary(b)
	start := func() *brokerproc.Process {
		p, err := brokerproc.Start(context.Background(), brokerproc.Options{Weir: weir, DataDir: b.TempDir(), Pprof: *benchProf != ""})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Stop() })
		return p
	}
	return start(), start()
}

// procCPU is a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// fillTopic produces mb MiB of 1 KiB random values (incompressible, so
// codecs do not flatter anyone) to topic, round robin over its partitions.
func fillTopic(b testing.TB, addr, topic string, mb int) {
	b.Helper()
	cl := brokertest.Client(b, addr, kgo.ProducerBatchMaxBytes(1<<20))
	val := make([]byte, 1024)
	var failed atomic.Value
	for i := 0; i < mb*1024; i++ {
		v := make([]byte, len(val))
		rand.Read(v)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("fill %s: %v", topic, err)
	}
}

// consumePass reads the whole topic once with a plain kgo consumer, as a
// mirror's source side would without a target, and returns when it read
// the last record (before closing the client).
func consumePass(b testing.TB, addr, topic string, ends []int64) (doneAt time.Time) {
	b.Helper()
	cl := brokertest.Client(b, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(4<<20))
	defer cl.Close()
	left := 0
	for _, e := range ends {
		if e > 0 {
			left++
		}
	}
	for left > 0 {
		fs := cl.PollFetches(context.Background())
		fs.EachError(func(t string, p int32, err error) { b.Fatalf("consume %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == ends[r.Partition]-1 {
				left--
			}
		})
	}
	return time.Now()
}

// mirrorPass mirrors the whole topic once into alias.topic on dst and
// returns when every partition's position reached the source end, with the
// time it saw that (before the mirror is stopped). It calls setUp once the
// mirror has set up every partition (target topics created, positions
// read), when the copying starts.
func mirrorPass(b testing.TB, src, dst, topic, alias string, ends []int64, setUp func()) (caughtUpAt time.Time) {
	b.Helper()
	cfg := mirror.Config{Source: []string{src}, Target: []string{dst}, Topics: topic, SourceAlias: alias,
		Name: "bench-" + alias, Logger: quietLogger(b), Forward: *benchFwd && !*benchEOS, ExactlyOnce: *benchEOS}
	m, err := mirror.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for caughtUp := false; !caughtUp; {
		<-tick.C
		st := m.Status()
		if len(st) == len(ends) && setUp != nil {
			setUp()
			setUp = nil
		}
		caughtUp = len(st) == len(ends)
		for _, s := range st {
			if s.Next < ends[s.Partition] {
				caughtUp = false
			}
		}
	}
	caughtUpAt = time.Now()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return caughtUpAt
}

// profileBroker collects CPU profiles of broker p, one second each, into
// prefix.0, prefix.1, ... until the returned stop is called (merge them
// with `go tool pprof -proto prefix.*`). A no-op when -mirror-target-cpuprofile
// is not set.
func profileBroker(b testing.TB, p *brokerproc.Process, prefix string) (stop func()) {
	if *benchProf == "" {
		return func() {}
	}
	var stopped atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; !stopped.Load(); n++ {
			resp, err := http.Get("http://" + p.PprofAddr + "/debug/pprof/profile?seconds=1")
			if err != nil {
				b.Error(err)
				return
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = os.WriteFile(fmt.Sprintf("%s.%d", prefix, n), data, 0o644)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}()
	return func() { stopped.Store(true); <-done }
}

// deleteTopic deletes topic (a pass's copy): without it, each pass would
// write to a target holding every earlier copy (and their dirty pages, 2
// GiB after 15 passes of 128 MiB), whose writes get slower pass after
// pass (its CPU per GB went from about 1 to 3.5 s over 15 passes).
func deleteTopic(b testing.TB, addr, topic string) {
	b.Helper()
	cl := brokertest.Client(b, addr)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).DeleteTopics(context.Background(), topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		b.Fatalf("delete %s: %v", topic, err)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkMirrorThroughput compares the mirror with a plain consumer of
// the same source topic (-mirror-mb MiB of 1 KiB random values in
// -mirror-partitions partitions, filled once). Each op is one pass of each,
// alternating so that both see the same machine; the figures are medians
// over the ops (run with -benchtime=5x for five): consume-MB/s,
// mirror-MB/s, ratio (of the medians), run-ratio (the median of each
// run's mirror/consumer ratio), and the CPU seconds per GB of values of the
// source broker and of the target broker during the mirror passes (the
// source's during the consume passes as src-consume-cpu-s/GB). A mirror
// pass is timed from the moment it has set up its partitions (target
// topic created, positions read: setup-s, reported apart) to the moment
// every position reached the source's end. consumer-cpu-s/GB and
// mirror-cpu-s/GB are the benchmark process's own CPU (the consumer's, the
// mirror's) per GB.
func BenchmarkMirrorThroughput(b *testing.B) {
	mirror.SetForwardLanes(*benchLanes, *benchFetchLanes)
	src, dst := benchBrokers(b)
	parts := int32(*benchParts)
	brokertest.CreateTopic(b, src.Addr, "bench", parts, nil)
	fillTopic(b, src.Addr, "bench", *benchMB)
	ends := brokertest.ListOffsets(b, src.Addr, "bench", parts, -1)
	gb := float64(*benchMB) * (1 << 20) / 1e9
	var consumeMBs, mirrorMBs, srcCPU, dstCPU, srcConsumeCPU, setUps, consumerCPU, mirrorCPU []float64
	b.ResetTimer()
	for i := range b.N {
		c0, me0 := procCPU(b, src.Pid()), procCPU(b, os.Getpid())
		t0 := time.Now()
		var end time.Time
		// The labels tell the passes apart in -cpuprofile (go tool pprof
		// -tagfocus pass=mirror): the goroutines a pass starts inherit them.
		pprof.Do(context.Background(), pprof.Labels("pass", "consume"), func(context.Context) {
			end = consumePass(b, src.Addr, "bench", ends)
		})
		consumerCPU = append(consumerCPU, (procCPU(b, os.Getpid())-me0).Seconds()/gb)
		consumeMBs = append(consumeMBs, float64(*benchMB)*(1<<20)/1e6/end.Sub(t0).Seconds())
		srcConsumeCPU = append(srcConsumeCPU, (procCPU(b, src.Pid())-c0).Seconds()/gb)

		var s0, d0, m0 time.Duration
		stopProf := func() {}
		setUp := time.Now()
		pprof.Do(context.Background(), pprof.Labels("pass", "mirror"), func(context.Context) {
			end = mirrorPass(b, src.Addr, dst.Addr, "bench", fmt.Sprintf("r%d", i), ends, func() {
				stopProf = profileBroker(b, dst, fmt.Sprintf("%s.%d", *benchProf, i))
				s0, d0, m0 = procCPU(b, src.Pid()), procCPU(b, dst.Pid()), procCPU(b, os.Getpid())
				t0 = time.Now()
			})
		})
		stopProf()
		mirrorCPU = append(mirrorCPU, (procCPU(b, os.Getpid())-m0).Seconds()/gb)
		setUps = append(setUps, t0.Sub(setUp).Seconds())
		mirrorMBs = append(mirrorMBs, float64(*benchMB)*(1<<20)/1e6/end.Sub(t0).Seconds())
		srcCPU = append(srcCPU, (procCPU(b, src.Pid())-s0).Seconds()/gb)
		dstCPU = append(dstCPU, (procCPU(b, dst.Pid())-d0).Seconds()/gb)
		if !*benchKeep {
			deleteTopic(b, dst.Addr, fmt.Sprintf("r%d.bench", i))
		}
	}
	b.StopTimer()
	b.ReportMetric(median(consumeMBs), "consume-MB/s")
	b.ReportMetric(median(mirrorMBs), "mirror-MB/s")
	var ratios []float64
	for i := range mirrorMBs {
		ratios = append(ratios, mirrorMBs[i]/consumeMBs[i])
	}
	b.ReportMetric(median(mirrorMBs)/median(consumeMBs), "ratio")
	b.ReportMetric(median(ratios), "run-ratio")
	b.ReportMetric(median(srcCPU), "src-cpu-s/GB")
	b.ReportMetric(median(dstCPU), "dst-cpu-s/GB")
	b.ReportMetric(median(srcConsumeCPU), "src-consume-cpu-s/GB")
	b.ReportMetric(median(setUps), "setup-s")
	b.ReportMetric(median(consumerCPU), "consumer-cpu-s/GB")
	b.ReportMetric(median(mirrorCPU), "mirror-cpu-s/GB")
	b.Logf("runs: consume MB/s %.1f, mirror MB/s %.1f, ratio %.2f; cpu-s/GB: consumer %.2f, mirror %.2f, source %.2f (consume) %.2f (mirror), target %.2f",
		consumeMBs, mirrorMBs, ratios, consumerCPU, mirrorCPU, srcConsumeCPU, srcCPU, dstCPU)
}

// BenchmarkMirrorLag produces -mirror-rate records/s of 1 KiB for
// -mirror-lag-time into the source while the mirror runs, and a consumer
// of the target measures each record's end-to-end delay: the time it
// reads the copy minus the source record's timestamp (set by the producer
// when it produced it; one clock, one process). Reports p50-ms and p99-ms
// and the rate achieved (records/s), so the pace is shown kept.
func BenchmarkMirrorLag(b *testing.B) {
	src, dst := benchBrokers(b)
	parts := int32(*benchParts)
	brokertest.CreateTopic(b, src.Addr, "lag", parts, nil)
	cfg := mirror.Config{Source: []string{src.Addr}, Target: []string{dst.Addr}, Topics: "lag", Logger: quietLogger(b),
		RefreshInterval: 100 * time.Millisecond, Forward: *benchFwd}
	m, err := mirror.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(b, "target topic ready", func() bool { _, ok := tryEnds(dst.Addr, "lag", parts); return ok })

	var delays []float64
	var s0, d0 time.Duration
	produced := 0
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		s0, d0 = procCPU(b, src.Pid()), procCPU(b, dst.Pid())
		n := int(float64(*benchRate) * benchTime.Seconds())
		got := make(chan []float64, 1)
		from, _ := tryEnds(dst.Addr, "lag", parts)
		go func() { got <- readDelays(b, dst.Addr, "lag", from, n) }()
		prod := brokertest.Client(b, src.Addr)
		pace := time.NewTicker(time.Second / time.Duration(*benchRate/100))
		for i := 0; i < n; i += 100 {
			<-pace.C
			for range 100 {
				v := make([]byte, 1024)
				prod.Produce(context.Background(), &kgo.Record{Topic: "lag", Value: v}, nil)
			}
		}
		pace.Stop()
		produced += n
		delays = append(delays, <-got...)
		prod.Close()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(delays)
	gb := float64(produced) * 1024 / 1e9
	b.ReportMetric(delays[len(delays)/2], "p50-ms")
	b.ReportMetric(delays[len(delays)*99/100], "p99-ms")
	b.ReportMetric(float64(produced)/elapsed.Seconds(), "records/s")
	b.ReportMetric((procCPU(b, src.Pid())-s0).Seconds()/gb, "src-cpu-s/GB")
	b.ReportMetric((procCPU(b, dst.Pid())-d0).Seconds()/gb, "dst-cpu-s/GB")
}

// readDelays reads n records of topic from the offsets from on and returns
// each one's delay in milliseconds.
func readDelays(b testing.TB, addr, topic string, from []int64, n int) []float64 {
	at := map[int32]kgo.Offset{}
	for p, o := range from {
		at[int32(p)] = kgo.NewOffset().At(o)
	}
	cl := brokertest.Client(b, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchMaxWait(50*time.Millisecond))
	defer cl.Close()
	out := make([]float64, 0, n)
	for len(out) < n {
		fs := cl.PollFetches(context.Background())
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, float64(now.Sub(r.Timestamp).Microseconds())/1000)
		})
	}
	return out
}

// tryEnds returns topic's end offsets, and false while some partition has
// none (not created yet, or no leader yet).
func tryEnds(addr, topic string, parts int32) ([]int64, bool) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return nil, false
	}
	out := make([]int64, parts)
	for p := range parts {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			return nil, false
		}
		out[p] = o.Offset
	}
	return out, true
}
