package bench_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterSizes are what the cluster=N key compares: one `weir broker` alone
// (a single node on its file store, no ZooKeeper) and three brokers of a
// ZooKeeper cluster, every broker in a process of its own.
var clusterSizes = []int{1, 3}

// clusterPartitions is the partition count of the cluster throughput
// benchmarks' topic: two per broker of the cluster.
const clusterPartitions = 6

// startBrokerSet starts n brokers: one alone on its file store for n = 1,
// a ZooKeeper cluster of n otherwise (logging warnings only, as brokerproc's
// default).
func startBrokerSet(tb testing.TB, n int) *brokerSet {
	tb.Helper()
	if n == 1 {
		return startSingleBroker(tb)
	}
	return startZKCluster(tb, n, *zkSession, "warn")
}

// BenchmarkClusterProduce: a franz-go producer as fast as it goes against
// one broker and against a 3-broker cluster (replication factor 1), every
// broker a `weir broker` process; one op is 1 MiB of 1 KiB record values.
// See the package doc.
func BenchmarkClusterProduce(b *testing.B) {
	for _, ack := range acks {
		c := produceConfig{1024, clusterPartitions, ack}
		for _, n := range ordered(clusterSizes) {
			b.Run(fmt.Sprintf("%s/cluster=%d", c.name(), n), func(b *testing.B) {
				b.StopTimer()
				s := startBrokerSet(b, n)
				addr := s.addrs()[0]
				createTopic(b, addr, c.partitions, nil)
				cpu0 := s.cpu(b)
				r := produce(b, b, addr, c, b.N*c.recordsPerOp())
				cpu := s.cpu(b) - cpu0
				reportThroughput(b, c.size, c.recordsPerOp(), r.elapsed)
				b.ReportMetric(r.meanBatchBytes, "B/batch")
				b.ReportMetric(cpu.Seconds()/(float64(b.N)*opBytes/1e9), "broker-cpu-s/GB")
			})
		}
	}
}

// metadataWorkers is how many clients send Metadata requests at once in
// BenchmarkClusterMetadata, each on its own connection.
const metadataWorkers = 8

// BenchmarkClusterMetadata: Metadata requests for the benchmark topic
// (clusterPartitions partitions) from metadataWorkers clients at once, each
// sending its next request when the previous one is answered; the clients
// are spread over the brokers (client i asks broker i mod n), as many
// clients of a cluster spread their metadata requests. One op is one
// request. See the package doc.
func BenchmarkClusterMetadata(b *testing.B) {
	for _, n := range ordered(clusterSizes) {
		b.Run(fmt.Sprintf("partitions=%d/cluster=%d", clusterPartitions, n), func(b *testing.B) {
			b.StopTimer()
			s := startBrokerSet(b, n)
			addrs := s.addrs()
			createTopic(b, addrs[0], clusterPartitions, nil)
			cpu0 := s.cpu(b)
			elapsed := metadataLoad(b, b, addrs, metadataWorkers, b.N)
			cpu := s.cpu(b) - cpu0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "broker-cpu-us/req")
		})
	}
}

// metadataLoad sends n Metadata requests for topic from workers clients,
// client i to addrs[i % len(addrs)] only, after one untimed request each,
// and returns the time they took (timed with tm too). Any failure fails tb.
func metadataLoad(tb testing.TB, tm timer, addrs []string, workers, n int) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	brokers := make([]*kgo.Broker, workers)
	reqs := make([]*kmsg.MetadataRequest, workers)
	for i := range workers {
		brokers[i] = newClient(tb, addrs[i%len(addrs)]).SeedBrokers()[0]
		reqs[i] = kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		reqs[i].Topics = append(reqs[i].Topics, t)
		if _, err := brokers[i].Request(ctx, reqs[i]); err != nil {
			tb.Fatalf("warm-up Metadata to %s: %v", addrs[i%len(addrs)], err)
		}
	}
	var left atomic.Int64
	left.Store(int64(n))
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	tm.StartTimer()
	start := time.Now()
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				resp, err := brokers[i].Request(ctx, reqs[i])
				if err == nil {
					if r := resp.(*kmsg.MetadataResponse); len(r.Topics) != 1 || len(r.Topics[0].Partitions) != clusterPartitions {
						err = fmt.Errorf("metadata: %d topics", len(r.Topics))
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	tm.StopTimer()
	if err := firstErr.Load(); err != nil {
		tb.Fatalf("Metadata: %v", *err)
	}
	return elapsed
}

// cpu is the user+system CPU time of every running broker process so far,
// from /proc/<pid>/stat (10 ms resolution).
func (s *brokerSet) cpu(tb testing.TB) time.Duration {
	tb.Helper()
	var total time.Duration
	for _, id := range s.live() {
		total += procStatCPU(tb, s.brokers[id].proc.Pid())
	}
	return total
}

// replicationSetup is one replication setup the replication benchmarks
// compare on the same 3-broker cluster.
type replicationSetup struct {
	name string
	rf   int16
	acks string
}

// replicationSetups are what BenchmarkReplication's setup key compares:
// replication factor 1 (acks=1), replication factor 3 with acks=1 (the
// leader's append), and replication factor 3 with acks=all and
// min.insync.replicas=2 (every in-sync replica has it).
var replicationSetups = []replicationSetup{
	{"rf1-acks1", 1, "1"},
	{"rf3-acks1", 3, "1"},
	{"rf3-acksall", 3, "all"},
}

// start starts the setup's cluster of build wb, with its topic, and returns
// the set and the address to produce to.
func (su replicationSetup) start(b *testing.B, wb weirBuild) (*brokerSet, string) {
	b.Helper()
	s := startZKClusterOf(b, wb.path, 3, *zkSession, "warn")
	addr := s.addrs()[0]
	createTopicRF(b, addr, clusterPartitions, su.rf, map[string]string{"min.insync.replicas": fmt.Sprint(min(su.rf, 2))})
	return s, addr
}

// BenchmarkReplication: one franz-go producer as fast as it goes, 100-byte
// records to 6 partitions of a 3-broker cluster (`weir broker` processes and
// ZooKeeper on this machine), under each replication setup (on each build
// -weir lists, in turn); one op is 1 MiB of record values. Followers fetch
// from the leaders as Kafka's do. See the package doc.
func BenchmarkReplication(b *testing.B) {
	for _, su := range ordered(replicationSetups) {
		for _, wb := range ordered(weirBuilds(b)) {
			c := produceConfig{100, clusterPartitions, su.acks}
			b.Run(fmt.Sprintf("size=%s/partitions=%d/setup=%s%s", sizeName(c.size), c.partitions, su.name, wb.key()), func(b *testing.B) {
				b.StopTimer()
				s, addr := su.start(b, wb)
				n0 := s.counters(b)
				cpu0, self0 := s.cpu(b), procStatCPU(b, os.Getpid())
				profiled := s.profile(b, su.name+strings.ReplaceAll(wb.key(), "/", "-"))
				r := produce(b, b, addr, c, b.N*c.recordsPerOp())
				cpu, self := s.cpu(b)-cpu0, procStatCPU(b, os.Getpid())-self0
				// Scraped at the producer's last acknowledgement: with
				// acks=1 the followers may still be fetching the tail
				// (lag-MB), whose CPU broker-cpu-s/GB leaves out and
				// repl-cpu-s/GB counts.
				acked := time.Now()
				n1 := s.counters(b)
				s.awaitCaughtUp(b)
				replicated := r.elapsed + time.Since(acked)
				replCPU := s.cpu(b) - cpu0
				profiled()
				gb := float64(b.N) * opBytes / 1e9
				reportThroughput(b, c.size, c.recordsPerOp(), r.elapsed)
				b.ReportMetric(r.meanBatchBytes, "B/batch")
				b.ReportMetric(cpu.Seconds()/gb, "broker-cpu-s/GB")
				b.ReportMetric(replCPU.Seconds()/gb, "repl-cpu-s/GB")
				b.ReportMetric(gb*1e3/replicated.Seconds(), "repl-MB/s")
				b.ReportMetric(self.Seconds()/gb, "client-cpu-s/GB")
				reportReplication(b, n1.sub(n0), su.rf, r.elapsed)
			})
		}
	}
}

// replicationRate is the pace of BenchmarkReplicationLatency, in records
// per second (10 MB/s of 100-byte values, well below what every setup
// sustains).
const replicationRate = 100_000

// BenchmarkReplicationLatency: BenchmarkReplication's cluster and setups,
// with BenchmarkProduceLatency's paced producer (replicationRate records/s,
// linger 0); one op is one record. The latency of each record from its
// Produce call to its acknowledgement: what acks=all costs the producer
// (the followers' fetch round trips) next to acks=1. See the package doc.
func BenchmarkReplicationLatency(b *testing.B) {
	for _, su := range ordered(replicationSetups) {
		for _, wb := range ordered(weirBuilds(b)) {
			c := produceConfig{100, clusterPartitions, su.acks}
			b.Run(fmt.Sprintf("rate=%dk/size=%s/partitions=%d/setup=%s%s", replicationRate/1000, sizeName(c.size), c.partitions, su.name, wb.key()), func(b *testing.B) {
				b.StopTimer()
				s, addr := su.start(b, wb)
				cpu0 := s.cpu(b)
				lat := producePaced(b, b, addr, c, replicationRate, b.N)
				cpu := s.cpu(b) - cpu0
				b.ReportMetric(lat.percentile(50), "p50-us")
				b.ReportMetric(lat.percentile(99), "p99-us")
				b.ReportMetric(lat.percentile(99.9), "p999-us")
				b.ReportMetric(float64(b.N)/lat.elapsed.Seconds(), "records/s")
				b.ReportMetric(cpu.Seconds()/(float64(b.N)*float64(c.size)/1e9), "broker-cpu-s/GB")
			})
		}
	}
}
