package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/node"
)

// TestProduceAcrossDiskFault runs a broker on a file system whose partition
// log writes (a full disk) or fsyncs (an I/O error) start failing: a real
// franz-go producer gets KAFKA_STORAGE_ERROR for its records, a retrying one
// waits, and once the fault clears both succeed, the partition having
// recovered by itself. A consumer then reads every acknowledged record once,
// in order, at contiguous offsets, and nothing of the failed produces.
func TestProduceAcrossDiskFault(t *testing.T) {
	for _, fc := range []struct {
		name string
		op   errorfs.Op
		err  error
	}{
		{"disk-full-write", errorfs.OpWrite, syscall.ENOSPC},
		{"eio-fsync", errorfs.OpSync, syscall.EIO},
	} {
		t.Run(fc.name, func(t *testing.T) {
			clock := newFakeClock()
			inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{fc.op}, Sticky: true, Err: fc.err}
			fsys := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
				if !strings.Contains(path, "/fault-0/") || !strings.HasSuffix(path, ".log") {
					return nil
				}
				return inj.MaybeError(op, path)
			}))
			cfg := testConfig(t, fsys)
			cfg.Clock = clock
			cfg.TopicDefaults = map[string]string{"weir.durable.acks": "true"}
			b := start(t, cfg)
			ctx := ctxFor(t)
			if _, err := b.Node().CreateTopic(ctx, node.CreateTopic{Name: "fault", Partitions: 1, ReplicationFactor: -1}); err != nil {
				t.Fatal(err)
			}

			once := client(t, b.Addr(), kgo.DefaultProduceTopic("fault"), kgo.RecordRetries(0),
				kgo.DisableIdempotentWrite())
			// KAFKA_STORAGE_ERROR makes franz-go refresh metadata before
			// it retries: keep the waits short.
			retrying := client(t, b.Addr(), kgo.DefaultProduceTopic("fault"), kgo.MetadataMinAge(20*time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
			var acked []string
			produce := func(cl *kgo.Client, v string) error {
				err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr()
				if err == nil {
					acked = append(acked, v)
				}
				return err
			}
			for i := range 5 {
				if err := produce(retrying, fmt.Sprint("before-", i)); err != nil {
					t.Fatal(err)
				}
			}
			p, err := b.Node().Partition("fault", 0)
			if err != nil {
				t.Fatal(err)
			}

			inj.K = inj.Count()
			for i := range 3 {
				if err := produce(once, fmt.Sprint("refused-", i)); !errors.Is(err, kerr.KafkaStorageError) {
					t.Fatalf("produce on a failing disk: %v, want KAFKA_STORAGE_ERROR", err)
				}
				clock.Advance(partlog.MaxRecoveryBackoff) // recovery attempts meet the fault
			}
			if p.Stats().Err == nil {
				t.Fatal("the partition log has not failed")
			}

			// A producer that retries waits out the fault.
			done := make(chan error, 1)
			seen := inj.Count()
			go func() {
				done <- retrying.ProduceSync(ctx, kgo.StringRecord("during")).FirstErr()
			}()
			waitUntil(t, func() bool { // its retries meet the fault (each one due to recover)
				clock.Advance(partlog.MaxRecoveryBackoff)
				return inj.Count() >= seen+2
			})
			select {
			case err := <-done:
				t.Fatalf("produce finished during the fault: %v", err)
			default:
			}

			inj.Clear()
			clock.Advance(partlog.MaxRecoveryBackoff)
			if err := <-done; err != nil {
				t.Fatalf("retried produce after the fault cleared: %v", err)
			}
			acked = append(acked, "during")
			if err := produce(once, "after"); err != nil {
				t.Fatalf("produce after the fault cleared: %v", err)
			}
			if p.Stats().Recoveries == 0 {
				t.Fatal("no recovery was recorded")
			}

			got := consume(t, b.Addr(), "fault", len(acked))
			if strings.Join(got, ",") != strings.Join(acked, ",") {
				t.Fatalf("consumed %v, want the acknowledged %v", got, acked)
			}
			if end := p.Stats().LogEndOffset; end != int64(len(acked)) {
				t.Fatalf("log ends at %d with %d acknowledged records: offsets skipped or records kept that failed", end, len(acked))
			}
		})
	}
}

// waitUntil polls cond until it holds, failing the test after 20 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met within 20s")
		case <-tick.C:
		}
	}
}
