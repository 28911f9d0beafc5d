package runner

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/result"
)

// tinyClusterSpec is one point of one repetition on a 2-broker cluster:
// every partition on both brokers, acks=all waiting for both.
const tinyClusterSpec = `
name: tiny-cluster
seed: 5
repetitions: 1
target:
  cluster: {brokers: 2}
workload:
  partitions: 2
  message_size: 256
  producers: 1
  consumers: 1
  warmup: 200ms
  duration: 1s
  linger: 2ms
  replication_factor: 2
  min_insync: 2
  acks: all
`

// topicsSeen is what afterSetup saw of a repetition's topics, before the
// load started.
type topicsSeen struct {
	mu         sync.Mutex
	partitions []kmsg.MetadataResponseTopicPartition
}

// look records the topics' partitions. (weir serves no DescribeConfigs:
// harness/load's tests check min.insync.replicas on the broker itself.)
func (s *topicsSeen) look(ctx context.Context, cl *kgo.Client, topics []string) error {
	resp, err := load.Metadata(ctx, cl, topics)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range resp.Topics {
		s.partitions = append(s.partitions, t.Partitions...)
	}
	return nil
}

// TestRunCluster runs a tiny spec on a real ZooKeeper and two real `weir
// broker` processes: every record produced with acks=all is consumed, the
// topics had both replicas in sync before the load began, the brokers' CPU is their sum, and nothing the
// run started is left running.
func TestRunCluster(t *testing.T) {
	zktest.Require(t)
	data := t.TempDir()
	var seen topicsSeen
	var stderr strings.Builder
	run, _, err := Run(context.Background(), Options{
		Spec: parse(t, tinyClusterSpec), Out: filepath.Join(t.TempDir(), "results"), DataDir: data, Weir: weirBin,
		Stderr: &lockedWriter{w: &stderr}, afterSetup: seen.look,
	})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := clusterproc.ProcessesMentioning(data); len(left) > 0 {
		t.Errorf("processes left after the run:\n%s", strings.Join(left, "\n"))
	}
	e := run.Env
	if e.Target != "cluster" || e.Brokers != 2 || e.ZooKeeper != "embedded" || e.Networking != "loopback" {
		t.Errorf("env: target %q, brokers %d, zookeeper %q, networking %q", e.Target, e.Brokers, e.ZooKeeper, e.Networking)
	}
	if len(run.Sections) != 1 || len(run.Sections[0].Points) != 1 || len(run.Sections[0].Points[0].Reps) != 1 {
		t.Fatalf("sections: %+v", run.Sections)
	}
	rp := run.Sections[0].Points[0].Reps[0]
	if rp.Error != "" {
		t.Fatalf("rep failed: %s", rp.Error)
	}
	m := rp.Metrics
	if m[result.MsgsProduced] <= 0 || m[result.MsgsConsumed] != m[result.MsgsProduced] || m[result.BytesConsumed] != m[result.BytesProduced] {
		t.Errorf("produced %v records / %v bytes, consumed %v / %v", m[result.MsgsProduced], m[result.BytesProduced], m[result.MsgsConsumed], m[result.BytesConsumed])
	}
	if r := m[result.CompressionRatio]; math.Abs(r-1) > 0.01 {
		t.Errorf("compression-ratio %v without a codec, want 1: stored bytes must count one replica per partition", r)
	}
	// broker-cpu-s is the brokers' sum, each broker's kept beside.
	var sum float64
	for _, id := range []string{"1", "2"} {
		cpu, ok := rp.Brokers[id][result.BrokerCPUSeconds]
		if !ok || cpu < 0 {
			t.Errorf("broker %s: broker-cpu-s %v (present %v) in %v", id, cpu, ok, rp.Brokers)
		}
		sum += cpu
	}
	if got := m[result.BrokerCPUSeconds]; math.Abs(got-sum) > 1e-9 || len(rp.Brokers) != 2 {
		t.Errorf("broker-cpu-s %v, per broker %v", got, rp.Brokers)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.partitions) != 2 {
		t.Fatalf("before the load: %d partitions, want 2", len(seen.partitions))
	}
	for _, p := range seen.partitions {
		if p.Leader < 1 || len(p.Replicas) != 2 || len(p.ISR) != 2 {
			t.Errorf("partition %d before the load: leader %d, replicas %v, ISR %v; want both brokers in sync", p.Partition, p.Leader, p.Replicas, p.ISR)
		}
	}
}

// Ctrl-C in the middle of a cluster point (here: as soon as the first
// repetition's topics are in sync) stops the clients, the brokers and
// ZooKeeper, and the run is reported interrupted.
func TestRunClusterInterrupted(t *testing.T) {
	zktest.Require(t)
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := parse(t, tinyClusterSpec)
	s.Repetitions = 3
	run, _, err := Run(ctx, Options{Spec: s, Out: filepath.Join(t.TempDir(), "results"), DataDir: data, Weir: weirBin,
		afterSetup: func(context.Context, *kgo.Client, []string) error { cancel(); return nil }})
	if !errors.Is(err, ErrInterrupted) || run == nil || !run.Interrupted {
		t.Fatalf("Run = %v, want ErrInterrupted and a run marked interrupted", err)
	}
	if left := clusterproc.ProcessesMentioning(data); len(left) > 0 {
		t.Errorf("processes left after the interruption:\n%s", strings.Join(left, "\n"))
	}
}

// lockedWriter serialises writes from the progress and the plugin host's
// logger.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The cluster's sample sums the brokers' counters and counts each
// partition once, by its largest replica.
func TestSumSamples(t *testing.T) {
	bs := []*clusterproc.Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	samples := []load.BrokerSample{
		{CPUSeconds: 1, WriteBytes: 100, Fsyncs: 1, StoredBytes: 30},
		{CPUSeconds: 2, WriteBytes: 200, Fsyncs: 2, StoredBytes: 25},
		{CPUSeconds: 4, WriteBytes: -1, Fsyncs: 4, StoredBytes: 20},
	}
	sizes := []map[string]int64{{"t/0": 20, "t/1": 10}, {"t/0": 18, "t/1": 7}, {"t/1": 12, "t/2": 8}}
	got := sumSamples(bs, samples, sizes)
	if got.CPUSeconds != 7 || got.Fsyncs != 7 || got.WriteBytes != -1 || got.StoredBytes != 20+12+8 || len(got.Brokers) != 3 || got.Brokers[2].CPUSeconds != 2 {
		t.Errorf("sum %+v", got)
	}
	if got := sumSamples(bs[:2], samples[:2], sizes[:2]); got.WriteBytes != 300 {
		t.Errorf("write bytes %d, want 300", got.WriteBytes)
	}
}
