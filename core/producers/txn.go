package producers

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/record"
)

// Transactions, as Kafka's ProducerStateManager keeps them per partition: a
// producer's transactional batch (attributes bit 4) opens a transaction at
// its first offset when none is open; the transaction marker (a control
// batch the coordinator has written) closes it. Between the two the
// producer's batches must all be transactional (ErrInvalidTxnState), and
// the partition's last stable offset cannot pass the transaction's first
// offset. A marker carries the producer's epoch, which may be newer than its
// batches' (the coordinator bumps it to fence a zombie and abort): a newer
// epoch becomes the producer's and forgets its batches, so its next batch
// starts at sequence 0; an older one is ErrInvalidProducerEpoch. Markers of
// an older coordinator epoch than the last one seen are
// ErrTransactionCoordinatorFenced.

var (
	// ErrInvalidTxnState: a non-transactional batch from a producer with a
	// transaction open in the partition (Kafka: INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("producers: invalid transaction state")
	// ErrTransactionCoordinatorFenced: a marker from an older coordinator
	// epoch than a marker the partition already holds (Kafka:
	// TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("producers: transaction coordinator fenced")
)

func (s *State) checkTxn(h record.Header) error {
	if s.txnOpen && !h.Transactional() && h.ProducerEpoch >= s.epoch {
		return fmt.Errorf("%w: producer %d sent a non-transactional batch while its transaction from offset %d is open",
			ErrInvalidTxnState, h.ProducerID, s.txnFirst)
	}
	return nil
}

// OpenTxn records a transactional batch appended at offset first: it opens
// the producer's transaction there unless one is open. It reports whether
// it opened one. The transaction is ongoing: its verification guard, if
// any, is done (verify.go).
func (s *State) OpenTxn(first int64) bool {
	s.guard, s.guardEpoch = Unverified, 0
	if s.txnOpen {
		return false
	}
	s.txnOpen, s.txnFirst = true, first
	return true
}

// Txn returns the first offset of the producer's open transaction, ok=false
// when none is open.
func (s *State) Txn() (first int64, ok bool) { return s.txnFirst, s.txnOpen }

// CoordinatorEpoch is the coordinator epoch of the latest marker (0 before
// any).
func (s *State) CoordinatorEpoch() int32 { return s.coordEpoch }

// CheckMarker applies Kafka's checks to a transaction marker of the
// producer's epoch epoch written by a coordinator in coordinatorEpoch: an
// older producer epoch is ErrInvalidProducerEpoch, an older coordinator
// epoch ErrTransactionCoordinatorFenced. A marker for a producer with no
// open transaction is accepted (the coordinator writes markers to every
// partition it added, also those that got no batch, and retries them).
func (s *State) CheckMarker(id int64, epoch int16, coordinatorEpoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("%w: marker for producer %d with epoch %d", ErrInvalidProducerEpoch, id, epoch)
	}
	if s.Known() && epoch < s.epoch {
		return fmt.Errorf("%w: marker for producer %d with epoch %d, current epoch is %d",
			ErrInvalidProducerEpoch, id, epoch, s.epoch)
	}
	if s.Known() && coordinatorEpoch < s.coordEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, a marker of epoch %d came before",
			ErrTransactionCoordinatorFenced, id, coordinatorEpoch, s.coordEpoch)
	}
	return nil
}

// Mark applies a marker (checked by CheckMarker, or replayed from the log
// as stored): the epoch becomes the marker's (a new one forgets the
// batches), the transaction closes, and a verification in progress is
// void: its batches are refused (verify.go). It returns the first offset of
// the transaction it closed, ok=false when none was open.
func (s *State) Mark(epoch int16, coordinatorEpoch int32) (first int64, ok bool) {
	s.guard, s.guardEpoch = Unverified, 0
	if !s.Known() || epoch != s.epoch {
		s.n, s.epoch = 0, epoch
	}
	s.marked = true
	s.coordEpoch = max(s.coordEpoch, coordinatorEpoch)
	first, ok = s.txnFirst, s.txnOpen
	s.txnOpen, s.txnFirst = false, 0
	return first, ok
}

// OpenTxns returns the producers with an open transaction and its first
// offset. The caller keeps appends away (as for AppendSnapshot).
func (ps *Table) OpenTxns() map[int64]int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[int64]int64{}
	for id, e := range ps.m {
		if e.State.txnOpen {
			out[id] = e.State.txnFirst
		}
	}
	return out
}
