package partlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// TestCleanConcurrent runs appenders, readers, flushes, retention and clean
// passes all at once (run it with -race). Readers must always be served
// whole batches with continuous offsets, whatever is swapped in under them;
// at the end the log says of every key what its latest record says, unless
// retention deleted that record. Nothing sleeps: the loops run until the
// appenders are done.
func TestCleanConcurrent(t *testing.T) {
	for _, truncating := range []bool{false, true} {
		t.Run(fmt.Sprintf("truncating=%v", truncating), func(t *testing.T) { testCleanConcurrent(t, truncating) })
	}
}

// genModel is offsetModel for a log that Truncate cuts: each offset holds
// the record of the latest generation appended there.
type genModel struct {
	mu   sync.Mutex
	recs map[int64]kv
	gens map[int64]int64
}

func (m *genModel) add(res AppendResult, recs []kv) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range recs {
		off := res.BaseOffset + int64(i)
		if g, ok := m.gens[off]; !ok || g <= res.Generation {
			m.recs[off], m.gens[off] = r, res.Generation
		}
	}
}

func testCleanConcurrent(t *testing.T, truncating bool) {
	clk := newClock()
	cfg := cleanConfig(clk)
	cfg.SegmentAge = 0 // rolls by size only
	cfg.RetentionBytes = 4_000
	cfg.FlushPolicy = flushpolicy.EveryMessages(10)
	l, _ := mustOpen(t, memFS(t), cfg)
	defer l.Close()

	m := &genModel{recs: map[int64]kv{}, gens: map[int64]int64{}}
	// With Truncate, the passes clean only below a high watermark that
	// only grows, and Truncate never cuts below it, as in a replica: a cut
	// below what a pass cleaned would lose the records that records past
	// the cut superseded (see CleanOptions.UpTo).
	// hwMu orders the watermark's moves and the cuts, as a replica does:
	// a pass that read hw finds no cut below it later.
	var hw atomic.Int64
	var hwMu sync.Mutex
	hw.Store(NoLimit)
	if truncating {
		hw.Store(0)
	}
	// passDone is closed (and replaced) after each clean pass: every 30
	// appends an appender waits for one, so that passes and appends
	// interleave however the goroutines are scheduled.
	var passDone atomic.Pointer[chan struct{}]
	first := make(chan struct{})
	passDone.Store(&first)
	var wg, writers sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < 300; i++ {
				var recs []kv
				for j := 0; j <= rng.IntN(3); j++ {
					k := keyName(rng.IntN(40))
					if rng.IntN(8) == 0 {
						recs = append(recs, del(k))
					} else {
						recs = append(recs, put(k, fmt.Sprintf("w%d-%d-%d", w, i, j)))
					}
				}
				o := plain()
				if i%5 == 0 {
					o = zstdOpts(o)
				}
				pass := *passDone.Load() // before the append, which makes the loop go round
				res, err := l.Append(ctx, keyed(t, o, clk.Now().UnixMilli(), recs...), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if i%30 == 29 {
					<-pass
				}
				m.add(res, recs)
				if truncating { // the high watermark follows the appends, 10 offsets behind
					hwMu.Lock()
					hw.Store(max(hw.Load(), min(res.NextOffset, l.EndOffset())-10))
					hwMu.Unlock()
				}
			}
		}()
	}
	var passes, written, deleted, reads atomic.Int64
	// Each loop goes round once per append at most (Wait), so that the
	// appenders are not starved.
	loop := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				appended := l.Wait()
				f()
				select {
				case <-stop:
					return
				case <-appended:
				}
			}
		}()
	}
	clean := func() {
		res, err := l.Clean(ctx, withCodecs(CleanOptions{UpTo: hw.Load()}))
		if err != nil && !errors.Is(err, ErrLogChanged) {
			t.Errorf("clean: %v", err)
		}
		passes.Add(1)
		written.Add(int64(res.SegmentsWritten))
	}
	loop(func() {
		clean()
		next := make(chan struct{})
		close(*passDone.Swap(&next))
	})
	loop(clean) // a second caller: passes are serialised
	loop(func() {
		del, err := l.ApplyRetention()
		if err != nil {
			t.Errorf("retention: %v", err)
		}
		deleted.Add(int64(len(del)))
	})
	loop(func() {
		if err := l.Flush(l.EndOffset()); err != nil {
			t.Errorf("flush: %v", err)
		}
	})
	if truncating {
		loop(func() {
			hwMu.Lock()
			defer hwMu.Unlock()
			e := l.EndOffset()
			// Batches hold up to 4 records: the cut stays at or above hw.
			if at := max(e-3, hw.Load()+3); at < e {
				if err := l.Truncate(at); err != nil && !isOOR(err) {
					t.Errorf("truncate: %v", err)
				}
			}
		})
	}
	for r := 0; r < 2; r++ {
		loop(func() {
			// Readers past a truncation point may read what is appended
			// there next, or come up short (see Segment.TruncateTo):
			// replicas' readers stop below it. So only without Truncate
			// must every read be right.
			if err := readThrough(l); err != nil && !truncating {
				t.Error(err)
			}
			reads.Add(1)
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	if written.Load() == 0 || deleted.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("%d passes wrote %d segments, retention deleted %d, %d reads: the loops did not overlap", passes.Load(),
			written.Load(), deleted.Load(), reads.Load())
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	mustClean(t, l, withCodecs(CleanOptions{UpTo: NoLimit}))
	withinSegmentBytes(t, l)
	v := readView(t, l)
	start := l.StartOffset()
	want := keyModel{}
	for off := start; off < l.EndOffset(); off++ {
		if r, ok := m.recs[off]; ok {
			want.apply(r)
		}
	}
	// A key written only below the log start is gone with its records.
	defer func() {
		if t.Failed() {
			for off := start; off < l.EndOffset(); off++ {
				if r, ok := m.recs[off]; ok {
					t.Logf("model %d gen %d: %s=%s", off, m.gens[off], r.key, r.value)
				}
			}
			for _, r := range v.records {
				t.Logf("log %d: %s=%s", r.off, r.key, r.value)
			}
			t.Logf("segments %s start %d end %d", segNames(l), start, l.EndOffset())
		}
	}()
	want.check(t, v)
	t.Logf("%d passes wrote %d segments, retention deleted %d segments, %d reads", passes.Load(), written.Load(), deleted.Load(), reads.Load())
}

// readThrough reads the log from its start to its end in small reads, as a
// consumer does, and fails unless every read serves whole valid batches
// continuing from the last. A start moved by retention restarts it.
func readThrough(l *Log) error {
	next := l.StartOffset()
	for next < l.EndOffset() {
		sl, err := l.Read(next, 8<<10, NoLimit)
		if errors.Is(err, ErrOffsetOutOfRange) && next < l.StartOffset() {
			next = l.StartOffset()
			continue
		}
		if err != nil {
			return fmt.Errorf("read %d: %w", next, err)
		}
		if sl.Size == 0 {
			return nil // the end moved back under us (Truncate)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			return fmt.Errorf("read %d: %w", next, err)
		}
		if sl.FirstOffset > next || sl.NextOffset <= next {
			return fmt.Errorf("read %d served [%d, %d)", next, sl.FirstOffset, sl.NextOffset)
		}
		at := sl.FirstOffset
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				return fmt.Errorf("read %d: batch at %d: %w", next, at, err)
			}
			if h.BaseOffset != at {
				return fmt.Errorf("read %d: batch at %d where %d was due", next, h.BaseOffset, at)
			}
			at = h.NextOffset()
			b = b[n:]
		}
		if at != sl.NextOffset {
			return fmt.Errorf("read %d: slice ends at %d, its batches at %d", next, sl.NextOffset, at)
		}
		next = at
	}
	return nil
}
