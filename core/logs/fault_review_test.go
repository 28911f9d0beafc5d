package logs

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// Regression tests for review findings on recovery in place.

// An idempotent append whose bytes were written and published, but whose
// Log.Append then failed (here: sealing the segment its roll left behind),
// is kept by the recovery (no cut). The client's retry must be answered as a
// duplicate, not appended a second time.
func TestIdempotentRetryAfterPostPublishFailureIsDuplicate(t *testing.T) {
	clock := newClock()
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite}, Err: syscall.EIO}
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if !strings.HasSuffix(path, "index") {
			return nil
		}
		return inj.MaybeError(op, path)
	}))
	p := topicPartition(t, fs, clock, map[string]string{topicconfig.SegmentBytes: "1024"})
	seq := int32(0)
	var err error
	for {
		b := testbatch.Idempotent(7, 0, seq, 4)
		if p.Log().Size()+int64(len(b)) > 1024 {
			inj.K = inj.Count() // the seal after this roll fails writing an index
		}
		_, err = p.Append(ctx, b)
		if err != nil {
			break
		}
		if len(p.Log().Segments()) > 1 {
			t.Fatal("rolled without the seal failing")
		}
		seq += 4
	}
	if !errors.Is(err, partlog.ErrFailed) {
		t.Fatalf("append of seq %d: %v, want ErrFailed", seq, err)
	}
	end := p.Log().EndOffset()
	inj.Clear()
	clock.Advance(partlog.MaxRecoveryBackoff)
	res, err := p.Append(ctx, testbatch.Idempotent(7, 0, seq, 4)) // the client's retry
	if err != nil {
		t.Fatalf("retry of seq %d: %v", seq, err)
	}
	if !res.Duplicate || res.NextOffset != end || p.Log().EndOffset() != end {
		t.Fatalf("retry of seq %d: %+v (log end %d), want a duplicate ending at %d", seq, res, p.Log().EndOffset(), end)
	}
	n := 0
	for _, h := range logtest.Headers(t, p.Log()) {
		if h.ProducerID == 7 && h.BaseSequence == seq {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("batch seq %d of idempotent producer 7 is in the log %d times", seq, n)
	}
	// The producer goes on with the next sequence.
	if _, err := p.Append(ctx, testbatch.Idempotent(7, 0, seq+4, 4)); err != nil {
		t.Fatalf("next batch: %v", err)
	}
}

// hookClock runs a hook (once) on the first Now after it was armed.
type hookClock struct {
	*clocktest.Clock
	hook atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if h := c.hook.Swap(nil); h != nil {
		(*h)()
	}
	return c.Clock.Now()
}

// An idempotent append whose sequence checks ran in one generation is not
// appended in the next: a cut in between (here a recovery after a failed
// fsync, made right after the checks) may have removed the batches the checks
// counted on. The append is refused with a retriable error, and the retry is
// checked against the rebuilt state.
func TestIdempotentAppendRefusedAcrossCut(t *testing.T) {
	clock := &hookClock{Clock: newClock()}
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpSync}, Err: syscall.EIO}
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if !strings.HasSuffix(path, ".log") {
			return nil
		}
		return inj.MaybeError(op, path)
	}))
	p := topicPartition(t, fs, clock, nil)
	if _, err := p.Append(ctx, testbatch.Idempotent(7, 0, 0, 4)); err != nil {
		t.Fatal(err)
	}
	if p.Log().FlushedOffset() != 0 || p.Log().EndOffset() != 4 {
		t.Fatalf("flushed %d end %d: the test needs unflushed records", p.Log().FlushedOffset(), p.Log().EndOffset())
	}
	var hookErr error
	cut := func() { // runs after the checks of the next append, before it reaches the log
		inj.K = inj.Count()
		if err := p.Log().Flush(p.Log().EndOffset()); !errors.Is(err, partlog.ErrFailed) {
			hookErr = err
			return
		}
		_, hookErr = p.Log().Recover()
	}
	clock.hook.Store(&cut)
	_, err := p.Append(ctx, testbatch.Idempotent(7, 0, 4, 4))
	if hookErr != nil {
		t.Fatalf("cutting the log: %v", hookErr)
	}
	if clock.hook.Load() != nil {
		t.Fatal("the append never read the clock: the cut did not happen")
	}
	if !errors.Is(err, partlog.ErrFailed) || !errors.Is(err, partlog.ErrGenerationChanged) {
		t.Fatalf("append checked in generation 0, made after a cut: %v; want ErrFailed and ErrGenerationChanged", err)
	}
	if p.Log().EndOffset() != 0 || p.Log().Generation() != 1 {
		t.Fatalf("end %d generation %d, want 0 and 1 (the cut, nothing appended after it)", p.Log().EndOffset(), p.Log().Generation())
	}
	// The producer starts over from what the log holds: its first batch
	// goes in again, at offset 0.
	res, err := p.Append(ctx, testbatch.Idempotent(7, 0, 0, 4))
	if err != nil || res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("re-send of seq 0 after the cut: %+v %v", res, err)
	}
}
