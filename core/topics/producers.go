package topics

import (
	"fmt"
	"math"
	"sync"

	"github.com/weir-broker/weir/core/record"
)

// rememberedBatches is how many of a producer's latest batches a partition
// remembers to answer retries with their original offsets: Kafka's limit on
// in-flight requests per connection for an idempotent producer
// (max.in.flight.requests.per.connection <= 5), so any retry a correct client
// can send is among them.
const rememberedBatches = 5

// batchMeta is one remembered batch of a producer.
type batchMeta struct {
	firstSeq, lastSeq int32
	base, next        int64 // offset of the first record, offset after the last
}

// pstate is one producer's state in one partition: a value, so a check can run
// on a copy and the result be committed only once the append succeeded.
// n == 0 means the producer is unknown.
type pstate struct {
	epoch   int16
	n       int
	batches [rememberedBatches]batchMeta // oldest first; [n-1] is the latest
}

// verdict is what a check decided for one batch.
type verdict int

const (
	appendBatch verdict = iota // in sequence: append it
	duplicate                  // a retry of a remembered batch: answer with its offsets
)

// check applies Kafka's rules to the header of an idempotent batch (h.ProducerID
// >= 0), in Kafka's order: duplicate of a remembered batch of the same epoch;
// older epoch; newer epoch (must start at sequence 0); same epoch (must follow
// the last sequence, wrapping after MaxInt32). For a duplicate it returns the
// remembered batch.
func (s *pstate) check(h record.Header) (verdict, batchMeta, error) {
	first := h.BaseSequence
	if first < 0 {
		return 0, batchMeta{}, fmt.Errorf("%w: producer %d sent sequence %d", ErrOutOfOrderSequence, h.ProducerID, first)
	}
	if h.ProducerEpoch < 0 {
		return 0, batchMeta{}, fmt.Errorf("%w: producer %d sent epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	last := lastSequence(first, h.LastOffsetDelta)
	if s.n == 0 {
		if first != 0 {
			return 0, batchMeta{}, fmt.Errorf("%w: producer %d (epoch %d) is not known here and starts at sequence %d, not 0",
				ErrUnknownProducerID, h.ProducerID, h.ProducerEpoch, first)
		}
		return appendBatch, batchMeta{}, nil
	}
	if h.ProducerEpoch == s.epoch {
		for _, b := range s.batches[:s.n] {
			if b.firstSeq == first && b.lastSeq == last {
				return duplicate, b, nil
			}
		}
	}
	switch {
	case h.ProducerEpoch < s.epoch:
		return 0, batchMeta{}, fmt.Errorf("%w: producer %d sent epoch %d, current epoch is %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, s.epoch)
	case h.ProducerEpoch > s.epoch:
		if first != 0 {
			return 0, batchMeta{}, fmt.Errorf("%w: producer %d: new epoch %d must start at sequence 0, not %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return appendBatch, batchMeta{}, nil
	}
	lastSeen := s.batches[s.n-1].lastSeq
	if inSequence(lastSeen, first) {
		return appendBatch, batchMeta{}, nil
	}
	if behind(lastSeen, first, last) {
		return 0, batchMeta{}, fmt.Errorf("%w: producer %d epoch %d: sequences %d..%d were appended before (last is %d)",
			ErrDuplicateSequence, h.ProducerID, h.ProducerEpoch, first, last, lastSeen)
	}
	return 0, batchMeta{}, fmt.Errorf("%w: producer %d epoch %d: expected sequence %d, got %d",
		ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, nextSequence(lastSeen), first)
}

// push records an appended batch of epoch; a new epoch forgets the old one's
// batches.
func (s *pstate) push(epoch int16, b batchMeta) {
	if s.n == 0 || epoch != s.epoch {
		s.n, s.epoch = 0, epoch
	}
	if s.n == rememberedBatches {
		copy(s.batches[:], s.batches[1:])
		s.n--
	}
	s.batches[s.n] = b
	s.n++
}

// lastSequence is the sequence of a batch's last record. Sequences wrap from
// MaxInt32 to 0, as in Kafka (DefaultRecordBatch.incrementSequence).
func lastSequence(first, lastOffsetDelta int32) int32 {
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

// producers holds a partition's idempotent producers. Each producer's entry
// has its own lock, held across check, append and update, so one producer's
// batches are checked and appended atomically while different producers (and
// non-idempotent appends) proceed in parallel.
type producers struct {
	mu sync.Mutex // guards m; never held while waiting for an entry's lock
	m  map[int64]*producerEntry
}

type producerEntry struct {
	mu   sync.Mutex
	st   pstate
	used int64 // unix ms of the last append or duplicate, for expiry
	gone bool  // removed from the map; lock again by id
}

// lock returns id's entry, created if needed, locked.
func (ps *producers) lock(id int64) *producerEntry {
	for {
		ps.mu.Lock()
		if ps.m == nil {
			ps.m = map[int64]*producerEntry{}
		}
		e := ps.m[id]
		if e == nil {
			e = &producerEntry{}
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

// unlock releases an entry from lock, dropping it if the producer is still
// unknown (its first batch was rejected), so garbage ids cost no memory.
func (ps *producers) unlock(id int64, e *producerEntry) {
	if e.st.n == 0 {
		ps.mu.Lock()
		if ps.m[id] == e {
			delete(ps.m, id)
		}
		e.gone = true
		ps.mu.Unlock()
	}
	e.mu.Unlock()
}

// expire forgets producers whose last append was before the given unix ms.
// Entries busy right now are skipped: they are in use.
func (ps *producers) expire(before int64) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for id, e := range ps.m {
		if !e.mu.TryLock() {
			continue
		}
		if e.used < before {
			e.gone = true
			delete(ps.m, id)
			n++
		}
		e.mu.Unlock()
	}
	return n
}

func (ps *producers) count() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}
