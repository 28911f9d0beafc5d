package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/kgoadapt"
)

// consumers are the workload's consuming clients. Each reads its own
// partitions from their start; the per-partition counts are atomics so the
// drain can watch them while the consumers run.
type consumers struct {
	r       *rep
	window  []atomic.Int64 // window records consumed, per partition
	all     []atomic.Int64 // records consumed, per partition
	each    []*consumer
	wg      sync.WaitGroup
	failed  chan struct{} // closed on the first consumer error
	errOnce sync.Once
	err     error
}

// consumer is one consuming client's figures, read after it stopped.
type consumer struct {
	e2e                     hist
	windowMsgs, windowBytes int64 // window records (by send time)
	allMsgs, allBytes       int64
	// When the first and the last of the window's records were read, and
	// the last of any.
	firstWindow, lastWindow, last time.Time
}

func newConsumerGroup(r *rep, nParts int) *consumers {
	return &consumers{r: r, window: make([]atomic.Int64, nParts), all: make([]atomic.Int64, nParts), failed: make(chan struct{})}
}

func (cs *consumers) fail(err error) {
	cs.errOnce.Do(func() {
		cs.err = err
		close(cs.failed)
	})
}

// start creates the consumers' clients and starts reading.
func (cs *consumers) start(ctx context.Context) error {
	w := cs.r.cfg.Workload
	assign := make([]map[string]map[int32]kgo.Offset, w.Consumers)
	for i := range assign {
		assign[i] = map[string]map[int32]kgo.Offset{}
	}
	for i := range w.Topics * w.Partitions {
		topic, p := cs.r.topics[i/w.Partitions], int32(i%w.Partitions)
		a := assign[i%w.Consumers]
		if a[topic] == nil {
			a[topic] = map[int32]kgo.Offset{}
		}
		a[topic][p] = kgo.NewOffset().AtStart()
	}
	var clients []*kgo.Client
	for i := range w.Consumers {
		opts := []kgo.Opt{cs.r.cfg.seeds(), kgo.ConsumePartitions(assign[i])}
		if c := cs.r.cfg.Codec; c != nil && c.ID() > codec.Zstd {
			opts = append(opts, kgo.WithDecompressor(kgoadapt.Decompressor(c)))
		}
		cl, err := kgo.NewClient(append(opts, cs.r.cfg.ClientOpts...)...)
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		clients = append(clients, cl)
	}
	for _, cl := range clients {
		c := &consumer{}
		cs.each = append(cs.each, c)
		cs.wg.Go(func() {
			defer cl.Close()
			if err := cs.run(ctx, cl, c); err != nil {
				cs.fail(err)
			}
		})
	}
	return nil
}

// run polls until ctx ends.
func (cs *consumers) run(ctx context.Context, cl *kgo.Client, c *consumer) error {
	r := cs.r
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var errs []string
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Sprintf("%s/%d: %v", topic, p, err))
			}
		})
		if len(errs) > 0 {
			return fmt.Errorf("%w: %s", ErrConsume, strings.Join(errs, "; "))
		}
		now := time.Now()
		nowNano := now.UnixNano()
		n, inWindow := 0, 0
		fetches.EachRecord(func(rec *kgo.Record) {
			size := int64(len(rec.Key) + len(rec.Value))
			i := r.part(rec.Topic, rec.Partition)
			n++
			c.allMsgs++
			c.allBytes += size
			if ts, ok := timestamp(rec.Value); ok && r.inWindow(ts) {
				inWindow++
				c.windowMsgs++
				c.windowBytes += size
				c.e2e.add(nowNano - ts)
				cs.window[i].Add(1)
			}
			cs.all[i].Add(1)
		})
		if n > 0 {
			c.last = now
		}
		if inWindow > 0 {
			if c.firstWindow.IsZero() {
				c.firstWindow = now
			}
			c.lastWindow = now
		}
	}
}

// drain waits until every partition has had want[p] records consumed (the
// window's, or all when all is set), failing when the consumers read nothing
// for idle, or read more than was acknowledged.
func (cs *consumers) drain(ctx context.Context, want []int64, all bool, idle time.Duration) error {
	counts := cs.window
	if all {
		counts = cs.all
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastTotal int64 = -1
	deadline := time.Now().Add(idle)
	for {
		var total int64
		done := true
		for i := range want {
			got := counts[i].Load()
			total += got
			if got < want[i] {
				done = false
			}
		}
		if done {
			return mismatch(want, counts)
		}
		if total != lastTotal {
			lastTotal, deadline = total, time.Now().Add(idle)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no progress for %v: %w", ErrMismatch, idle, mismatch(want, counts))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cs.failed:
			return cs.err
		case <-tick.C:
		}
	}
}

// mismatch describes the partitions whose consumed count differs from the
// acknowledged one, or returns nil.
func mismatch(want []int64, got []atomic.Int64) error {
	var bad []string
	var wantSum, gotSum int64
	for i := range want {
		g := got[i].Load()
		wantSum += want[i]
		gotSum += g
		if g != want[i] && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("partition %d: %d acknowledged, %d consumed", i, want[i], g))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d acknowledged, %d consumed (%s)", ErrMismatch, wantSum, gotSum, strings.Join(bad, "; "))
}

// wait stops waiting for the consumers once their context is cancelled.
func (cs *consumers) wait() { cs.wg.Wait() }

// consumerTotals merges the consumers' figures.
type consumerTotals struct {
	consumer
}

func (cs *consumers) totals() consumerTotals {
	var t consumerTotals
	for _, c := range cs.each {
		t.e2e.merge(&c.e2e)
		t.windowMsgs += c.windowMsgs
		t.windowBytes += c.windowBytes
		t.allMsgs += c.allMsgs
		t.allBytes += c.allBytes
		t.last = later(t.last, c.last)
		t.lastWindow = later(t.lastWindow, c.lastWindow)
		if !c.firstWindow.IsZero() && (t.firstWindow.IsZero() || c.firstWindow.Before(t.firstWindow)) {
			t.firstWindow = c.firstWindow
		}
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
