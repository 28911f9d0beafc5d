package load

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/partitioner"
)

// Errors of Run.
var (
	// ErrConfig: the Config is incomplete or out of range.
	ErrConfig = errors.New("load: invalid config")
	// ErrTopics: the topics could not be created.
	ErrTopics = errors.New("load: topic setup failed")
	// ErrProduce: records failed to produce (the message has the count and
	// the first error).
	ErrProduce = errors.New("load: produce failed")
	// ErrConsume: a consumer failed.
	ErrConsume = errors.New("load: consume failed")
	// ErrMismatch: the consumers did not read every record produced in the
	// window exactly once, per partition.
	ErrMismatch = errors.New("load: consumed records do not match produced")
)

// BrokerStats reads a broker's counters, for embedded targets where the
// runner owns the broker process.
type BrokerStats interface {
	// Sample reads the counters now. topics selects the partitions whose
	// stored bytes and fsyncs count.
	Sample(ctx context.Context, topics []string) (BrokerSample, error)
}

// BrokerSample is a reading of a broker's monotonic counters; for a
// cluster, the sum over its brokers (StoredBytes counts each partition
// once, not once per replica: see the runner).
type BrokerSample struct {
	CPUSeconds  float64 // user+system CPU time of the broker process
	WriteBytes  int64   // bytes the process caused to be written to storage; -1 when unknown
	Fsyncs      int64   // fsyncs of the selected topics' partition logs
	StoredBytes int64   // bytes of the selected topics' segments
	// Brokers are a cluster's readings per broker, by broker id; nil for
	// a single broker. Their CPU, write bytes and fsyncs are reported per
	// broker besides the sums (Result.Brokers).
	Brokers map[int32]BrokerSample
}

// Config is one repetition's load.
type Config struct {
	// Bootstrap is the host:port to connect to, or several separated by
	// commas (a cluster's seed list). Required.
	Bootstrap string
	// Workload is the point's workload (spec.Workload after its factors);
	// its flush policy and durable acks reach the broker through
	// TopicConfigs, not here. Its replication factor and min_insync are
	// the topics' (0 counts as the default, 1).
	Workload spec.Workload
	// PayloadFile holds the payload file's bytes when the workload names one.
	PayloadFile []byte
	// Seed makes payloads, keys and sizes repeatable.
	Seed int64
	// TopicPrefix names the topics: PREFIX-0, PREFIX-1, ... They must not
	// exist; they are deleted at the end. Required.
	TopicPrefix string
	// TopicConfigs are the configs the topics are created with, besides
	// min.insync.replicas, which comes from the workload.
	TopicConfigs map[string]string
	// ReadyTimeout bounds the wait, after the topics are created, until
	// every partition has a leader and all its replicas in sync. Default
	// 30s.
	ReadyTimeout time.Duration
	// AfterSetup, when set, is called once the topics are created and in
	// sync, before any record is produced: tests look at the topics
	// through it. An error fails the repetition.
	AfterSetup func(ctx context.Context, cl *kgo.Client, topics []string) error
	// Codec compresses the producers' batches (through kgoadapt); nil or a
	// codec with ID 0 sends them uncompressed.
	Codec codec.Codec
	// NewPartitioner, when set, makes one partitioner per producer, which
	// assigns each chunk of records its partitions (kgo.ManualPartitioner);
	// nil leaves it to franz-go's default partitioner.
	NewPartitioner func() (partitioner.Partitioner, error)
	// Broker, when set, is sampled for CPU, disk writes, fsyncs and stored
	// bytes.
	Broker BrokerStats
	// DrainTimeout is how long the consumers may go without reading a
	// record before a repetition gives up waiting for the window's records.
	// Default 30s.
	DrainTimeout time.Duration
	// ClientOpts are added to every client's options (tests use them).
	ClientOpts []kgo.Opt
}

// Result is one repetition's figures.
type Result struct {
	Started time.Time     // the measured window's start
	Window  time.Duration // its length
	// Metrics are keyed by the result package's names.
	Metrics map[string]float64
	// Brokers are a cluster's per-broker figures over the window
	// (broker-cpu-s, disk-write-bytes, fsyncs), by broker id; nil
	// otherwise.
	Brokers map[string]map[string]float64
}

func (c Config) validate() (Config, error) {
	w := c.Workload
	switch {
	case c.Bootstrap == "":
		return c, fmt.Errorf("%w: Bootstrap is required", ErrConfig)
	case c.TopicPrefix == "":
		return c, fmt.Errorf("%w: TopicPrefix is required", ErrConfig)
	case w.Topics < 1 || w.Partitions < 1 || w.Producers < 1 || w.Consumers < 0:
		return c, fmt.Errorf("%w: topics %d, partitions %d, producers %d, consumers %d", ErrConfig, w.Topics, w.Partitions, w.Producers, w.Consumers)
	case w.Consumers > w.Topics*w.Partitions:
		return c, fmt.Errorf("%w: %d consumers for %d partitions", ErrConfig, w.Consumers, w.Topics*w.Partitions)
	case w.Duration <= 0 || w.Warmup < 0 || w.Rate < 0:
		return c, fmt.Errorf("%w: duration %v, warmup %v, rate %v", ErrConfig, w.Duration, w.Warmup, w.Rate)
	case w.Consume != "live" && w.Consume != "backlog":
		return c, fmt.Errorf("%w: consume %q (want live or backlog)", ErrConfig, w.Consume)
	}
	if lo, _ := w.MessageSize.Bounds(); lo < timestampSize {
		return c, fmt.Errorf("%w: message size %d below the %d-byte timestamp", ErrConfig, lo, timestampSize)
	}
	if _, err := requiredAcks(w.Acks); err != nil {
		return c, err
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 30 * time.Second
	}
	if c.Workload.ReplicationFactor == 0 {
		c.Workload.ReplicationFactor = 1
	}
	if c.Workload.MinInsync == 0 {
		c.Workload.MinInsync = 1
	}
	if rf, mi := c.Workload.ReplicationFactor, c.Workload.MinInsync; rf < 1 || rf > math.MaxInt16 || mi < 1 || mi > rf {
		return c, fmt.Errorf("%w: replication factor %d, min insync %d (want 1 <= min insync <= replication factor)", ErrConfig, rf, mi)
	}
	return c, nil
}

// seeds are the client's seed brokers: Bootstrap split at commas.
func (c Config) seeds() kgo.Opt { return kgo.SeedBrokers(strings.Split(c.Bootstrap, ",")...) }

func requiredAcks(s string) (kgo.Acks, error) {
	switch s {
	case "0":
		return kgo.NoAck(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("%w: acks %q (want 0, 1 or all)", ErrConfig, s)
}

// rep is the state of one running repetition.
type rep struct {
	cfg      Config
	topics   []string
	topicIdx map[string]int
	parts    int   // partitions per topic
	t0, t1   int64 // the window, Unix nanoseconds: [t0, t1)
	corpus   []byte
}

// part is a record's index over all topics' partitions.
func (r *rep) part(topic string, partition int32) int {
	return r.topicIdx[topic]*r.parts + int(partition)
}

func (r *rep) inWindow(ts int64) bool { return ts >= r.t0 && ts < r.t1 }

// Run runs one repetition: topics, consumers, producers, drain, figures. A
// repetition whose records do not add up returns its figures with an error
// wrapping ErrMismatch (or ErrProduce); the caller keeps both. When ctx ends
// the producers and consumers stop and Run returns ctx's error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return Result{}, err
	}
	w := cfg.Workload
	r := &rep{cfg: cfg, parts: w.Partitions, topicIdx: map[string]int{}}
	for i := range w.Topics {
		name := fmt.Sprintf("%s-%d", cfg.TopicPrefix, i)
		r.topics = append(r.topics, name)
		r.topicIdx[name] = i
	}
	if r.corpus, err = makeCorpus(w, cfg.PayloadFile, cfg.Seed); err != nil {
		return Result{}, err
	}
	admin, err := kgo.NewClient(append([]kgo.Opt{cfg.seeds()}, cfg.ClientOpts...)...)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer admin.Close()
	configs := maps.Clone(cfg.TopicConfigs)
	if configs == nil {
		configs = map[string]string{}
	}
	configs[topicconfig.MinInsyncReplicas] = strconv.Itoa(w.MinInsync)
	if w.UncleanElection {
		configs[topicconfig.UncleanLeaderElection] = "true"
	}
	if err := createTopics(ctx, admin, r.topics, int32(w.Partitions), int16(w.ReplicationFactor), configs); err != nil {
		return Result{}, err
	}
	defer deleteTopics(ctx, admin, r.topics)
	if err := waitInSync(ctx, admin, r.topics, w.Partitions, w.ReplicationFactor, cfg.ReadyTimeout); err != nil {
		return Result{}, err
	}
	if cfg.AfterSetup != nil {
		if err := cfg.AfterSetup(ctx, admin, r.topics); err != nil {
			return Result{}, err
		}
	}

	var before BrokerSample
	if cfg.Broker != nil {
		if before, err = cfg.Broker.Sample(ctx, r.topics); err != nil {
			return Result{}, err
		}
	}
	nParts := w.Topics * w.Partitions
	cons := newConsumerGroup(r, nParts)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	r.t0 = start.Add(w.Warmup).UnixNano()
	r.t1 = start.Add(w.Warmup + w.Duration).UnixNano()
	if w.Consumers > 0 && w.Consume == "live" {
		if err := cons.start(runCtx); err != nil {
			return Result{}, err
		}
	}
	samples := sampleWindow(runCtx, r)
	prods := runProducers(runCtx, r, start)
	win := <-samples
	if err := ctx.Err(); err != nil {
		cancel()
		cons.wait()
		return Result{}, err
	}
	var after BrokerSample
	if cfg.Broker != nil {
		if after, err = cfg.Broker.Sample(ctx, r.topics); err != nil {
			cancel()
			cons.wait()
			return Result{}, err
		}
	}

	// Every record acknowledged must be consumed: in the window, for live
	// consumers, or all of them, for a backlog.
	var consumeStart time.Time
	var consErr error
	var consBefore, consAfter BrokerSample
	backlogCPU := false
	if w.Consumers > 0 {
		want := prods.window
		if w.Consume == "backlog" {
			want = prods.all
			if cfg.Broker != nil {
				// The broker's CPU from the consumers' start to the end
				// of the drain: what serving the backlog cost it.
				if consBefore, err = cfg.Broker.Sample(ctx, r.topics); err != nil {
					cancel()
					return Result{}, err
				}
			}
			consumeStart = time.Now()
			if err := cons.start(runCtx); err != nil {
				return Result{}, err
			}
		}
		consErr = cons.drain(runCtx, want, w.Consume == "backlog", cfg.DrainTimeout)
		if w.Consume == "backlog" && cfg.Broker != nil && consErr == nil {
			if consAfter, err = cfg.Broker.Sample(ctx, r.topics); err != nil {
				cancel()
				cons.wait()
				return Result{}, err
			}
			backlogCPU = true
		}
	}
	cancel()
	cons.wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	res := Result{Started: time.Unix(0, r.t0), Window: w.Duration, Metrics: map[string]float64{}}
	m := res.Metrics
	secs := w.Duration.Seconds()
	m[result.MsgsProduced] = float64(prods.msgs)
	m[result.BytesProduced] = float64(prods.bytes)
	m[result.ProduceMsgsPerSec] = float64(prods.msgs) / secs
	m[result.ProduceMBPerSec] = float64(prods.bytes) / secs / MB
	if prods.ack.n > 0 {
		putQuantiles(m, &prods.ack, result.AckP50, result.AckP95, result.AckP99, result.AckP999, result.AckMax)
	}
	m[result.PartitionSkew] = skew(prods.window)
	if w.Consumers > 0 {
		c := cons.totals()
		m[result.MsgsConsumed] = float64(c.windowMsgs)
		m[result.BytesConsumed] = float64(c.windowBytes)
		if w.Consume == "live" {
			if span := c.lastWindow.Sub(c.firstWindow).Seconds(); span > 0 {
				m[result.ConsumeMsgsPerSec] = float64(c.windowMsgs) / span
				m[result.ConsumeMBPerSec] = float64(c.windowBytes) / span / MB
			}
			if c.e2e.n > 0 {
				putQuantiles(m, &c.e2e, result.E2EP50, result.E2EP95, result.E2EP99, result.E2EP999, result.E2EMax)
			}
		} else if span := c.last.Sub(consumeStart).Seconds(); span > 0 {
			m[result.ConsumeMsgsPerSec] = float64(c.allMsgs) / span
			m[result.ConsumeMBPerSec] = float64(c.allBytes) / span / MB
		}
		if backlogCPU {
			cpu := consAfter.CPUSeconds - consBefore.CPUSeconds
			m[result.BrokerConsumeCPUSeconds] = cpu
			if c.allBytes > 0 {
				m[result.BrokerCPUPerGBConsumed] = cpu / (float64(c.allBytes) / GB)
			}
		}
	}
	if prods.batchBytes > 0 {
		stored := prods.sentBytes
		if cfg.Broker != nil {
			stored = after.StoredBytes - before.StoredBytes
		}
		if stored > 0 {
			m[result.CompressionRatio] = float64(prods.batchBytes) / float64(stored)
		}
	}
	if win.err == nil && win.clientStart > 0 && win.clientEnd >= win.clientStart {
		m[result.ClientCPUSeconds] = win.clientEnd - win.clientStart
	}
	if cfg.Broker != nil && win.err == nil {
		putBrokerDeltas(m, win.start, win.end)
		if prods.bytes > 0 {
			m[result.BrokerCPUPerGBProduced] = m[result.BrokerCPUSeconds] / (float64(prods.bytes) / GB)
		}
		for id, end := range win.end.Brokers {
			if start, ok := win.start.Brokers[id]; ok {
				if res.Brokers == nil {
					res.Brokers = map[string]map[string]float64{}
				}
				bm := map[string]float64{}
				putBrokerDeltas(bm, start, end)
				res.Brokers[strconv.Itoa(int(id))] = bm
			}
		}
	}
	return res, errors.Join(prods.err(), consErr, win.err)
}

// putBrokerDeltas puts what the broker spent between two samples: CPU
// time, fsyncs and, when known, bytes written.
func putBrokerDeltas(m map[string]float64, start, end BrokerSample) {
	m[result.BrokerCPUSeconds] = end.CPUSeconds - start.CPUSeconds
	m[result.Fsyncs] = float64(end.Fsyncs - start.Fsyncs)
	if start.WriteBytes >= 0 && end.WriteBytes >= 0 {
		m[result.DiskWriteBytes] = float64(end.WriteBytes - start.WriteBytes)
	}
}

// selfCPUSeconds is this process's user+system CPU time: the producers'
// and consumers' (the load runs in the harness's process, the brokers in
// their own); 0 when the kernel does not say.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// MB is the unit of the MB/s figures: 2^20 bytes, as in Kreps' figures.
const MB = 1 << 20

// GB is the unit of the CPU-per-GB figures: 2^30 bytes.
const GB = 1 << 30

func putQuantiles(m map[string]float64, h *hist, p50, p95, p99, p999, pmax string) {
	m[p50] = h.quantileMicros(0.50)
	m[p95] = h.quantileMicros(0.95)
	m[p99] = h.quantileMicros(0.99)
	m[p999] = h.quantileMicros(0.999)
	m[pmax] = h.quantileMicros(1)
}

// skew is the busiest partition's count over the mean; 0 with no records.
func skew(counts []int64) float64 {
	var sum, most int64
	for _, c := range counts {
		sum += c
		most = max(most, c)
	}
	if sum == 0 {
		return 0
	}
	return float64(most) / (float64(sum) / float64(len(counts)))
}

// windowSamples are the broker's counters at the window's edges, and this
// process's CPU time (the clients') at the same moments.
type windowSamples struct {
	start, end             BrokerSample
	clientStart, clientEnd float64 // seconds; both 0 when unknown
	err                    error
}

// sampleWindow samples the broker at t0 and t1 (timers, not sleeps: they
// are the measurement's schedule) and delivers both.
func sampleWindow(ctx context.Context, r *rep) <-chan windowSamples {
	out := make(chan windowSamples, 1)
	go func() {
		var ws windowSamples
		defer func() { out <- ws }()
		at := func(t int64, client *float64) (BrokerSample, error) {
			timer := time.NewTimer(time.Until(time.Unix(0, t)))
			defer timer.Stop()
			select {
			case <-ctx.Done():
				return BrokerSample{}, ctx.Err()
			case <-timer.C:
			}
			*client = selfCPUSeconds()
			if r.cfg.Broker == nil {
				return BrokerSample{}, nil
			}
			return r.cfg.Broker.Sample(ctx, r.topics)
		}
		if ws.start, ws.err = at(r.t0, &ws.clientStart); ws.err != nil {
			return
		}
		ws.end, ws.err = at(r.t1, &ws.clientEnd)
	}()
	return out
}

// createTopics creates the topics and fails unless every one is new.
func createTopics(ctx context.Context, cl *kgo.Client, topics []string, partitions int32, replicas int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	for _, name := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = partitions
		t.ReplicationFactor = replicas
		for _, k := range slices.Sorted(maps.Keys(configs)) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = k
			v := configs[k]
			c.Value = &v
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%w: CreateTopics: %w", ErrTopics, err)
	}
	var errs []string
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			msg := err.Error()
			if t.ErrorMessage != nil {
				msg += ": " + *t.ErrorMessage
			}
			errs = append(errs, t.Topic+": "+msg)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrTopics, strings.Join(errs, "; "))
	}
	return nil
}

// deleteTopics removes the topics, best effort: a repetition's figures do
// not depend on it, and a cluster that refuses keeps a few test topics.
func deleteTopics(ctx context.Context, cl *kgo.Client, topics []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10_000
	req.TopicNames = topics
	for _, name := range topics {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	_, _ = req.RequestWith(ctx, cl)
}
