package topics

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// TestProducerExpiry: ApplyRetention forgets producers idle past
// ProducerExpiry, and only those.
func TestProducerExpiry(t *testing.T) {
	clock := newClock()
	r := open(t, vfs.NewMem(), "/d", func(o *Options) { o.Clock = clock; o.ProducerExpiry = time.Hour })
	defer r.Close()
	tp, err := r.Create("x", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	for _, b := range [][]byte{idem(t, 1, 0, 0, 1), idem(t, 2, 0, 0, 1)} {
		if _, err := p.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(40 * time.Minute)
	if _, err := p.Append(ctx, idem(t, 2, 0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute)
	if err := r.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(ctx, idem(t, 1, 0, 1, 1)); !errors.Is(err, producers.ErrUnknownProducerID) {
		t.Errorf("idle producer 1: %v, want producers.ErrUnknownProducerID", err)
	}
	if _, err := p.Append(ctx, idem(t, 2, 0, 2, 1)); err != nil {
		t.Errorf("active producer 2: %v", err)
	}
}

// TestDurableAcks: with weir.durable.acks an append returns only once the
// fsync covers it, also under concurrent appenders (which share fsyncs);
// without, it returns before (the flush policy never asks).
func TestDurableAcks(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			_, p := newTestPartition(t, map[string]string{"weir.durable.acks": fmt.Sprint(durable)})
			if p.DurableAcks != durable {
				t.Fatalf("DurableAcks = %v", p.DurableAcks)
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
							b = idem(t, int64(w), 0, int32(2*i), 2)
						} else {
							b = batch(t, fmt.Sprint(w, "-", i), 2)
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

// TestConcurrentAppends races idempotent producers, their retries (each batch
// sent twice at once) and plain producers on one partition: every idempotent
// batch lands once, in sequence order, and both sends get the same offsets.
func TestConcurrentAppends(t *testing.T) {
	_, p := newTestPartition(t, nil)
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
				b := idem(t, pid, 0, int32(i*3), 3)
				var res [2]logs.AppendResult
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
				if _, err := p.Append(ctx, batch(t, fmt.Sprint("plain", w, i), 1)); err != nil {
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
	for _, h := range readAll(t, p.Log()) {
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
}

// TestConcurrentRegistry races creates, deletes, lookups, producer ids and
// retention.
func TestConcurrentRegistry(t *testing.T) {
	r := open(t, vfs.NewMem(), "/d")
	defer r.Close()
	var wg sync.WaitGroup
	ids := make(chan int64, 4*200)
	fail := make(chan error, 16)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id, _, err := r.InitProducerID()
				if err != nil {
					fail <- err
					return
				}
				ids <- id
				if i%20 == 0 {
					name := fmt.Sprintf("t%d-%d", g, i)
					if _, err := r.Create(name, 2, nil); err != nil {
						fail <- err
						return
					}
					p, err := r.Partition(name, 1)
					if err != nil {
						fail <- err
						return
					}
					if _, err := p.Append(ctx, idem(t, id, 0, 0, 1)); err != nil {
						fail <- err
						return
					}
					if i%40 == 0 {
						if err := r.Delete(name); err != nil {
							fail <- err
							return
						}
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			for _, tp := range r.Topics() {
				_, _ = r.Partition(tp.Name, 0)
			}
			if err := r.ApplyRetention(); err != nil {
				fail <- err
				return
			}
		}
	})
	wg.Wait()
	close(ids)
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("producer id %d handed out twice", id)
		}
		seen[id] = true
	}
	if n := len(r.Topics()); n != 20 {
		t.Errorf("%d topics, want 20", n)
	}
}
