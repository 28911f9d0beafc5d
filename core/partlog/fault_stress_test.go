package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// TestFaultStress runs appenders (every ack durable, as with durable acks) and readers while faults
// come and go at every fault point, recoveries happening under them (run it
// with -race). Readers must only ever be served whole, valid batches with
// contiguous offsets; at the end every acknowledged batch is in the log, at
// the offset its ack gave.
func TestFaultStress(t *testing.T) {
	clk := newClock()
	mem := memFS(t)
	var point atomic.Int32 // index into faultPoints + 1; 0: no fault
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		i := point.Load() - 1
		if i < 0 {
			return nil
		}
		p := faultPoints[i]
		if op == p.op && strings.HasSuffix(path, p.suffix) {
			return syscall.ENOSPC
		}
		return nil
	}))
	cfg := faultConfig(clk, flushpolicy.EveryBatch)
	cfg.RecoveryBackoff = time.Millisecond
	l, _ := mustOpen(t, fs, cfg)
	defer l.Close()

	var (
		mu       sync.Mutex
		acked    = map[int64][]byte{} // base offset -> batch as acknowledged
		okCount  atomic.Int64
		errCount atomic.Int64
		progress = make(chan struct{}, 1)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	signal := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := batch(w*100000+i, 1+i%3, 50+(i*37)%400)
				res, err := l.Append(ctx, b, 0)
				if err == nil && !res.Flushed {
					// Every batch is fsynced: not flushed means cut
					// by a recovery between the append and its fsync.
					if err = l.FlushAppended(ctx, res); err == nil {
						t.Errorf("append %+v: not flushed, yet FlushAppended succeeds", res)
						return
					}
				}
				if err != nil {
					if !errors.Is(err, ErrFailed) {
						t.Errorf("append: %v", err)
						return
					}
					errCount.Add(1)
					signal()
					continue
				}
				record.SetBaseOffset(b, res.BaseOffset)
				mu.Lock()
				acked[res.BaseOffset] = b
				mu.Unlock()
				okCount.Add(1)
				signal()
			}
		}()
	}
	var served atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := readPass(l); err != nil {
					t.Error(err)
					return
				}
				served.Add(1)
			}
		}()
	}
	// waitFor returns once cond holds, polling on the appenders' progress.
	waitFor := func(what string, cond func() bool) {
		deadline := time.After(20 * time.Second)
		for !cond() {
			select {
			case <-progress:
			case <-deadline:
				t.Fatalf("waiting for %s: %d acks, %d errors", what, okCount.Load(), errCount.Load())
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := 24
	if testing.Short() {
		rounds = 8
	}
	for r := range rounds {
		errs, oks := errCount.Load(), okCount.Load()
		point.Store(int32(1 + rng.IntN(len(faultPoints))))
		clk.Advance(MaxRecoveryBackoff) // recovery attempts meet the fault
		waitFor(fmt.Sprintf("round %d: failures", r), func() bool { return errCount.Load() >= errs+3 })
		point.Store(0)
		oks = okCount.Load()
		clk.Advance(MaxRecoveryBackoff)
		waitFor(fmt.Sprintf("round %d: recovery", r), func() bool { return okCount.Load() >= oks+20 })
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d acks, %d refused appends, %d recoveries, %d read passes", okCount.Load(), errCount.Load(), l.Recoveries(), served.Load())
	if _, err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	contiguous(t, l)
	got := map[int64][]byte{}
	for _, b := range readAll(t, l, 1<<20) {
		h, _ := record.ParseHeader(b)
		got[h.BaseOffset] = b
	}
	for off, b := range acked {
		if !bytes.Equal(got[off], b) {
			t.Fatalf("acknowledged batch at %d lost or replaced", off)
		}
	}
}

// readPass reads the log from its start to its end as a consumer would and
// reports a batch that is torn, corrupt or out of order. A log end that moves
// back under it (a cut) ends the pass early; a Slice that comes up short
// (its bytes were cut) is not served.
func readPass(l *Log) error {
	next := l.StartOffset()
	for next < l.EndOffset() {
		sl, err := l.Read(next, 4096, NoLimit)
		if errors.Is(err, ErrOffsetOutOfRange) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %d: %w", next, err)
		}
		if sl.Size == 0 {
			return nil
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			return nil // short: cut under the reader
		}
		bs, err := testbatch.Split(b)
		if err != nil {
			return fmt.Errorf("read %d served a bad batch: %w", next, err)
		}
		for _, bb := range bs {
			h, _ := record.ParseHeader(bb)
			if h.BaseOffset > next || h.NextOffset() <= next {
				return fmt.Errorf("read %d served a batch [%d, %d)", next, h.BaseOffset, h.NextOffset())
			}
			next = h.NextOffset()
		}
	}
	return nil
}
