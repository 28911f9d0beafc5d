package logs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
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
		end := p.Log().EndOffset()
		res, err := p.Append(context.Background(), s.records)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Errorf("%s: err %v, want %v", s.name, err, s.err)
			}
			if p.Log().EndOffset() != end {
				t.Errorf("%s: rejected batch appended (end %d -> %d)", s.name, end, p.Log().EndOffset())
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
		if s.dup && p.Log().EndOffset() != end {
			t.Errorf("%s: duplicate appended (end %d -> %d)", s.name, end, p.Log().EndOffset())
		}
	}
}

// newTestPartition opens a partition on a fresh in-memory data directory;
// maxBatch (when not 0) is its max.message.bytes.
func newTestPartition(t *testing.T, maxBatch int) *Partition {
	t.Helper()
	m, err := NewManager(Options{FS: vfs.NewMem(), Dir: "/d", Clock: clocktest.New(time.UnixMilli(1_700_000_000_000))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("idem", 0, [16]byte{1}, PartitionConfig{Log: partlog.Config{MaxBatchBytes: maxBatch}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestIdempotence(t *testing.T) {
	p := newTestPartition(t, 0)
	const M = math.MaxInt32
	corrupt := testbatch.Idempotent(1, 0, 11, 2)
	corrupt[len(corrupt)-1] ^= 0xff
	corruptGap := testbatch.Idempotent(1, 0, 20, 1)
	corruptGap[len(corruptGap)-1] ^= 0xff
	multi := append(testbatch.Idempotent(4, 0, 0, 2), testbatch.Idempotent(4, 0, 2, 3)...)
	steps := []idemStep{
		{name: "first", records: testbatch.Idempotent(1, 0, 0, 3), base: 0, next: 3},
		{name: "in order 2", records: testbatch.Idempotent(1, 0, 3, 2), base: 3, next: 5},
		{name: "in order 3", records: testbatch.Idempotent(1, 0, 5, 1), base: 5, next: 6},
		{name: "plain batch between", records: testbatch.Tagged("plain", 2), base: 6, next: 8},
		{name: "in order 4", records: testbatch.Idempotent(1, 0, 6, 4), base: 8, next: 12},
		{name: "in order 5", records: testbatch.Idempotent(1, 0, 10, 1), base: 12, next: 13},
		{name: "in order 6", records: testbatch.Idempotent(1, 0, 11, 2), base: 13, next: 15},
		// The last 5 batches (sequences 3, 5, 6, 10, 11) are remembered.
		{name: "duplicate of 5th last", records: testbatch.Idempotent(1, 0, 3, 2), dup: true, base: 3, next: 5},
		{name: "duplicate of 4th last", records: testbatch.Idempotent(1, 0, 5, 1), dup: true, base: 5, next: 6},
		{name: "duplicate of 3rd last", records: testbatch.Idempotent(1, 0, 6, 4), dup: true, base: 8, next: 12},
		{name: "duplicate of 2nd last", records: testbatch.Idempotent(1, 0, 10, 1), dup: true, base: 12, next: 13},
		{name: "duplicate of last", records: testbatch.Idempotent(1, 0, 11, 2), dup: true, base: 13, next: 15},
		{name: "corrupt duplicate", records: corrupt, err: record.ErrCorrupt},
		{name: "corrupt gap", records: corruptGap, err: record.ErrCorrupt},
		{name: "forgotten (6th last) batch", records: testbatch.Idempotent(1, 0, 0, 3), err: producers.ErrDuplicateSequence},
		{name: "inside remembered, not a batch", records: testbatch.Idempotent(1, 0, 4, 1), err: producers.ErrDuplicateSequence},
		{name: "overlapping the last", records: testbatch.Idempotent(1, 0, 12, 2), err: producers.ErrOutOfOrderSequence},
		{name: "gap", records: testbatch.Idempotent(1, 0, 14, 1), err: producers.ErrOutOfOrderSequence},
		{name: "new epoch not at 0", records: testbatch.Idempotent(1, 1, 13, 1), err: producers.ErrOutOfOrderSequence},
		{name: "new epoch at 0", records: testbatch.Idempotent(1, 1, 0, 1), base: 15, next: 16},
		{name: "old epoch in sequence", records: testbatch.Idempotent(1, 0, 13, 1), err: producers.ErrInvalidProducerEpoch},
		{name: "old epoch duplicate", records: testbatch.Idempotent(1, 0, 11, 2), err: producers.ErrInvalidProducerEpoch},
		{name: "new epoch duplicate", records: testbatch.Idempotent(1, 1, 0, 1), dup: true, base: 15, next: 16},
		{name: "new epoch in order", records: testbatch.Idempotent(1, 1, 1, 1), base: 16, next: 17},
		{name: "unknown producer not at 0", records: testbatch.Idempotent(2, 0, 5, 1), err: producers.ErrUnknownProducerID},
		{name: "unknown producer 99", records: testbatch.Idempotent(99, 0, 1, 1), err: producers.ErrUnknownProducerID},
		{name: "unknown producer at 0", records: testbatch.Idempotent(2, 3, 0, 1), base: 17, next: 18},
		{name: "negative sequence", records: testbatch.Idempotent(2, 3, -1, 1), err: producers.ErrOutOfOrderSequence},
		{name: "negative epoch", records: testbatch.Idempotent(2, -2, 1, 1), err: producers.ErrInvalidProducerEpoch},
		{name: "multi-batch request", records: multi, base: 18, next: 23},
		{name: "multi-batch retry", records: append([]byte(nil), multi...), dup: true, base: 18, next: 23},
		{name: "multi-batch half duplicate", records: append(testbatch.Idempotent(4, 0, 2, 3), testbatch.Idempotent(4, 0, 5, 1)...), err: producers.ErrOutOfOrderSequence},
		// Wraparound: pretend producer 3 reached MaxInt32-1.
		{name: "wrap setup", setState: func(p *Partition) {
			e := p.prod.Lock(3)
			e.State.Push(0, producers.Batch{FirstSeq: M - 2, LastSeq: M - 1, Base: 100, Next: 102})
			p.prod.Unlock(3, e)
		}},
		{name: "wrapping batch", records: testbatch.Idempotent(3, 0, M, 3), base: 23, next: 26},
		{name: "after wrap", records: testbatch.Idempotent(3, 0, 2, 1), base: 26, next: 27},
		{name: "duplicate of wrapping batch", records: testbatch.Idempotent(3, 0, M, 3), dup: true, base: 23, next: 26},
		{name: "duplicate before wrap", records: testbatch.Idempotent(3, 0, M-2, 2), dup: true, base: 100, next: 102},
		{name: "stale after wrap", records: testbatch.Idempotent(3, 0, 0, 1), err: producers.ErrDuplicateSequence},
		{name: "gap after wrap", records: testbatch.Idempotent(3, 0, 4, 1), err: producers.ErrOutOfOrderSequence},
		{name: "restart at MaxInt32", records: testbatch.Idempotent(3, 0, M, 1), err: producers.ErrDuplicateSequence},
	}
	runIdemSteps(t, p, steps)
	if n := p.prod.Count(); n != 4 {
		t.Errorf("%d producers remembered, want 4 (producer 99, rejected, is not kept)", n)
	}
	// Every batch appended once, in order.
	var ends []int64
	for _, h := range logtest.Headers(t, p.Log()) {
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
	p := newTestPartition(t, 200)
	if _, err := p.Append(context.Background(), testbatch.Idempotent(1, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	big := testbatch.Idempotent(1, 0, 5, 20)
	if _, err := p.Append(context.Background(), big); !errors.Is(err, partlog.ErrBatchTooLarge) {
		t.Errorf("big gap batch: %v", err)
	}
	if _, err := p.Append(context.Background(), testbatch.Idempotent(1, 0, 1, 20)); !errors.Is(err, partlog.ErrBatchTooLarge) {
		t.Errorf("big in-order batch: %v", err)
	}
}

// TestRebuildProducers: after a reopen the producers are remembered
// (retries get their original offsets, the next sequence goes on, epochs
// survive), those whose batches only an older segment holds too: from the
// snapshot Close takes (clean), from the one taken at the roll (crash),
// from every batch header when no snapshot is left (crash, none) or the
// latest does not restore (damaged: the one before it, or the headers). A
// log closed cleanly without any snapshot, as weir wrote them before it
// kept snapshots (upgrade), is read from its active segment only, as
// before: producer 1 is forgotten (UNKNOWN_PRODUCER_ID).
func TestRebuildProducers(t *testing.T) {
	for _, mode := range []string{"clean", "crash", "crash, no snapshot", "damaged", "upgrade"} {
		t.Run(mode, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := PartitionConfig{Log: partlog.Config{SegmentBytes: 1024}}
			openRB := func(fsys vfs.FS) *Partition {
				t.Helper()
				m, err := NewManager(Options{FS: fsys, Dir: "/d"})
				if err != nil {
					t.Fatal(err)
				}
				p, err := m.Open("rb", 0, [16]byte{7}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := openRB(mem)
			mustAppend := func(b []byte) AppendResult {
				t.Helper()
				res, err := p.Append(context.Background(), b)
				if err != nil || res.Duplicate {
					t.Fatalf("append: %+v %v", res, err)
				}
				return res
			}
			// Producer 1 writes into the first segment only.
			p1 := mustAppend(testbatch.Idempotent(1, 0, 0, 2))
			// Roll with plain batches until producer 1 is out of the active segment.
			for i := 0; len(p.Log().Segments()) < 2; i++ {
				mustAppend(testbatch.Tagged(fmt.Sprint("fill", i), 10))
			}
			// Producer 2: seven batches (only the last 5 are remembered),
			// producer 3: a batch at epoch 0, then epoch 2.
			var p2 []AppendResult
			for i := range 7 {
				p2 = append(p2, mustAppend(testbatch.Idempotent(2, 5, int32(i), 1)))
			}
			p3 := mustAppend(testbatch.Idempotent(3, 0, 0, 1))
			p3 = mustAppend(testbatch.Idempotent(3, 2, 0, 4))
			if len(p.Log().Segments()) != 2 {
				t.Fatalf("%d segments; the test wants producers 2 and 3 in the second (active) one", len(p.Log().Segments()))
			}
			end := p.Log().EndOffset()
			dir := p.Log().Dir()
			snaps := func(fsys vfs.FS) []string {
				names, err := fsys.List(dir)
				if err != nil {
					t.Fatal(err)
				}
				return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, snapshotSuffix) })
			}
			switch mode {
			case "clean", "upgrade", "damaged":
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			default:
				if err := p.Log().Flush(end); err != nil {
					t.Fatal(err)
				}
				clone := mem.CrashClone()
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				mem = clone
			}
			names := snaps(mem)
			if len(names) == 0 {
				t.Fatalf("no snapshot taken (%s)", mode)
			}
			switch mode {
			case "crash, no snapshot", "upgrade":
				for _, n := range names {
					if err := mem.Remove(dir + "/" + n); err != nil {
						t.Fatal(err)
					}
				}
			case "damaged":
				latest := dir + "/" + names[len(names)-1]
				b, err := vfs.ReadFile(mem, latest)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 0xff
				if err := vfs.WriteFileSynced(mem, latest, b); err != nil {
					t.Fatal(err)
				}
			}
			p = openRB(mem)
			defer p.Close()
			if p.Log().EndOffset() != end {
				t.Fatalf("reopened log ends at %d, want %d", p.Log().EndOffset(), end)
			}
			steps := []idemStep{
				{name: "producer 2 retry of its 2nd (forgotten)", records: testbatch.Idempotent(2, 5, 1, 1), err: producers.ErrDuplicateSequence},
				{name: "producer 2 retry of its last", records: testbatch.Idempotent(2, 5, 6, 1), dup: true, base: p2[6].BaseOffset, next: p2[6].NextOffset},
				{name: "producer 2 retry of its 5th last", records: testbatch.Idempotent(2, 5, 2, 1), dup: true, base: p2[2].BaseOffset, next: p2[2].NextOffset},
				{name: "producer 2 retry of its 3rd last", records: testbatch.Idempotent(2, 5, 4, 1), dup: true, base: p2[4].BaseOffset, next: p2[4].NextOffset},
				{name: "producer 2 old epoch", records: testbatch.Idempotent(2, 4, 7, 1), err: producers.ErrInvalidProducerEpoch},
				{name: "producer 3 old epoch", records: testbatch.Idempotent(3, 0, 1, 1), err: producers.ErrInvalidProducerEpoch},
				{name: "producer 3 retry", records: testbatch.Idempotent(3, 2, 0, 4), dup: true, base: p3.BaseOffset, next: p3.NextOffset},
			}
			if mode == "upgrade" {
				steps = append(steps,
					idemStep{name: "producer 1 forgotten", records: testbatch.Idempotent(1, 0, 2, 1), err: producers.ErrUnknownProducerID},
					idemStep{name: "producer 2 goes on", records: testbatch.Idempotent(2, 5, 7, 1), base: end, next: end + 1},
					idemStep{name: "producer 1 starts over", records: testbatch.Idempotent(1, 1, 0, 1), base: end + 1, next: end + 2})
			} else {
				steps = append(steps,
					idemStep{name: "producer 1 retry (older segment)", records: testbatch.Idempotent(1, 0, 0, 2), dup: true, base: p1.BaseOffset, next: p1.NextOffset},
					idemStep{name: "producer 1 goes on", records: testbatch.Idempotent(1, 0, 2, 1), base: end, next: end + 1},
					idemStep{name: "producer 2 goes on", records: testbatch.Idempotent(2, 5, 7, 1), base: end + 1, next: end + 2})
			}
			runIdemSteps(t, p, steps)
		})
	}
}
