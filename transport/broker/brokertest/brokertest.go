// Package brokertest starts real weir brokers for tests in other packages
// (end-to-end tests, the CLI's, the plugin adapters', the harness's) and
// drives them with a real franz-go client, so each test package does not keep
// its own copy of the same setup. StartCluster starts brokers joined
// through a real ZooKeeper (cluster/zk/zktest) and stops, kills (cut off
// ZooKeeper, its session left to expire) and restarts them on their data
// directories and addresses. Like net/http/httptest, it is meant for _test.go
// files only.
package brokertest

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker"
)

// Timeout bounds what the helpers wait for (a request, a topic creation); it
// is generous for a 2-core machine shared with other test binaries.
const Timeout = 30 * time.Second

// Start starts a broker on 127.0.0.1:0 with its data in dir (t.TempDir()
// when empty), tuned for tests: topics are auto-created, groups rebalance
// without the initial delay and accept short session timeouts, and warnings
// go to the test log. mods adjust the config. The broker is closed when the
// test ends (closing it earlier is fine); a failed Close fails the test.
func Start(t testing.TB, dir string, mods ...func(*broker.Config)) *broker.Broker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := broker.Config{
		DataDir:                    dir,
		Listen:                     "127.0.0.1:0",
		AutoCreateTopics:           true,
		GroupInitialRebalanceDelay: 0,
		GroupMinSessionTimeout:     100 * time.Millisecond,
		Logger:                     slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, m := range mods {
		m(&cfg)
	}
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatalf("broker.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker.Close: %v", err)
		}
	})
	return b
}

// logWriter sends the broker's log lines to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Client returns a franz-go client for addr, closed when the test ends.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Context returns a context that ends after Timeout or with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// CreateTopicOnReplicas creates topic with one partition on replicas, in
// that order (the first leads), with configs, and fails the test unless
// the broker says it did.
func CreateTopicOnReplicas(t testing.TB, addr, topic string, replicas []int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(configs[k])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t), Client(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s on %v: %v", topic, replicas, err)
	}
}

// CreateTopic creates a topic with configs through the protocol
// (CreateTopics) and fails the test unless the broker says it did.
func CreateTopic(t testing.TB, addr, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = partitions
	rt.ReplicationFactor = 1
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(configs[k])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx := Context(t)
	cl := Client(t, addr)
	// Retriable errors are retried as a client's admin would (a cluster
	// whose coordination store is reconnecting answers REQUEST_TIMED_OUT:
	// the outcome unknown, so a retry finding the topic is a success).
	retried := false
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("CreateTopics %s: %v", name, err)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("CreateTopics %s: %d topics in response", name, len(resp.Topics))
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		switch {
		case err == nil, retried && errors.Is(err, kerr.TopicAlreadyExists):
			return
		case kerr.IsRetriable(err) && ctx.Err() == nil:
			retried = true
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // a retry's backoff
			}
			continue
		}
		t.Fatalf("CreateTopics %s: %v", name, err)
	}
}

// CommittedOffsets returns group's committed offset for each of topic's
// first partitions (OffsetFetch), -1 where none is committed.
func CommittedOffsets(t testing.TB, addr, group, topic string, partitions int32) []int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t), Client(t, addr))
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := make([]int64, partitions)
	for i := range out {
		out[i] = -1
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("OffsetFetch %s %s/%d: %v", group, topic, rp.Partition, err)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	return out
}

// ListOffsets returns the offset ListOffsets answers for timestamp ts (-1
// latest, -2 earliest) in each of topic's first partitions.
func ListOffsets(t testing.TB, addr, topic string, partitions int32, ts int64) []int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t), Client(t, addr))
	if err != nil {
		t.Fatalf("ListOffsets %s: %v", topic, err)
	}
	out := make([]int64, partitions)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("ListOffsets %s/%d: %v", topic, rp.Partition, err)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	return out
}
