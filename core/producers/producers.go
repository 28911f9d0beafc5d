// Package producers is the idempotent-producer state of one partition: per
// producer id, its epoch and its last 5 batches (first and last sequence,
// first and next offset), and Kafka's rules that decide whether a batch is
// new, a retry to answer with its original offsets, or an error. It holds no
// I/O: the partition feeds it every idempotent batch it appends (a leader's
// and a follower's; at open, the batch headers after its latest snapshot),
// and checks each new batch against it before appending. A snapshot
// (snapshot.go) encodes the table as of a log offset, deterministically,
// for the partition to keep in a file and Restore at open.
//
// The rules (Check), in Kafka's order: a retry of a remembered batch of the
// same epoch is a duplicate; an older epoch is ErrInvalidProducerEpoch; a
// newer epoch must start at sequence 0; an unknown producer must start at
// sequence 0 (ErrUnknownProducerID otherwise); in the same epoch the batch
// must follow the last sequence (wrapping after MaxInt32), and a batch lying
// wholly before it but older than the remembered batches is
// ErrDuplicateSequence, which clients count as success.
//
// Transactions (txn.go): each producer also has its open transaction's
// first offset, if any, and the epochs of its latest marker; snapshots
// (version 2) carry them, so the partition's last stable offset and its
// aborted transactions survive restarts. A leader's verification of a
// transaction's first batch with its coordinator (KIP-890 part 1) leaves a
// guard in the producer's entry, which the append must carry and a marker
// voids (verify.go); guards are not in snapshots.
package producers

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/core/record"
)

// Remembered is how many of a producer's latest batches a partition
// remembers to answer retries with their original offsets: Kafka's limit on
// in-flight requests per connection for an idempotent producer
// (max.in.flight.requests.per.connection <= 5), so any retry a correct client
// can send is among them.
const Remembered = 5

// Batch is one remembered batch of a producer.
type Batch struct {
	FirstSeq, LastSeq int32
	Base, Next        int64 // offset of the first record, offset after the last
}

// State is one producer's state in one partition: a value, so a check can run
// on a copy and the result be committed only once the append succeeded.
// A producer is unknown until it appended a batch or a transaction marker
// (marked): n == 0 and !marked.
type State struct {
	epoch   int16
	n       int
	batches [Remembered]Batch // oldest first; [n-1] is the latest

	// Transactions (txn.go). marked: a marker set the epoch (its batches
	// may be none, after a marker of a new epoch). txnOpen: a transactional
	// batch opened a transaction at txnFirst that no marker closed yet.
	// coordEpoch is the coordinator epoch of the latest marker (-1: none
	// seen; the zero value counts as 0, which no marker can be below).
	marked     bool
	txnOpen    bool
	txnFirst   int64
	coordEpoch int32

	// Verification (verify.go): guard, for epoch guardEpoch, while a
	// verification of a first transactional batch is in progress.
	guard      Guard
	guardEpoch int16
}

// Verdict is what a check decided for one batch.
type Verdict int

const (
	AppendBatch Verdict = iota // in sequence: append it
	Duplicate                  // a retry of a remembered batch: answer with its offsets
)

// Check applies Kafka's rules to the header of an idempotent batch (h.ProducerID
// >= 0), in Kafka's order: duplicate of a remembered batch of the same epoch;
// older epoch; newer epoch (must start at sequence 0); same epoch (must follow
// the last sequence, wrapping after MaxInt32). For a duplicate it returns the
// remembered batch.
func (s *State) Check(h record.Header) (Verdict, Batch, error) {
	first := h.BaseSequence
	if first < 0 {
		return 0, Batch{}, fmt.Errorf("%w: producer %d sent sequence %d", ErrOutOfOrderSequence, h.ProducerID, first)
	}
	if h.ProducerEpoch < 0 {
		return 0, Batch{}, fmt.Errorf("%w: producer %d sent epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	last := LastSequence(first, h.LastOffsetDelta)
	if err := s.checkTxn(h); err != nil {
		return 0, Batch{}, err
	}
	if s.n == 0 && s.marked {
		// Only markers known: the epoch is theirs, and a marker of a new
		// epoch reset the sequences (Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER
		// unless the batch starts at 0).
		switch {
		case h.ProducerEpoch < s.epoch:
			return 0, Batch{}, fmt.Errorf("%w: producer %d sent epoch %d, current epoch is %d",
				ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, s.epoch)
		case first != 0:
			return 0, Batch{}, fmt.Errorf("%w: producer %d epoch %d: expected sequence 0 after a transaction marker, got %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return AppendBatch, Batch{}, nil
	}
	if s.n == 0 {
		if first != 0 {
			return 0, Batch{}, fmt.Errorf("%w: producer %d (epoch %d) is not known here and starts at sequence %d, not 0",
				ErrUnknownProducerID, h.ProducerID, h.ProducerEpoch, first)
		}
		return AppendBatch, Batch{}, nil
	}
	if h.ProducerEpoch == s.epoch {
		for _, b := range s.batches[:s.n] {
			if b.FirstSeq == first && b.LastSeq == last {
				return Duplicate, b, nil
			}
		}
	}
	switch {
	case h.ProducerEpoch < s.epoch:
		return 0, Batch{}, fmt.Errorf("%w: producer %d sent epoch %d, current epoch is %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, s.epoch)
	case h.ProducerEpoch > s.epoch:
		if first != 0 {
			return 0, Batch{}, fmt.Errorf("%w: producer %d: new epoch %d must start at sequence 0, not %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return AppendBatch, Batch{}, nil
	}
	lastSeen := s.batches[s.n-1].LastSeq
	if inSequence(lastSeen, first) {
		return AppendBatch, Batch{}, nil
	}
	if behind(lastSeen, first, last) {
		return 0, Batch{}, fmt.Errorf("%w: producer %d epoch %d: sequences %d..%d were appended before (last is %d)",
			ErrDuplicateSequence, h.ProducerID, h.ProducerEpoch, first, last, lastSeen)
	}
	return 0, Batch{}, fmt.Errorf("%w: producer %d epoch %d: expected sequence %d, got %d",
		ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, nextSequence(lastSeen), first)
}

// Push records an appended batch of epoch; a new epoch forgets the old one's
// batches.
func (s *State) Push(epoch int16, b Batch) {
	if (s.n == 0 && !s.marked) || epoch != s.epoch {
		s.n, s.epoch = 0, epoch
	}
	if s.n == Remembered {
		copy(s.batches[:], s.batches[1:])
		s.n--
	}
	s.batches[s.n] = b
	s.n++
}

// LastSequence is the sequence of a batch's last record. Sequences wrap from
// MaxInt32 to 0, as in Kafka (DefaultRecordBatch.incrementSequence).
func LastSequence(first, lastOffsetDelta int32) int32 {
	if first > math.MaxInt32-lastOffsetDelta {
		return lastOffsetDelta - (math.MaxInt32 - first) - 1
	}
	return first + lastOffsetDelta
}

func nextSequence(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// inSequence reports whether first follows last.
func inSequence(last, first int32) bool { return first == nextSequence(last) }

// behind reports whether the whole range first..last lies at or before
// lastSeen, within half of the sequence space (so that wrapped sequences
// compare sensibly): every one of them was appended before, since a
// partition accepts a producer's sequences only in order.
func behind(lastSeen, first, last int32) bool {
	const space = int64(math.MaxInt32) + 1
	dist := func(a, b int32) int64 { return ((int64(a)-int64(b))%space + space) % space } // a - b, wrapped
	dLast, dFirst := dist(lastSeen, last), dist(lastSeen, first)
	return dLast < space/2 && dFirst < space/2 && dFirst >= dLast
}

// Table holds a partition's idempotent producers. Each producer's entry
// has its own lock, held across check, append and update, so one producer's
// batches are checked and appended atomically while different producers (and
// non-idempotent appends) proceed in parallel.
type Table struct {
	mu sync.Mutex // guards m; never held while waiting for an entry's lock
	m  map[int64]*Entry

	guards atomic.Uint64 // guards handed out (verify.go)
}

// Entry is one producer's state, locked by Table.Lock.
type Entry struct {
	State State
	Used  int64 // unix ms of the last append or duplicate, for expiry

	mu      sync.Mutex
	gone    bool  // removed from the map; lock again by id
	guardAt int64 // unix ms of the latest verification started (verify.go), for expiry
}

// Lock returns id's entry, created if needed, locked.
func (ps *Table) Lock(id int64) *Entry {
	for {
		ps.mu.Lock()
		if ps.m == nil {
			ps.m = map[int64]*Entry{}
		}
		e := ps.m[id]
		if e == nil {
			e = &Entry{}
			ps.m[id] = e
		}
		ps.mu.Unlock()
		e.mu.Lock()
		if !e.gone {
			return e
		}
		e.mu.Unlock()
	}
}

// Unlock releases an entry from Lock, dropping it if the producer is still
// unknown (its first batch was rejected) and not being verified, so garbage
// ids cost no memory.
func (ps *Table) Unlock(id int64, e *Entry) {
	if !e.State.Known() && !e.State.Guarded() {
		ps.mu.Lock()
		if ps.m[id] == e {
			delete(ps.m, id)
		}
		e.gone = true
		ps.mu.Unlock()
	}
	e.mu.Unlock()
}

// Expire forgets producers whose last append (and last verification
// started) was before the given unix ms. Entries busy right now are
// skipped: they are in use; so are producers with a transaction open
// (Kafka's rule: forgetting one would move the last stable offset past
// records not yet committed or aborted).
func (ps *Table) Expire(before int64) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for id, e := range ps.m {
		if !e.mu.TryLock() {
			continue
		}
		if e.Used < before && e.guardAt < before && !e.State.txnOpen {
			e.gone = true
			delete(ps.m, id)
			n++
		}
		e.mu.Unlock()
	}
	return n
}

// Count is the number of producers known.
func (ps *Table) Count() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}

// Reset forgets every producer. The caller must keep Lock from being called
// meanwhile (the partition holds its producers' write lock).
func (ps *Table) Reset() {
	ps.mu.Lock()
	ps.m = nil
	ps.mu.Unlock()
}

// Known reports whether the producer has appended anything remembered.
func (s *State) Known() bool { return s.n > 0 || s.marked }

// Epoch is the producer's current epoch (meaningless when not Known).
func (s *State) Epoch() int16 { return s.epoch }
