package producers

import (
	"cmp"
	"slices"
)

// Info is what DescribeProducers tells of one producer (Kafka's
// ProducerStateEntry as DescribeProducers answers it).
type Info struct {
	ID    int64
	Epoch int16
	// LastSequence is the last sequence of its latest batch, LastOffset
	// that batch's last offset.
	LastSequence int32
	LastOffset   int64
	// Used is when it last appended (or retried), unix ms of the broker's
	// clock.
	Used int64
}

// List returns the producers known, by id. It locks each entry in turn (a
// producer appending right now is waited for, briefly), never the table
// while waiting.
func (ps *Table) List() []Info {
	ps.mu.Lock()
	type idEntry struct {
		id int64
		e  *Entry
	}
	es := make([]idEntry, 0, len(ps.m))
	for id, e := range ps.m {
		es = append(es, idEntry{id, e})
	}
	ps.mu.Unlock()
	out := make([]Info, 0, len(es))
	for _, ie := range es {
		ie.e.mu.Lock()
		if b, ok := ie.e.State.Last(); ok && !ie.e.gone {
			out = append(out, Info{ID: ie.id, Epoch: ie.e.State.Epoch(), LastSequence: b.LastSeq, LastOffset: b.Next - 1, Used: ie.e.Used})
		}
		ie.e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
