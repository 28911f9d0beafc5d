package logs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// txnModel is what the log's own bytes say of its transactions: read
// whole, from the start, with nothing but package record.
type txnModel struct {
	open    map[int64]int64
	aborted []AbortedTxn
}

func modelOf(t *testing.T, p *Partition) txnModel {
	t.Helper()
	m := txnModel{open: map[int64]int64{}}
	for off := p.Log().StartOffset(); off < p.Log().EndOffset(); {
		sl, err := p.Log().Read(off, 1<<20, partlog.NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, len(b))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case h.Control():
				mk, err := record.ParseControlBatch(b[:n])
				if err != nil {
					t.Fatal(err)
				}
				if first, ok := m.open[h.ProducerID]; ok {
					if mk.Type == record.ControlAbort {
						m.aborted = append(m.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first})
					}
					delete(m.open, h.ProducerID)
				}
			case h.Transactional():
				if _, ok := m.open[h.ProducerID]; !ok {
					m.open[h.ProducerID] = h.BaseOffset
				}
			}
			off = h.NextOffset()
			b = b[n:]
		}
	}
	return m
}

func (m txnModel) check(t *testing.T, p *Partition, when string) {
	t.Helper()
	first, ok := int64(0), false
	for _, f := range m.open {
		if !ok || f < first {
			first, ok = f, true
		}
	}
	got, gotOK := p.FirstUnstableOffset()
	if gotOK != ok || got != first {
		t.Fatalf("%s: FirstUnstableOffset %d %v, the log says %d %v (open %v)", when, got, gotOK, first, ok, m.open)
	}
	if ab := p.AbortedTxns(0, p.Log().EndOffset()); !slices.Equal(ab, m.aborted) {
		t.Fatalf("%s: AbortedTxns %v, the log says %v", when, ab, m.aborted)
	}
}

// TestTxnCrashLoop: random transactional appends, plain appends, commit
// and abort markers and truncations over small segments (so that
// snapshots and index files roll), with power cuts (torn writes kept at
// random) and clean restarts among them: after each restart, and after
// each step, the open transactions and the aborted index agree with what
// the log's bytes say.
func TestTxnCrashLoop(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			mem := vfs.NewMem()
			clk := newClock()
			pc := topicConfig(t, clk, nil, map[string]string{"segment.bytes": "1024"}, true)
			open := func() *Partition {
				p, err := newManager(t, mem, clk).Open("t", 0, testTopicID("t"), pc)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := open()
			defer func() { p.Close() }()
			nextID := int64(0)
			seq := map[int64]int32{} // producers of this incarnation, and their next sequence
			for step := range 300 {
				m := modelOf(t, p)
				switch r := rng.IntN(100); {
				case r < 40: // a transactional batch
					if len(seq) < 3 {
						seq[nextID] = 0
						nextID++
					}
					ids := slices.Sorted(func(yield func(int64) bool) {
						for id := range seq {
							if !yield(id) {
								return
							}
						}
					})
					id := ids[rng.IntN(len(ids))]
					n := 1 + rng.IntN(3)
					mustAppend(t, p, txnBatch(t, id, 0, seq[id], n))
					seq[id] += int32(n)
				case r < 50:
					mustAppend(t, p, plainBatch(t, 1+rng.IntN(2)))
				case r < 80: // a marker for an open transaction (of any incarnation)
					if len(m.open) == 0 {
						continue
					}
					ids := slices.Sorted(func(yield func(int64) bool) {
						for id := range m.open {
							if !yield(id) {
								return
							}
						}
					})
					id := ids[rng.IntN(len(ids))]
					mustMarker(t, p, Marker{ProducerID: id, ProducerEpoch: 0, Commit: rng.IntN(2) == 0, CoordinatorEpoch: 1})
				case r < 85: // a follower's truncation
					end := p.Log().EndOffset()
					to := end - int64(rng.IntN(int(min(end, 6))+1))
					if err := p.Log().Truncate(max(to, p.Log().StartOffset())); err != nil {
						t.Fatal(err)
					}
					clear(seq) // the producers' sequences are the log's now: new producers from here
				case r < 95: // a power cut, after an fsync of part of the log
					end := p.Log().EndOffset()
					if end > 0 {
						if err := p.Log().Flush(end - int64(rng.IntN(int(end)))); err != nil {
							t.Fatal(err)
						}
					}
					clone := mem.CrashCloneTorn(rng)
					p.Close()
					mem = clone
					p = open()
					clear(seq)
				default:
					if err := p.Close(); err != nil {
						t.Fatal(err)
					}
					p = open()
					clear(seq)
				}
				modelOf(t, p).check(t, p, fmt.Sprintf("step %d", step))
			}
		})
	}
}
