package load

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// startBroker runs a real weir broker in this process on a free port.
func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	return brokertest.Start(t, "", func(c *broker.Config) {
		c.AutoCreateTopics = false // the load creates its topics
		c.Logger = slog.New(slog.DiscardHandler)
	})
}

// workload is a small, short workload: what the tests vary is on top.
func workload() spec.Workload {
	w := spec.Defaults().Workload
	w.Partitions = 3
	w.MessageSize = spec.MessageSize{Distribution: spec.Fixed, Size: 200}
	w.Payload = "json"
	w.Warmup = 200 * time.Millisecond
	w.Duration = 700 * time.Millisecond
	w.Linger = time.Millisecond
	return w
}

// fakeStats is a BrokerStats whose counters grow by fixed steps per
// sample, so the figures it leads to are known.
type fakeStats struct {
	n      atomic.Int64
	mu     sync.Mutex
	topics []string
}

func (f *fakeStats) Sample(_ context.Context, topics []string) (BrokerSample, error) {
	n := f.n.Add(1)
	f.mu.Lock()
	f.topics = topics
	f.mu.Unlock()
	return BrokerSample{CPUSeconds: 0.5 * float64(n), WriteBytes: 1000 * n, Fsyncs: 7 * n, StoredBytes: 0}, nil
}

// checkConsistent asserts what every repetition's figures must satisfy.
func checkConsistent(t *testing.T, res Result, w spec.Workload) {
	t.Helper()
	m := res.Metrics
	produced, bytes := m[result.MsgsProduced], m[result.BytesProduced]
	if produced <= 0 {
		t.Fatalf("no records produced: %v", m)
	}
	if res.Window != w.Duration {
		t.Errorf("window %v, want the workload's duration %v", res.Window, w.Duration)
	}
	if _, hi := w.MessageSize.Bounds(); w.Keys.Kind == "none" && w.MessageSize.Distribution == spec.Fixed && bytes != produced*float64(hi) {
		t.Errorf("bytes-produced %v != %v records x %d bytes", bytes, produced, hi)
	}
	secs := w.Duration.Seconds()
	if got, want := m[result.ProduceMsgsPerSec], produced/secs; math.Abs(got-want) > 1e-9*want {
		t.Errorf("produce-msgs/s %v, want msgs-produced/duration = %v", got, want)
	}
	if got, want := m[result.ProduceMBPerSec], bytes/secs/MB; math.Abs(got-want) > 1e-9*want {
		t.Errorf("produce-MB/s %v, want bytes-produced/duration/2^20 = %v", got, want)
	}
	// The clients' CPU over the window: present, and no more than every
	// CPU of the machine for the whole window.
	if c, ok := m[result.ClientCPUSeconds]; !ok || c < 0 || c > secs*float64(runtime.NumCPU())+0.05 {
		t.Errorf("client-cpu-s %v (present %v), want 0..%v", c, ok, secs*float64(runtime.NumCPU()))
	}
	if w.Consumers > 0 {
		if m[result.MsgsConsumed] != produced || m[result.BytesConsumed] != bytes {
			t.Errorf("consumed %v records, %v bytes; produced %v, %v", m[result.MsgsConsumed], m[result.BytesConsumed], produced, bytes)
		}
		if m[result.ConsumeMsgsPerSec] <= 0 || m[result.ConsumeMBPerSec] <= 0 {
			t.Errorf("consume rates %v msgs/s, %v MB/s", m[result.ConsumeMsgsPerSec], m[result.ConsumeMBPerSec])
		}
	} else if _, ok := m[result.MsgsConsumed]; ok {
		t.Errorf("produce-only workload reports consumption: %v", m)
	}
	ordered := func(names ...string) {
		for i := 1; i < len(names); i++ {
			if !(m[names[i-1]] <= m[names[i]]) {
				t.Errorf("%s %v > %s %v", names[i-1], m[names[i-1]], names[i], m[names[i]])
			}
		}
		if m[names[0]] <= 0 {
			t.Errorf("%s = %v, want > 0", names[0], m[names[0]])
		}
	}
	ordered(result.AckP50, result.AckP95, result.AckP99, result.AckP999, result.AckMax)
	if w.Consumers > 0 && w.Consume == "live" {
		ordered(result.E2EP50, result.E2EP95, result.E2EP99, result.E2EP999, result.E2EMax)
	}
	if s := m[result.PartitionSkew]; s < 1 || s > float64(w.Topics*w.Partitions) {
		t.Errorf("partition-skew %v outside [1, partitions]", s)
	}
}

func TestRunLive(t *testing.T) {
	b := startBroker(t)
	zstd, err := codec.New("zstd")
	if err != nil {
		t.Fatal(err)
	}
	w := workload()
	w.Topics = 2
	w.Consumers = 2
	w.Keys = spec.Keys{Kind: "zipf", Count: 100, ZipfS: 1.2}
	stats := &fakeStats{}
	res, err := Run(context.Background(), Config{
		Bootstrap: b.Addr(), Workload: w, Seed: 1, TopicPrefix: "live",
		Codec: zstd, Broker: stats,
		NewPartitioner: func() (partitioner.Partitioner, error) { return partitioner.New("murmur2") },
	})
	if err != nil {
		t.Fatalf("Run: %v (figures %v)", err, res.Metrics)
	}
	checkConsistent(t, res, w)
	m := res.Metrics
	// Samples: before (stored), window start, window end, after (stored):
	// the fake's counters step by one sample between start and end.
	if m[result.BrokerCPUSeconds] != 0.5 || m[result.DiskWriteBytes] != 1000 || m[result.Fsyncs] != 7 {
		t.Errorf("broker figures %v cpu, %v written, %v fsyncs; want one step of the fake's counters", m[result.BrokerCPUSeconds], m[result.DiskWriteBytes], m[result.Fsyncs])
	}
	if got, want := m[result.BrokerCPUPerGBProduced], 0.5/(m[result.BytesProduced]/GB); math.Abs(got-want) > 1e-9*want {
		t.Errorf("broker-cpu-s-per-GB-produced %v, want broker-cpu-s over the GB produced, %v", got, want)
	}
	if _, ok := m[result.BrokerConsumeCPUSeconds]; ok {
		t.Error("live consumption reports the broker's backlog CPU")
	}
	if len(stats.topics) != 2 || stats.topics[0] != "live-0" || stats.topics[1] != "live-1" {
		t.Errorf("broker sampled for topics %q", stats.topics)
	}
	// The fake stores nothing, so the ratio is left out rather than made up.
	if _, ok := m[result.CompressionRatio]; ok {
		t.Errorf("compression-ratio %v with no stored bytes", m[result.CompressionRatio])
	}
}

func TestRunCompressionRatio(t *testing.T) {
	b := startBroker(t)
	ratio := func(codecName, payload string) float64 {
		t.Helper()
		c, err := codec.New(codecName)
		if err != nil {
			t.Fatal(err)
		}
		w := workload()
		w.Payload = payload
		w.Consumers = 0
		res, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, Seed: 2, TopicPrefix: "ratio-" + codecName + "-" + payload, Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		checkConsistent(t, res, w)
		return res.Metrics[result.CompressionRatio]
	}
	// Without a BrokerStats the ratio is of what the client sent.
	if r := ratio("none", "json"); r != 1 {
		t.Errorf("ratio without compression = %v, want exactly 1", r)
	}
	jsonZstd, randomZstd := ratio("zstd", "json"), ratio("zstd", "random")
	// Random payloads leave zstd only the records' framing and the
	// timestamps' common high bytes.
	if !(jsonZstd > 2) || !(randomZstd < 1.3) {
		t.Errorf("zstd ratios: json %v (want > 2), random %v (want about 1)", jsonZstd, randomZstd)
	}
}

func TestRunBacklog(t *testing.T) {
	b := startBroker(t)
	w := workload()
	w.Partitions = 4
	w.Consumers = 3
	w.Consume = "backlog"
	w.Acks = "1"
	w.MessageSize = spec.MessageSize{Distribution: spec.Uniform, Min: 16, Max: 600}
	res, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, Seed: 3, TopicPrefix: "backlog", Broker: &fakeStats{}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkConsistent(t, res, w)
	// Samples: before, window start and end, after, then around the
	// backlog's reading: one step of the fake's counters.
	m := res.Metrics
	if cpu := m[result.BrokerConsumeCPUSeconds]; cpu != 0.5 {
		t.Errorf("broker-consume-cpu-s %v, want one step of the fake's counters (0.5)", cpu)
	}
	// The backlog holds the warm-up's records too: at least the window's.
	if perGB := m[result.BrokerCPUPerGBConsumed]; !(perGB > 0 && perGB <= 0.5/(m[result.BytesConsumed]/GB)) {
		t.Errorf("broker-cpu-s-per-GB-consumed %v, want in (0, %v]", perGB, 0.5/(m[result.BytesConsumed]/GB))
	}
	if _, ok := res.Metrics[result.E2EP50]; ok {
		t.Error("backlog consumption reports end-to-end latency")
	}
}

func TestRunPaced(t *testing.T) {
	b := startBroker(t)
	w := workload()
	w.Rate = 1000
	w.Producers = 2
	w.Consumers = 1
	w.Keys = spec.Keys{Kind: "sequential", Count: 10}
	res, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, Seed: 4, TopicPrefix: "paced"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkConsistent(t, res, w)
	// The token bucket never sends ahead of the rate: over warm-up and
	// window together at most rate x time (plus one record per producer
	// for rounding), so the window holds no more than that either.
	limit := w.Rate*(w.Warmup+w.Duration).Seconds() + float64(w.Producers)
	if got := res.Metrics[result.MsgsProduced]; got > limit {
		t.Errorf("%v records produced at rate %v in %v, more than %v", got, w.Rate, w.Warmup+w.Duration, limit)
	}
}

func TestRunAcksZero(t *testing.T) {
	b := startBroker(t)
	w := workload()
	w.Acks = "0"
	w.Rate = 2000
	res, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, Seed: 5, TopicPrefix: "acks0"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkConsistent(t, res, w)
}

func TestRunErrors(t *testing.T) {
	b := startBroker(t)
	w := workload()
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no bootstrap", Config{Workload: w, TopicPrefix: "x"}, ErrConfig},
		{"no prefix", Config{Bootstrap: b.Addr(), Workload: w}, ErrConfig},
		{"bad acks", Config{Bootstrap: b.Addr(), Workload: func() spec.Workload { w := w; w.Acks = "2"; return w }(), TopicPrefix: "x"}, ErrConfig},
		{"bad topic config", Config{Bootstrap: b.Addr(), Workload: w, TopicPrefix: "cfg", TopicConfigs: map[string]string{"weir.flush.policy": "sometimes"}}, ErrTopics},
		{"min insync over replication factor", Config{Bootstrap: b.Addr(), Workload: func() spec.Workload { w := w; w.MinInsync = 2; return w }(), TopicPrefix: "x"}, ErrConfig},
		// One broker cannot hold two replicas: CreateTopics refuses.
		{"replication factor over brokers", Config{Bootstrap: b.Addr(), Workload: func() spec.Workload { w := w; w.ReplicationFactor = 2; return w }(), TopicPrefix: "rf2"}, ErrTopics},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Errorf("Run = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	b := startBroker(t)
	w := workload()
	w.Duration = time.Hour // only cancelling ends it
	ctx, cancel := context.WithCancel(context.Background())
	stats := &cancelAtWindow{cancel: cancel}
	_, err := Run(ctx, Config{Bootstrap: b.Addr(), Workload: w, Seed: 6, TopicPrefix: "cancel", Broker: stats})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

// cancelAtWindow cancels the run when the window opens (its second sample).
type cancelAtWindow struct {
	n      atomic.Int64
	cancel func()
}

func (c *cancelAtWindow) Sample(context.Context, []string) (BrokerSample, error) {
	if c.n.Add(1) == 2 {
		c.cancel()
	}
	return BrokerSample{}, nil
}

func TestMismatch(t *testing.T) {
	got := make([]atomic.Int64, 3)
	got[0].Store(5)
	got[1].Store(4)
	got[2].Store(0)
	if err := mismatch([]int64{5, 4, 0}, got); err != nil {
		t.Errorf("equal counts: %v", err)
	}
	err := mismatch([]int64{5, 6, 0}, got)
	if !errors.Is(err, ErrMismatch) || err.Error() != "load: consumed records do not match produced: 11 acknowledged, 9 consumed (partition 1: 6 acknowledged, 4 consumed)" {
		t.Errorf("mismatch = %v", err)
	}
}

func TestSkew(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{{[]int64{5, 5, 5}, 1}, {[]int64{10, 0}, 2}, {[]int64{6, 3, 3}, 1.5}, {[]int64{0, 0}, 0}} {
		if got := skew(tc.counts); got != tc.want {
			t.Errorf("skew(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

// The topics are created with the workload's replication factor and
// min.insync.replicas beside the configs given, and AfterSetup sees them
// in sync before any record is produced; its error fails the repetition.
func TestTopicSetup(t *testing.T) {
	b := startBroker(t)
	w := workload()
	w.Consumers = 0
	var infos []node.TopicInfo
	after := func(_ context.Context, _ *kgo.Client, topics []string) error {
		for _, name := range topics {
			info, err := b.Node().Topic(name)
			if err != nil {
				return err
			}
			infos = append(infos, info)
		}
		return nil
	}
	res, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, Seed: 7, TopicPrefix: "setup",
		TopicConfigs: map[string]string{"segment.bytes": "1048576"}, AfterSetup: after})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || res.Metrics[result.MsgsProduced] <= 0 {
		t.Fatalf("AfterSetup saw %d topics; %v records produced", len(infos), res.Metrics[result.MsgsProduced])
	}
	info := infos[0]
	if c := info.Configs; c[topicconfig.MinInsyncReplicas] != "1" || c["segment.bytes"] != "1048576" || info.ReplicationFactor() != 1 {
		t.Errorf("topic %s: configs %v, replication factor %d", info.Name, c, info.ReplicationFactor())
	}
	for _, p := range info.Partitions {
		if p.Leader < 0 || len(p.ISR) != 1 {
			t.Errorf("partition %d: leader %d, ISR %v", p.Index, p.Leader, p.ISR)
		}
	}
	failing := func(context.Context, *kgo.Client, []string) error { return errors.New("look failed") }
	if _, err := Run(context.Background(), Config{Bootstrap: b.Addr(), Workload: w, TopicPrefix: "setup-fails", AfterSetup: failing}); err == nil || err.Error() != "look failed" {
		t.Errorf("Run with a failing AfterSetup = %v", err)
	}
}
