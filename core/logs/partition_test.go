package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
)

// TestProducerExpiry: ApplyRetention forgets producers idle since before
// expireBefore (here an hour ago), and only those.
func TestProducerExpiry(t *testing.T) {
	clock := newClock()
	p := topicPartition(t, nil, clock, nil)
	for _, b := range [][]byte{testbatch.Idempotent(1, 0, 0, 1), testbatch.Idempotent(2, 0, 0, 1)} {
		if _, err := p.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(40 * time.Minute)
	if _, err := p.Append(ctx, testbatch.Idempotent(2, 0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute)
	if err := p.ApplyRetention(clock.Now().Add(-time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(ctx, testbatch.Idempotent(1, 0, 1, 1)); !errors.Is(err, producers.ErrUnknownProducerID) {
		t.Errorf("idle producer 1: %v, want producers.ErrUnknownProducerID", err)
	}
	if _, err := p.Append(ctx, testbatch.Idempotent(2, 0, 2, 1)); err != nil {
		t.Errorf("active producer 2: %v", err)
	}
}

// TestApplyRetention: ApplyRetention deletes the segments retention.ms has
// expired, all but the active one, and forgets the producers idle for
// longer than the broker's default expiry (Kafka's producer.id.expiration.ms,
// 24 h).
func TestApplyRetention(t *testing.T) {
	clock := newClock()
	p := topicPartition(t, nil, clock, map[string]string{topicconfig.SegmentBytes: "1024", topicconfig.RetentionMs: "60000"})
	for i := range 20 {
		if _, err := p.Append(ctx, testbatch.Idempotent(9, 0, int32(i*10), 10)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.Log().Segments()); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	// Segments age by their records' timestamps (fixed in 2023 by the test
	// batches) and the file times; MemFS stamps with time.Now, so move the
	// clock far past both.
	clock.Advance(100 * 365 * 24 * time.Hour)
	if err := p.ApplyRetention(clock.Now().Add(-24 * time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Log().Segments()); n != 1 {
		t.Errorf("%d segments after retention, want 1 (the active one)", n)
	}
	if n := p.ProducerCount(); n != 0 {
		t.Errorf("%d producers remembered after 100 idle years", n)
	}
}

// TestDurableAcks: with weir.durable.acks an append returns only once the
// fsync covers it, also under concurrent appenders (which share fsyncs);
// without, it returns before (the flush policy never asks).
func TestDurableAcks(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			p := topicPartition(t, nil, newClock(), map[string]string{topicconfig.DurableAcks: fmt.Sprint(durable)})
			if p.Settings().DurableAcks != durable {
				t.Fatalf("DurableAcks = %v", p.Settings().DurableAcks)
			}
			const workers, each = 8, 40
			var wg sync.WaitGroup
			errs := make(chan error, workers*each)
			var notCovered sync.Map
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						var b []byte
						if w%2 == 0 {
							b = testbatch.Idempotent(int64(w), 0, int32(2*i), 2)
						} else {
							b = testbatch.Tagged(fmt.Sprint(w, "-", i), 2)
						}
						res, err := p.Append(ctx, b)
						if err != nil {
							errs <- err
							return
						}
						if f := p.Log().FlushedOffset(); f < res.NextOffset {
							notCovered.Store(res.NextOffset, f)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			n := 0
			notCovered.Range(func(k, v any) bool { n++; return true })
			switch {
			case durable && n > 0:
				t.Errorf("%d durable appends returned before their fsync", n)
			case !durable && n == 0:
				t.Errorf("every non-durable append was already flushed: the test proves nothing")
			}
			t.Logf("%d appends, %d fsyncs", workers*each, p.Log().Syncs())
		})
	}
}

// TestAppendDeferred: AppendDeferred returns with the records in the log but
// not yet on disk; with durable acks its wait returns once an fsync covers
// them, without them it returns at once (nothing to wait for).
func TestAppendDeferred(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			p := topicPartition(t, nil, newClock(), map[string]string{topicconfig.DurableAcks: fmt.Sprint(durable)})
			var last AppendResult
			var waits []func(context.Context) error
			for i := range 3 {
				res, wait, err := p.AppendDeferred(ctx, testbatch.Tagged(fmt.Sprint("r", i), 2), 0)
				if err != nil {
					t.Fatal(err)
				}
				if res.BaseOffset != int64(2*i) || p.Log().EndOffset() != res.NextOffset {
					t.Fatalf("append %d: %+v, log end %d", i, res, p.Log().EndOffset())
				}
				last, waits = res, append(waits, wait)
			}
			if f := p.Log().FlushedOffset(); f >= last.NextOffset {
				t.Fatalf("flushed to %d before any wait: the appends waited for the disk", f)
			}
			if err := waits[0](ctx); err != nil {
				t.Fatal(err)
			}
			switch f := p.Log().FlushedOffset(); {
			case durable && f < 2:
				t.Errorf("the first append's wait returned with the log flushed to %d", f)
			case !durable && f >= last.NextOffset:
				t.Errorf("a non-durable wait flushed the log (to %d)", f)
			}
			for _, w := range waits[1:] {
				if err := w(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if f := p.Log().FlushedOffset(); durable && f < last.NextOffset {
				t.Errorf("every wait returned with the log flushed to %d of %d", f, last.NextOffset)
			}
		})
	}
}

// TestConcurrentAppends races idempotent producers, their retries (each batch
// sent twice at once) and plain producers on one partition: every idempotent
// batch lands once, in sequence order, and both sends get the same offsets.
// With small segments, producer-state snapshots race them too, and a reopen
// has the state the log gives.
func TestConcurrentAppends(t *testing.T) {
	for _, configs := range []map[string]string{nil, {topicconfig.SegmentBytes: "1024"}} {
		t.Run(fmt.Sprint(configs), func(t *testing.T) { testConcurrentAppends(t, configs) })
	}
}

func testConcurrentAppends(t *testing.T, configs map[string]string) {
	mem := vfs.NewMem()
	p := topicPartition(t, mem, newClock(), configs)
	const producers, batches, plain = 4, 60, 3
	var wg sync.WaitGroup
	fail := make(chan error, 1)
	report := func(err error) {
		select {
		case fail <- err:
		default:
		}
	}
	for pid := range int64(producers) {
		wg.Go(func() {
			for i := range batches {
				b := testbatch.Idempotent(pid, 0, int32(i*3), 3)
				var res [2]AppendResult
				var errs [2]error
				var inner sync.WaitGroup
				for k := range 2 {
					c := bytes.Clone(b) // Append rewrites offsets in place
					inner.Go(func() { res[k], errs[k] = p.Append(ctx, c) })
				}
				inner.Wait()
				if errs[0] != nil || errs[1] != nil {
					report(fmt.Errorf("producer %d batch %d: %v, %v", pid, i, errs[0], errs[1]))
					return
				}
				if res[0].Duplicate == res[1].Duplicate || res[0].BaseOffset != res[1].BaseOffset || res[0].NextOffset != res[1].NextOffset {
					report(fmt.Errorf("producer %d batch %d: %+v and %+v", pid, i, res[0], res[1]))
					return
				}
			}
		})
	}
	for w := range plain {
		wg.Go(func() {
			for i := range batches {
				if _, err := p.Append(ctx, testbatch.Tagged(fmt.Sprint("plain", w, i), 1)); err != nil {
					report(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
	next := map[int64]int32{}
	plainSeen := 0
	for _, h := range logtest.Headers(t, p.Log()) {
		if h.ProducerID == record.NoProducer {
			plainSeen++
			continue
		}
		if h.BaseSequence != next[h.ProducerID] {
			t.Fatalf("producer %d: batch with sequence %d, want %d", h.ProducerID, h.BaseSequence, next[h.ProducerID])
		}
		next[h.ProducerID] += h.LastOffsetDelta + 1
	}
	for pid := range int64(producers) {
		if next[pid] != batches*3 {
			t.Errorf("producer %d: %d records in the log, want %d", pid, next[pid], batches*3)
		}
	}
	if plainSeen != plain*batches {
		t.Errorf("%d plain batches, want %d", plainSeen, plain*batches)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkProducersOf(t, mem, configs, "reopened")
}
