package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/vfs"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testConfig(t testing.TB, fsys vfs.FS) Config {
	return Config{
		DataDir:          "/data",
		Listen:           "127.0.0.1:0",
		AutoCreateTopics: true,
		FS:               fsys,
		Logger:           testLogger(t),
	}
}

func start(t testing.TB, cfg Config) *Broker {
	t.Helper()
	b, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func consume(t testing.TB, addr, topic string, n int) []string {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx := ctxFor(t)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s", len(got), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func TestConfigValidate(t *testing.T) {
	c, err := Config{DataDir: "d"}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.DefaultPartitions != 1 || c.RetentionCheckInterval != DefaultRetentionCheckInterval ||
		c.GroupMinSessionTimeout != DefaultGroupMinSessionTimeout || c.GroupMaxSessionTimeout != DefaultGroupMaxSessionTimeout ||
		c.MaxRequestBytes != DefaultMaxRequestBytes || c.FS != vfs.Default || c.Clock == nil || c.Logger == nil ||
		c.MetricsListen != "" || c.GroupInitialRebalanceDelay != 0 {
		t.Errorf("defaults not filled: %+v", c)
	}

	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no data dir", Config{}, "DataDir"},
		{"listen without port", Config{DataDir: "d", Listen: "localhost"}, "Listen"},
		{"advertised without port", Config{DataDir: "d", Advertised: "example.com"}, "Advertised"},
		{"advertised port 0", Config{DataDir: "d", Advertised: "example.com:0"}, "Advertised"},
		{"advertised empty host", Config{DataDir: "d", Advertised: ":9092"}, "Advertised"},
		{"metrics without port", Config{DataDir: "d", MetricsListen: "x"}, "MetricsListen"},
		{"negative partitions", Config{DataDir: "d", DefaultPartitions: -1}, "DefaultPartitions"},
		{"negative retention interval", Config{DataDir: "d", RetentionCheckInterval: -time.Second}, "RetentionCheckInterval"},
		{"min session above max", Config{DataDir: "d", GroupMinSessionTimeout: time.Hour}, "session timeouts"},
		{"negative rebalance delay", Config{DataDir: "d", GroupInitialRebalanceDelay: -1}, "GroupInitialRebalanceDelay"},
		{"negative node", Config{DataDir: "d", NodeID: -1}, "NodeID"},
		{"negative request size", Config{DataDir: "d", MaxRequestBytes: -1}, "MaxRequestBytes"},
		{"negative connections", Config{DataDir: "d", MaxConnections: -1}, "MaxConnections"},
		{"route to a negative broker", Config{DataDir: "d", ReplicaRoutes: map[int32]string{-1: "127.0.0.1:1"}}, "ReplicaRoutes"},
		{"route without port", Config{DataDir: "d", ReplicaRoutes: map[int32]string{2: "127.0.0.1"}}, "ReplicaRoutes"},
		{"ktls neither auto nor off", Config{DataDir: "d", Security: Security{KTLS: "sometimes"}}, "auto or off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate = %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
			if _, err := Start(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Start = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestStartServeRestart runs a whole broker on an in-memory file system:
// auto-created topic, produce, consume, metrics, graceful close (markers),
// restart with the data and identity intact.
func TestStartServeRestart(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig(t, fsys)
	cfg.MetricsListen = "127.0.0.1:0"
	b := start(t, cfg)
	if _, port, _ := net.SplitHostPort(b.Addr()); port == "0" {
		t.Fatalf("Addr %s: want the bound port", b.Addr())
	}

	const topic = "restart"
	p := client(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	var want []string
	for i := range 100 {
		v := fmt.Sprintf("record-%03d", i)
		want = append(want, v)
		if err := p.ProduceSync(ctxFor(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if got := consume(t, b.Addr(), topic, len(want)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("consumed %v, want %v", got, want)
	}

	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, metric := range []string{"go_goroutines", "process_cpu_seconds_total", `weir_requests_total{api="Produce"} 100`,
		`weir_partition_log_end_offset{partition="0",topic="restart"} 100`} {
		if !strings.Contains(string(body), metric) {
			t.Errorf("/metrics lacks %s", metric)
		}
	}

	p.Close()
	clusterID := b.ClusterID()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-b.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if err := b.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
	if _, err := fsys.Stat(filepath.Join(cfg.DataDir, topic+"-0", "clean-shutdown")); err != nil {
		t.Errorf("clean-shutdown marker: %v", err)
	}
	if _, err := http.Get("http://" + b.MetricsAddr() + "/metrics"); err == nil {
		t.Error("metrics endpoint still serving after Close")
	}

	b2 := start(t, cfg)
	if b2.ClusterID() != clusterID {
		t.Errorf("cluster id %s after restart, was %s", b2.ClusterID(), clusterID)
	}
	if got := consume(t, b2.Addr(), topic, len(want)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after restart consumed %v, want %v", got, want)
	}
}

// TestRetentionRunsOnTheClock: segments past retention.bytes stay until the
// retention interval passes on the broker's clock, then go.
func TestRetentionRunsOnTheClock(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t, vfs.NewMem())
	cfg.Clock = clock
	cfg.RetentionCheckInterval = time.Minute
	cfg.OffsetsRetention = 30 * time.Second
	b := start(t, cfg)

	const topic = "retained"
	cl := client(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	for k, v := range map[string]string{"segment.bytes": "4096", "retention.bytes": "8192"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	for i := range 64 { // 64 batches of ~1 KiB: 16 segments
		v := []byte(fmt.Sprintf("%04d%s", i, strings.Repeat("x", 1000)))
		if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A simple (group-less) commit by a consumer that then goes away: its
	// offsets expire with the retention pass.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 2, "gone", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 10
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctxFor(t), cl)
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetCommit: %v %+v", err, cresp)
	}
	committed := func() int64 {
		t.Helper()
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group = 1, "gone"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		f.Topics = append(f.Topics, ft)
		fresp, err := f.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return fresp.Topics[0].Partitions[0].Offset
	}
	if got := committed(); got != 10 {
		t.Fatalf("committed offset %d, want 10", got)
	}
	part, err := b.Node().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if part.Stats().LogStartOffset != 0 {
		t.Fatalf("start offset %d before any retention pass", part.Stats().LogStartOffset)
	}
	clock.Advance(time.Minute) // the pass runs in this goroutine
	start, size := part.Stats().LogStartOffset, part.Stats().Size
	if start == 0 || size > 8192+4096 {
		t.Errorf("after a retention pass: start offset %d, size %d; want old segments deleted down to ~8 KiB", start, size)
	}
	if got := consume(t, b.Addr(), topic, int(part.Stats().LogEndOffset-start)); !strings.HasPrefix(got[0], fmt.Sprintf("%04d", start)) {
		t.Errorf("first record after retention %.8q, want offset %d", got[0], start)
	}
	if got := committed(); got != -1 {
		t.Errorf("offsets of a group empty past OffsetsRetention: %d, want -1 (expired)", got)
	}
}

// TestStartFailsCleanly: a port in use fails Start, and everything it
// opened is closed again, so the next Start on the same data works.
func TestStartFailsCleanly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fsys := vfs.NewMem()
	cfg := testConfig(t, fsys)
	cfg.Listen = l.Addr().String()
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Start on a busy port = %v, want a listen error", err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = l.Addr().String()
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("Start with a busy metrics port = %v, want a metrics listen error", err)
	}
	cfg.MetricsListen = ""
	start(t, cfg)
}

// TestAdvertise: an unspecified listen host is advertised as the hostname.
func TestAdvertise(t *testing.T) {
	host, _ := os.Hostname()
	for in, want := range map[string]string{
		"127.0.0.1:9092": "127.0.0.1:9092",
		"0.0.0.0:9092":   net.JoinHostPort(host, "9092"),
		"[::]:1":         net.JoinHostPort(host, "1"),
		"[::1]:1":        "[::1]:1",
	} {
		if got := advertise(in); got != want {
			t.Errorf("advertise(%s) = %s, want %s", in, got, want)
		}
	}
}

// A broker waiting for a ZooKeeper that does not answer gives up when its
// context ends (Ctrl-C on `weir broker`), leaving nothing listening.
func TestStartContextGivesUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // a port nothing answers on once closed
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg := testConfig(t, vfs.NewMem())
	cfg.ZooKeeper = dead
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	b, err := StartContext(ctx, cfg)
	if err == nil {
		b.Close()
		t.Fatal("started without ZooKeeper")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v with a 300 ms context", took)
	}
}
