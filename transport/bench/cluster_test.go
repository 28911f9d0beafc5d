package bench_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker"
)

// topic is the one topic every benchmark uses, created fresh in a fresh
// cluster.
const topic = "bench"

// setupTimeout bounds each setup step (topic creation, a flush) so that a
// broker that stops answering fails the benchmark instead of hanging it.
const setupTimeout = 2 * time.Minute

// impl starts one kind of broker for the duration of a test or benchmark and
// returns its address.
type impl struct {
	name  string
	start func(tb testing.TB) string
}

// impls are the brokers compared, weir first; the same sub-benchmark runs
// against each in turn.
var impls = []impl{
	{"weir", startWeir},
	{"kfake", startKfake},
}

// reverse flips the order in which every benchmark runs the things it
// compares (weir and kfake, durable=false and true, sendfile and copy,
// cluster=1 and 3), so that a loop of runs can alternate which goes first:
// whatever one run leaves behind (dirty pages, a warm page cache, freed
// memory) then favours neither side.
var reverse = flag.Bool("reverse", false, "run the compared sub-benchmarks in reverse order (kfake before weir, ...)")

// ordered returns xs, reversed with -reverse.
func ordered[T any](xs []T) []T {
	if !*reverse {
		return xs
	}
	r := slices.Clone(xs)
	slices.Reverse(r)
	return r
}

// startWeir starts an in-process weir broker on a fresh data directory.
func startWeir(tb testing.TB) string {
	tb.Helper()
	b, err := broker.Start(broker.Config{
		DataDir: tb.TempDir(),
		Listen:  "127.0.0.1:0",
	})
	if err != nil {
		tb.Fatalf("broker.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("broker.Close: %v", err)
		}
	})
	return b.Addr()
}

// startKfake starts a one-broker kfake cluster persisting to a fresh data
// directory (kfake.DataDir: segment files written through the page cache,
// fsynced on roll and close, like Kafka's and weir's defaults).
func startKfake(tb testing.TB) string {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(tb.TempDir()))
	if err != nil {
		tb.Fatalf("kfake.NewCluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// newClient returns a franz-go client for addr, closed when tb ends.
func newClient(tb testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		tb.Fatalf("kgo.NewClient: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic through the protocol (CreateTopics), with the
// same request for every implementation, and waits until the client's
// metadata shows all its partitions.
func createTopic(tb testing.TB, addr string, partitions int32, configs map[string]string) {
	tb.Helper()
	createTopicRF(tb, addr, partitions, 1, configs)
}

// createTopicRF is createTopic with rf replicas per partition.
func createTopicRF(tb testing.TB, addr string, partitions int32, rf int16, configs map[string]string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		tb.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		v := configs[k]
		c.Value = &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatalf("CreateTopics: %v", err)
	}
	if len(resp.Topics) != 1 {
		tb.Fatalf("CreateTopics: %d topics in response", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		tb.Fatalf("CreateTopics: %v", err)
	}
	// Wait for the metadata to show every partition with a leader, so
	// the first produce does not measure a metadata retry.
	for {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		name := topic
		mt.Topic = &name
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, cl)
		if err != nil {
			tb.Fatalf("Metadata: %v", err)
		}
		if len(mresp.Topics) == 1 && mresp.Topics[0].ErrorCode == 0 && len(mresp.Topics[0].Partitions) == int(partitions) {
			ready := true
			for _, p := range mresp.Topics[0].Partitions {
				ready = ready && p.ErrorCode == 0 && p.Leader >= 0
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

// value returns size random bytes: record values that do not compress, used
// for every record (the client does not modify them).
func value(size int) []byte {
	v := make([]byte, size)
	rand.Read(v)
	return v
}

// sizeName is the size= key of a record size.
func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%dKiB", size/1024)
	}
	return fmt.Sprintf("%dB", size)
}

// timer is the part of *testing.B the measured bodies use, so that the
// quick test can run them with noTimer.
type timer interface {
	StartTimer()
	StopTimer()
}

type noTimer struct{}

func (noTimer) StartTimer() {}
func (noTimer) StopTimer()  {}
