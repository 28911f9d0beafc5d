package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/harness/brokerproc"
)

// powerCutTopic is the one-partition topic the power-cut tests produce to.
const powerCutTopic = "cut"

// startPowerCutBroker runs this test binary as `weir broker --power-cut-fs`
// on dir (see TestMain), a single node, with flags.
func startPowerCutBroker(ctx context.Context, t *testing.T, dir string, flags ...string) *brokerproc.Process {
	t.Helper()
	p, err := brokerproc.Start(ctx, brokerproc.Options{Weir: os.Args[0], DataDir: dir, PowerCutFS: true, DeathSignal: syscall.SIGKILL,
		Flags: append([]string{"--group-initial-rebalance-delay", "0s", "--log-level", "info"}, flags...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cmd.Process.Kill() })
	return p
}

// produceRange produces records "r-from".."r-(to-1)" to powerCutTopic,
// acks=all, and fails the test unless each is acknowledged at its number
// as offset.
func produceRange(ctx context.Context, t *testing.T, addr string, from, to int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(powerCutTopic), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := from; i < to; i += 100 {
		var rs []*kgo.Record
		for j := i; j < min(i+100, to); j++ {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "r-%d", j)})
		}
		for _, r := range cl.ProduceSync(ctx, rs...) {
			if r.Err != nil {
				t.Fatalf("produce %s: %v", r.Record.Value, r.Err)
			}
			if want := fmt.Sprintf("r-%d", r.Record.Offset); string(r.Record.Value) != want {
				t.Fatalf("%s acknowledged at offset %d", r.Record.Value, r.Record.Offset)
			}
		}
	}
}

// readLog returns the end of powerCutTopic's partition (its high
// watermark, polled until the restarted broker serves it) and checks that
// the log holds "r-0".."r-(end-1)" at their offsets.
func readLog(ctx context.Context, t *testing.T, addr string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := int64(-1)
	for deadline := time.Now().Add(30 * time.Second); end < 0; {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = powerCutTopic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1 // the latest: the high watermark
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			p := resp.Topics[0].Partitions[0]
			if err = kerr.ErrorForCode(p.ErrorCode); err == nil {
				end = p.Offset
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted broker does not serve %s: %v", powerCutTopic, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a restarting broker with a deadline
	}
	if end == 0 {
		return 0
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{powerCutTopic: {0: kgo.NewOffset().AtStart()}})
	next := int64(0)
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, r := range fs.Records() {
			if r.Offset >= end {
				continue
			}
			if want := fmt.Sprintf("r-%d", next); r.Offset != next || string(r.Value) != want {
				t.Fatalf("offset %d holds %s, want %s at %d", r.Offset, r.Value, want, next)
			}
			next++
		}
	}
	return end
}

// cutPower cuts the broker's power and checks that it said so.
func cutPower(t *testing.T, p *brokerproc.Process) {
	t.Helper()
	if err := p.PowerCut(); err != nil {
		t.Fatal(err)
	}
	if out := p.Output(); !strings.Contains(out, "power cut: the data directory holds what was fsynced") {
		t.Errorf("no power-cut line in the broker's log:\n%s", out)
	}
}

// `weir broker --power-cut-fs` loses on SIGUSR1 what it did not fsync,
// and restarts on the rest: with a flush policy that never fsyncs,
// acknowledged records are lost (the log ends before them, and what it
// holds is what was produced, in order); offsets continue from the
// recovered end. (The cut tears writes: the segment keeps a random prefix
// of its unsynced bytes, all of them once in some 14,000 cuts, when this
// test would fail.)
func TestBrokerPowerCutLosesUnsynced(t *testing.T) {
	t.Setenv("WEIR_TEST_RUN_MAIN", "1") // brokerproc runs this binary as weir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	flags := []string{"--topic-config", "weir.flush.policy=never"}
	p := startPowerCutBroker(ctx, t, dir, flags...)
	const acked = 2000
	produceRange(ctx, t, p.Addr, 0, acked)
	cutPower(t, p)

	p = startPowerCutBroker(ctx, t, dir, flags...)
	end := readLog(ctx, t, p.Addr)
	if end >= acked {
		t.Fatalf("the log ends at %d after the power cut: nothing of %d records acknowledged but never fsynced was lost", end, acked)
	}
	produceRange(ctx, t, p.Addr, int(end), int(end)+10)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records acknowledged, never fsynced; %d survived the power cut", acked, end)
}

// With durable acks and an fsync per batch, a power cut loses nothing
// acknowledged, and the restarted broker (on the power-cut file system
// again) can have its power cut once more.
func TestBrokerPowerCutDurableAcksLoseNothing(t *testing.T) {
	t.Setenv("WEIR_TEST_RUN_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	flags := []string{"--topic-config", "weir.durable.acks=true", "--topic-config", "weir.flush.policy=every-batch"}
	p := startPowerCutBroker(ctx, t, dir, flags...)
	produceRange(ctx, t, p.Addr, 0, 1000)
	cutPower(t, p)

	p = startPowerCutBroker(ctx, t, dir, flags...)
	if end := readLog(ctx, t, p.Addr); end != 1000 {
		t.Fatalf("the log ends at %d after the first power cut, want 1000 (every record acknowledged durably)", end)
	}
	produceRange(ctx, t, p.Addr, 1000, 1500)
	cutPower(t, p)

	p = startPowerCutBroker(ctx, t, dir, flags...)
	if end := readLog(ctx, t, p.Addr); end != 1500 {
		t.Fatalf("the log ends at %d after the second power cut, want 1500", end)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

// A broker on the power-cut file system that is killed (SIGKILL, not a
// power cut) loses nothing, as a broker on a disk does: its data directory
// holds at every moment what the page cache would, fsynced or not.
func TestBrokerPowerCutFSKillKeepsPageCache(t *testing.T) {
	t.Setenv("WEIR_TEST_RUN_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	flags := []string{"--topic-config", "weir.flush.policy=never"}
	p := startPowerCutBroker(ctx, t, dir, flags...)
	produceRange(ctx, t, p.Addr, 0, 2000)
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	p = startPowerCutBroker(ctx, t, dir, flags...)
	if end := readLog(ctx, t, p.Addr); end != 2000 {
		t.Fatalf("the log ends at %d after a SIGKILL, want 2000: the data directory missed what the page cache held", end)
	}
	// And what the directory held counts as durable: a power cut now
	// keeps it all.
	cutPower(t, p)
	p = startPowerCutBroker(ctx, t, dir, flags...)
	if end := readLog(ctx, t, p.Addr); end != 2000 {
		t.Fatalf("the log ends at %d after a power cut that followed the restart, want 2000", end)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}
