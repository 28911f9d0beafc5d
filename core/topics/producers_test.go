package topics

import (
	"errors"
	"math"
	"testing"

	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// idemStep is one produce request and what Append must answer.
type idemStep struct {
	name     string
	records  []byte
	dup      bool  // Duplicate with the offsets below
	base     int64 // expected BaseOffset (append or duplicate)
	next     int64
	err      error // expected error (errors.Is); nothing appended
	setState func(p *Partition)
}

func runIdemSteps(t *testing.T, p *Partition, steps []idemStep) {
	t.Helper()
	for _, s := range steps {
		if s.setState != nil {
			s.setState(p)
		}
		if s.records == nil {
			continue
		}
		end := p.Log.EndOffset()
		res, err := p.Append(ctx, s.records)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Errorf("%s: err %v, want %v", s.name, err, s.err)
			}
			if p.Log.EndOffset() != end {
				t.Errorf("%s: rejected batch appended (end %d -> %d)", s.name, end, p.Log.EndOffset())
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if res.Duplicate != s.dup || res.BaseOffset != s.base || res.NextOffset != s.next || res.LogAppendTime != -1 {
			t.Errorf("%s: got %+v, want dup=%v %d..%d", s.name, res, s.dup, s.base, s.next)
		}
		if s.dup && p.Log.EndOffset() != end {
			t.Errorf("%s: duplicate appended (end %d -> %d)", s.name, end, p.Log.EndOffset())
		}
	}
}

func newTestPartition(t *testing.T, configs map[string]string) (*Registry, *Partition) {
	t.Helper()
	r := open(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { r.Close() })
	tp, err := r.Create("idem", 1, configs)
	if err != nil {
		t.Fatal(err)
	}
	return r, tp.Partitions[0]
}

func TestIdempotence(t *testing.T) {
	_, p := newTestPartition(t, nil)
	const M = math.MaxInt32
	corrupt := idem(t, 1, 0, 11, 2)
	corrupt[len(corrupt)-1] ^= 0xff
	corruptGap := idem(t, 1, 0, 20, 1)
	corruptGap[len(corruptGap)-1] ^= 0xff
	multi := append(idem(t, 4, 0, 0, 2), idem(t, 4, 0, 2, 3)...)
	steps := []idemStep{
		{name: "first", records: idem(t, 1, 0, 0, 3), base: 0, next: 3},
		{name: "in order 2", records: idem(t, 1, 0, 3, 2), base: 3, next: 5},
		{name: "in order 3", records: idem(t, 1, 0, 5, 1), base: 5, next: 6},
		{name: "plain batch between", records: batch(t, "plain", 2), base: 6, next: 8},
		{name: "in order 4", records: idem(t, 1, 0, 6, 4), base: 8, next: 12},
		{name: "in order 5", records: idem(t, 1, 0, 10, 1), base: 12, next: 13},
		{name: "in order 6", records: idem(t, 1, 0, 11, 2), base: 13, next: 15},
		// The last 5 batches (sequences 3, 5, 6, 10, 11) are remembered.
		{name: "duplicate of 5th last", records: idem(t, 1, 0, 3, 2), dup: true, base: 3, next: 5},
		{name: "duplicate of 4th last", records: idem(t, 1, 0, 5, 1), dup: true, base: 5, next: 6},
		{name: "duplicate of 3rd last", records: idem(t, 1, 0, 6, 4), dup: true, base: 8, next: 12},
		{name: "duplicate of 2nd last", records: idem(t, 1, 0, 10, 1), dup: true, base: 12, next: 13},
		{name: "duplicate of last", records: idem(t, 1, 0, 11, 2), dup: true, base: 13, next: 15},
		{name: "corrupt duplicate", records: corrupt, err: record.ErrCorrupt},
		{name: "corrupt gap", records: corruptGap, err: record.ErrCorrupt},
		{name: "forgotten (6th last) batch", records: idem(t, 1, 0, 0, 3), err: producers.ErrDuplicateSequence},
		{name: "inside remembered, not a batch", records: idem(t, 1, 0, 4, 1), err: producers.ErrDuplicateSequence},
		{name: "overlapping the last", records: idem(t, 1, 0, 12, 2), err: producers.ErrOutOfOrderSequence},
		{name: "gap", records: idem(t, 1, 0, 14, 1), err: producers.ErrOutOfOrderSequence},
		{name: "new epoch not at 0", records: idem(t, 1, 1, 13, 1), err: producers.ErrOutOfOrderSequence},
		{name: "new epoch at 0", records: idem(t, 1, 1, 0, 1), base: 15, next: 16},
		{name: "old epoch in sequence", records: idem(t, 1, 0, 13, 1), err: producers.ErrInvalidProducerEpoch},
		{name: "old epoch duplicate", records: idem(t, 1, 0, 11, 2), err: producers.ErrInvalidProducerEpoch},
		{name: "new epoch duplicate", records: idem(t, 1, 1, 0, 1), dup: true, base: 15, next: 16},
		{name: "new epoch in order", records: idem(t, 1, 1, 1, 1), base: 16, next: 17},
		{name: "unknown producer not at 0", records: idem(t, 2, 0, 5, 1), err: producers.ErrUnknownProducerID},
		{name: "unknown producer 99", records: idem(t, 99, 0, 1, 1), err: producers.ErrUnknownProducerID},
		{name: "unknown producer at 0", records: idem(t, 2, 3, 0, 1), base: 17, next: 18},
		{name: "negative sequence", records: idem(t, 2, 3, -1, 1), err: producers.ErrOutOfOrderSequence},
		{name: "negative epoch", records: idem(t, 2, -2, 1, 1), err: producers.ErrInvalidProducerEpoch},
		{name: "multi-batch request", records: multi, base: 18, next: 23},
		{name: "multi-batch retry", records: append([]byte(nil), multi...), dup: true, base: 18, next: 23},
		{name: "multi-batch half duplicate", records: append(idem(t, 4, 0, 2, 3), idem(t, 4, 0, 5, 1)...), err: producers.ErrOutOfOrderSequence},
		// Wraparound: pretend producer 3 reached MaxInt32-1.
		{name: "wrap setup", setState: func(p *Partition) {
			e := p.prod.Lock(3)
			e.State.Push(0, producers.Batch{FirstSeq: M - 2, LastSeq: M - 1, Base: 100, Next: 102})
			p.prod.Unlock(3, e)
		}},
		{name: "wrapping batch", records: idem(t, 3, 0, M, 3), base: 23, next: 26},
		{name: "after wrap", records: idem(t, 3, 0, 2, 1), base: 26, next: 27},
		{name: "duplicate of wrapping batch", records: idem(t, 3, 0, M, 3), dup: true, base: 23, next: 26},
		{name: "duplicate before wrap", records: idem(t, 3, 0, M-2, 2), dup: true, base: 100, next: 102},
		{name: "stale after wrap", records: idem(t, 3, 0, 0, 1), err: producers.ErrDuplicateSequence},
		{name: "gap after wrap", records: idem(t, 3, 0, 4, 1), err: producers.ErrOutOfOrderSequence},
		{name: "restart at MaxInt32", records: idem(t, 3, 0, M, 1), err: producers.ErrDuplicateSequence},
	}
	runIdemSteps(t, p, steps)
	if n := p.prod.Count(); n != 4 {
		t.Errorf("%d producers remembered, want 4 (producer 99, rejected, is not kept)", n)
	}
	// Every batch appended once, in order.
	var ends []int64
	for _, h := range readAll(t, p.Log) {
		ends = append(ends, h.NextOffset())
	}
	want := []int64{3, 5, 6, 8, 12, 13, 15, 16, 17, 18, 20, 23, 26, 27}
	if len(ends) != len(want) {
		t.Fatalf("log batch ends %v, want %v", ends, want)
	}
	for i := range want {
		if ends[i] != want[i] {
			t.Fatalf("log batch ends %v, want %v", ends, want)
		}
	}
}

// TestIdempotenceSizeLimit: a duplicate or refused batch over
// max.message.bytes gets the same error the log gives.
func TestIdempotenceSizeLimit(t *testing.T) {
	_, p := newTestPartition(t, map[string]string{"max.message.bytes": "200"})
	if _, err := p.Append(ctx, idem(t, 1, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	big := idem(t, 1, 0, 5, 20)
	if _, err := p.Append(ctx, big); !errors.Is(err, partlogErrBatchTooLarge) {
		t.Errorf("big gap batch: %v", err)
	}
	if _, err := p.Append(ctx, idem(t, 1, 0, 1, 20)); !errors.Is(err, partlogErrBatchTooLarge) {
		t.Errorf("big in-order batch: %v", err)
	}
}
