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
	// CoordinatorEpoch is that of its latest transaction marker (-1 when
	// none), CurrentTxnStartOffset the first offset of its open
	// transaction (-1 when none), as DescribeProducers answers them.
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64
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
		if st := &ie.e.State; st.Known() && !ie.e.gone {
			in := Info{ID: ie.id, Epoch: st.Epoch(), LastSequence: -1, LastOffset: -1, Used: ie.e.Used,
				CoordinatorEpoch: -1, CurrentTxnStartOffset: -1}
			if b, ok := st.Last(); ok {
				in.LastSequence, in.LastOffset = b.LastSeq, b.Next-1
			}
			if st.marked {
				in.CoordinatorEpoch = st.coordEpoch
			}
			if first, ok := st.Txn(); ok {
				in.CurrentTxnStartOffset = first
			}
			out = append(out, in)
		}
		ie.e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
