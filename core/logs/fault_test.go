package logs

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// fsyncFault fails fsyncs of the segment files (.log; not the marker or the
// indexes) from the K-th on, as armed.
func fsyncFault(mem vfs.FS) (vfs.FS, *errorfs.FailAt) {
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpSync}, Err: syscall.EIO}
	return errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if !strings.HasSuffix(path, ".log") {
			return nil
		}
		return inj.MaybeError(op, path)
	})), inj
}

// TestDurableAckAcrossFsyncFailure: with durable acks, a produce whose fsync
// fails gets a storage error and is not acknowledged; once the fault is gone
// the partition recovers by itself, every acknowledged record is there, and
// the next produce lands right after them. An idempotent producer's retry of
// the failed batch is appended anew (its first append was cut), not answered
// as a duplicate of records that are gone; a retry of a batch that survived
// still is.
func TestDurableAckAcrossFsyncFailure(t *testing.T) {
	clock := newClock()
	mem := vfs.NewMem()
	fs, inj := fsyncFault(mem)
	p := topicPartition(t, fs, clock, map[string]string{topicconfig.DurableAcks: "true"})
	first, err := p.Append(ctx, testbatch.Idempotent(7, 0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.Append(ctx, testbatch.Tagged("plain", 3))
	if err != nil {
		t.Fatal(err)
	}
	acked := plain.NextOffset

	inj.K = inj.Count()
	retry := testbatch.Idempotent(7, 0, 2, 2)
	if _, err := p.Append(ctx, append([]byte(nil), retry...)); !errors.Is(err, partlog.ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("produce over a failing fsync: %v", err)
	}
	if _, err := p.Append(ctx, testbatch.Tagged("refused", 1)); !errors.Is(err, partlog.ErrFailed) {
		t.Fatalf("produce to a failed partition: %v", err)
	}
	if p.Log().EndOffset() != acked {
		t.Fatalf("a failed partition serves up to %d, beyond the durable %d", p.Log().EndOffset(), acked)
	}
	inj.Clear()
	clock.Advance(partlog.MaxRecoveryBackoff)

	res, err := p.Append(ctx, append([]byte(nil), retry...))
	if err != nil {
		t.Fatalf("retry after the fault cleared: %v", err)
	}
	if res.Duplicate || res.BaseOffset != acked {
		t.Fatalf("retry of the cut batch: %+v; want it appended at %d", res, acked)
	}
	if p.Log().Recoveries() != 1 || p.Log().Generation() != 1 {
		t.Fatalf("recoveries %d, generation %d; want 1 and 1", p.Log().Recoveries(), p.Log().Generation())
	}
	dup, err := p.Append(ctx, testbatch.Idempotent(7, 0, 0, 2))
	if err != nil || !dup.Duplicate || dup.BaseOffset != first.BaseOffset {
		t.Fatalf("retry of a batch that survived: %+v, %v; want a duplicate at %d", dup, err, first.BaseOffset)
	}
	next, err := p.Append(ctx, testbatch.Idempotent(7, 0, 4, 1))
	if err != nil || next.BaseOffset != res.NextOffset {
		t.Fatalf("producer goes on: %+v, %v; want offset %d", next, err, res.NextOffset)
	}
	hs := logtest.Headers(t, p.Log())
	var seqs []int32
	for _, h := range hs {
		seqs = append(seqs, h.BaseSequence)
	}
	if len(hs) != 4 || seqs[0] != 0 || seqs[2] != 2 || seqs[3] != 4 {
		t.Fatalf("log holds batches with sequences %v; want 0, (plain), 2, 4", seqs)
	}
	if p.Log().FlushedOffset() != p.Log().EndOffset() {
		t.Fatalf("durable acks given with flushed %d < end %d", p.Log().FlushedOffset(), p.Log().EndOffset())
	}
}

// TestDuplicateOfCutBatch: without durable acks, a batch appended (and
// acknowledged) then cut by an fsync failure's recovery is gone; the
// producer's retry of it must not be answered with its old offsets.
func TestDuplicateOfCutBatch(t *testing.T) {
	clock := newClock()
	fs, inj := fsyncFault(vfs.NewMem())
	p := topicPartition(t, fs, clock, nil)
	if _, err := p.Append(ctx, testbatch.Idempotent(3, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Log().Flush(p.Log().EndOffset()); err != nil {
		t.Fatal(err)
	}
	cut, err := p.Append(ctx, testbatch.Idempotent(3, 0, 1, 1)) // acknowledged, not durable
	if err != nil {
		t.Fatal(err)
	}
	inj.K = inj.Count()
	if err := p.Log().Flush(p.Log().EndOffset()); !errors.Is(err, partlog.ErrFailed) {
		t.Fatalf("flush: %v", err)
	}
	inj.Clear()
	if _, err := p.Log().Recover(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(ctx, testbatch.Idempotent(3, 0, 1, 1))
	if err != nil || res.Duplicate || res.BaseOffset != cut.BaseOffset {
		t.Fatalf("retry of a cut batch: %+v, %v; want it appended again at %d", res, err, cut.BaseOffset)
	}
	if hs := logtest.Headers(t, p.Log()); len(hs) != 2 || hs[1].BaseSequence != 1 {
		t.Fatalf("log holds %d batches: %+v", len(hs), hs)
	}
}
