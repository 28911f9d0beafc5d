package partlog

import (
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// truncWorkload appends with Truncate (a replica cutting its tail) and
// ApplyRetention in between, telling inTrunc when a truncation is under way.
func truncWorkload(t *testing.T, fs vfs.FS, onOpen func(*Log), inTrunc func(bool, int64)) error {
	cfg := Config{SegmentBytes: 2000, IndexIntervalBytes: 300, RetentionBytes: 6000, RetentionAge: -1, FlushPolicy: flushpolicy.EveryMessages(4)}
	l, _, err := Open(fs, dir, cfg)
	if err != nil {
		return err
	}
	onOpen(l)
	for i := 0; i < 40; i++ {
		if _, err := l.Append(ctx, batch(i, 1+i%3, 120), 7); err != nil {
			return err
		}
		if i == 20 || i == 33 {
			off := l.EndOffset() - 9
			inTrunc(true, off)
			if err := l.Truncate(off); err != nil {
				return err
			}
			inTrunc(false, 0)
		}
		if i == 30 {
			if _, err := l.ApplyRetention(); err != nil {
				return err
			}
		}
	}
	return l.Close()
}

// TestCrashLoopTruncateRetention is the crash loop over a workload with
// truncation and retention: after a power cut before any operation the log
// serves contiguous, valid batches and keeps what was flushed (less what a
// truncation in progress was removing).
func TestCrashLoopTruncateRetention(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := truncWorkload(t, errorfs.Wrap(memFS(t), probe), func(*Log) {}, func(bool, int64) {}); err != nil {
		t.Fatal(err)
	}
	total := probe.Count()
	for _, torn := range []bool{false, true} {
		for k := 0; k < total; k++ {
			var (
				mu       sync.Mutex
				log      *Log
				durable  int64
				truncOff int64 = -1
				inTrunc  bool
			)
			c, fs := newCrasher(memFS(t), k, torn, 9, func() {
				mu.Lock()
				defer mu.Unlock()
				if log != nil {
					durable = log.FlushedOffset()
					if inTrunc {
						durable = min(durable, truncOff-2) // the batch holding truncOff goes whole (batches hold <= 3 records)
					}
				}
			})
			err := truncWorkload(t, fs, func(l *Log) { mu.Lock(); log = l; mu.Unlock() },
				func(in bool, off int64) {
					mu.Lock()
					inTrunc = in
					if in {
						truncOff = off
					}
					mu.Unlock()
				})
			if err != nil {
				t.Fatal(err)
			}
			l, rep, err := Open(c.clone, dir, Config{SegmentBytes: 2000, IndexIntervalBytes: 300, RetentionAge: -1})
			if err != nil {
				t.Fatalf("torn=%v crash %d: reopen: %v", torn, k, err)
			}
			ok := t.Run("", func(t *testing.T) {
				contiguous(t, l)
				if l.EndOffset() < durable {
					t.Fatalf("torn=%v crash %d: end %d < durable %d; %+v %s", torn, k, l.EndOffset(), durable, rep, segNames(l))
				}
			})
			l.Close()
			if !ok {
				t.Logf("torn=%v crash %d failed: %+v %s", torn, k, rep, segNames(l))
			}
		}
	}
}
