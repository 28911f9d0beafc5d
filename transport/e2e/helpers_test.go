package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// waitTimeout bounds every wait for a client to see something; generous for
// a 2-core machine shared with other test binaries, far below -timeout.
const waitTimeout = 30 * time.Second

// The broker, the client and topic creation come from package brokertest;
// these names keep the tests short.
var (
	startBroker = brokertest.Start
	newClient   = brokertest.Client
	testContext = brokertest.Context
	createTopic = brokertest.CreateTopic
)

// endOffsets returns each partition's high watermark (ListOffsets latest).
func endOffsets(t testing.TB, addr, topic string, partitions int32) []int64 {
	t.Helper()
	return brokertest.ListOffsets(t, addr, topic, partitions, -1)
}

// committedOffsets returns the group's committed offset per partition of
// topic, -1 where none is committed.
func committedOffsets(t testing.TB, addr, group, topic string, partitions int32) []int64 {
	t.Helper()
	return brokertest.CommittedOffsets(t, addr, group, topic, partitions)
}

// msg is one record as every client can produce and consume it: text key
// and value (kcat's line-based tools need text), optional headers.
type msg struct {
	Key, Value string
	Headers    []kgo.RecordHeader
	Partition  int32
	Offset     int64
	Codec      uint8 // the batch's codec, where the consumer can tell (franz-go)
}

func (m msg) String() string { return fmt.Sprintf("%q=%q", m.Key, m.Value) }

// textMessages returns n messages whose values compress well, so that every
// producer really compresses (librdkafka sends a batch uncompressed when
// compressing does not make it smaller).
func textMessages(prefix string, n int) []msg {
	out := make([]msg, n)
	for i := range out {
		out[i] = msg{
			Key:   fmt.Sprintf("%s-key-%04d", prefix, i),
			Value: fmt.Sprintf("%s value %04d: %s", prefix, i, strings.Repeat("weir keeps every byte ", 8)),
		}
	}
	return out
}

// sameMessages checks that got holds exactly want's keys and values, in
// order (single-partition topics), and reports the first difference.
func sameMessages(t testing.TB, who string, got, want []msg) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d messages, want %d", who, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i].Key != want[i].Key || got[i].Value != want[i].Value {
			t.Errorf("%s: message %d = %v, want %v", who, i, got[i], want[i])
			return
		}
	}
}

// consumeFranz reads n records of topic from the start of every partition
// with a franz-go direct consumer.
func consumeFranz(t testing.TB, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	defer cl.Close()
	ctx := testContext(t)
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumer: %d of %d records of %s before the deadline", len(recs), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("franz-go consumer: fetch %s/%d: %v", topic, p, err)
		})
		recs = append(recs, fs.Records()...)
	}
	if len(recs) > n {
		t.Errorf("franz-go consumer: %d records in %s, want %d", len(recs), topic, n)
	}
	return recs
}

func franzMessages(recs []*kgo.Record) []msg {
	out := make([]msg, len(recs))
	for i, r := range recs {
		out[i] = msg{Key: string(r.Key), Value: string(r.Value), Headers: r.Headers,
			Partition: r.Partition, Offset: r.Offset, Codec: r.Attrs.CompressionType()}
	}
	return out
}

// kcatPath returns the kcat binary, skipping the test when it is missing,
// except in CI (CI=true), where a missing kcat is a failure: .ci/run installs
// it, so its absence means the suite would silently test less.
func kcatPath(t testing.TB) string {
	t.Helper()
	path, ok := findKcat(t)
	if !ok {
		t.Skip("kcat not found: install the Debian package kcat (make deps) to run the kcat tests")
	}
	return path
}

// findKcat looks kcat up on PATH; missing, it fails the test under CI=true
// and otherwise reports false.
func findKcat(t testing.TB) (string, bool) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat not found (%v), and CI=true: .ci/run must install the Debian package kcat", err)
		}
		return "", false
	}
	return path, true
}

// runKcat runs kcat with args and stdin, failing the test when it fails or
// outlives waitTimeout. It returns stdout.
func runKcat(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// writeFile writes data to a new file in the test's temporary directory.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, waitTimeout, what, cond)
}

// waitWithin polls cond every 10 ms until it holds, failing t after d.
func waitWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
