package bench_test

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkBrokerCPU: the broker's own CPU time per GB of record values
// produced or consumed (acks=all), weir and kfake each in a process of its
// own, so that the client's CPU time is not counted. The in-process
// throughput of BenchmarkProduce is mostly the client's (franz-go takes
// most of the two cores); this says what each broker costs. One op is
// 1 MiB of record values. See the package doc.
func BenchmarkBrokerCPU(b *testing.B) {
	for _, op := range []string{"produce", "consume"} {
		for _, size := range sizes {
			for _, parts := range partitions {
				c := produceConfig{size, parts, "all"}
				for _, im := range ordered(impls) {
					b.Run(fmt.Sprintf("op=%s/size=%s/partitions=%d/impl=%s", op, sizeName(size), parts, im.name), func(b *testing.B) {
						b.StopTimer()
						n := b.N * c.recordsPerOp()
						elapsed, cpu := brokerCPU(b, b, im.name, op, c, n)
						reportThroughput(b, c.size, c.recordsPerOp(), elapsed)
						b.ReportMetric(cpu.Seconds()/(float64(n*c.size)/1e9), "cpu-s/GB")
					})
				}
			}
		}
	}
}

// brokerCPU starts a broker process of impl, then produces n records (op
// "produce") or fills the topic with n records and consumes them (op
// "consume"), and returns the time the measured part took and the broker
// process's CPU time meanwhile.
func brokerCPU(tb testing.TB, tm timer, impl, op string, c produceConfig, n int) (elapsed, cpu time.Duration) {
	tb.Helper()
	p := startBrokerProcess(tb, impl, false)
	createTopic(tb, p.addr, c.partitions, nil)
	if op == "consume" {
		produce(tb, noTimer{}, p.addr, c, n)
	}
	before := p.stats(tb)
	switch op {
	case "produce":
		elapsed = produce(tb, tm, p.addr, c, n).elapsed
	case "consume":
		elapsed = consume(tb, tm, p.addr, n)
	default:
		tb.Fatalf("op %q: want produce or consume", op)
	}
	return elapsed, p.stats(tb).cpu - before.cpu
}
