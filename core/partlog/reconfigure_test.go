package partlog

import (
	"errors"
	"testing"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Reconfigure changes segment size, retention, the batch limit and the flush
// policy of an open log: each applies to the next append or retention pass.
func TestReconfigure(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{RetentionAge: -1})
	defer l.Close()
	m := newModel()
	for i := range 8 {
		if _, err := m.append(t, l, batch(i, 1, 900)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments before, want 1", n)
	}
	// Smaller segments: the next appends roll.
	if err := l.Reconfigure(Config{SegmentBytes: 2048, RetentionAge: -1}); err != nil {
		t.Fatal(err)
	}
	for i := 8; i < 16; i++ {
		if _, err := m.append(t, l, batch(i, 1, 900)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments after SegmentBytes=2048, want several: %s", n, segNames(l))
	}
	if err := l.Flush(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	// Retention by size, set live: the next pass deletes.
	if deleted, err := l.ApplyRetention(); err != nil || len(deleted) != 0 {
		t.Fatalf("retention before: deleted %v, %v", deleted, err)
	}
	if err := l.Reconfigure(Config{SegmentBytes: 2048, RetentionAge: -1, RetentionBytes: 3000}); err != nil {
		t.Fatal(err)
	}
	if deleted, err := l.ApplyRetention(); err != nil || len(deleted) == 0 {
		t.Fatalf("retention after RetentionBytes=3000: deleted %v, %v", deleted, err)
	}
	m.check(t, l, l.StartOffset(), l.EndOffset())
	// A smaller batch limit refuses the next large batch.
	if err := l.Reconfigure(Config{SegmentBytes: 2048, RetentionAge: -1, MaxBatchBytes: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(t.Context(), batch(99, 1, 900), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("900-byte batch with MaxBatchBytes=500: %v", err)
	}
	// A flush policy fsyncing every batch: the next append is durable.
	if err := l.Reconfigure(Config{SegmentBytes: 2048, RetentionAge: -1, FlushPolicy: flushpolicy.EveryBatch()}); err != nil {
		t.Fatal(err)
	}
	syncs := l.Syncs()
	res, err := m.append(t, l, batch(100, 1, 100))
	if err != nil {
		t.Fatal(err)
	}
	if l.Syncs() == syncs || l.FlushedOffset() < res.NextOffset {
		t.Fatalf("append after FlushPolicy=every-batch not fsynced: syncs %d -> %d, flushed %d < %d",
			syncs, l.Syncs(), l.FlushedOffset(), res.NextOffset)
	}
	// Invalid settings change nothing.
	if err := l.Reconfigure(Config{SegmentBytes: 10}); err == nil {
		t.Fatal("SegmentBytes=10 accepted")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Reconfigure(Config{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reconfigure after Close: %v", err)
	}
}

// Reconfigure while appends run: every append lands once, in order, under
// one of the settings, and the race detector sees the swaps as safe.
func TestReconfigureUnderAppends(t *testing.T) {
	fs := memFS(t)
	l, _ := mustOpen(t, fs, Config{SegmentBytes: 4096, RetentionAge: -1})
	defer l.Close()
	const writers, each = 4, 50
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := l.Append(t.Context(), batch(w*each+i, 1, 200), 0); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	policies := []func() flushpolicy.Policy{flushpolicy.EveryBatch, flushpolicy.Never, func() flushpolicy.Policy { return flushpolicy.EveryMessages(3) }}
	for i, finished := 0, 0; finished < writers; i++ {
		if err := l.Reconfigure(Config{SegmentBytes: int64(2048 + 1024*(i%3)), RetentionAge: -1, FlushPolicy: policies[i%3]()}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
		default:
		}
	}
	if got := len(readAll(t, l, 1<<20)); got != writers*each {
		t.Fatalf("read %d batches, want %d", got, writers*each)
	}
}
