package producers

import (
	"fmt"

	"github.com/weir-broker/weir/core/record"
)

// Transaction verification (KIP-890 part 1), as Kafka's UnifiedLog and
// ProducerStateManager keep it per partition. A leader asks the
// transaction coordinator whether the partition is in a producer's ongoing
// transaction before appending the transaction's first batch there; an
// abort (a timeout, EndTxn, a fenced producer) can write its marker between
// that answer and the append, and the late batch would then open a
// transaction no marker will ever end: the last stable offset would stay
// stuck (Kafka's "hanging transaction"). So the check is bound to the
// append with a guard:
//
//   - before asking the coordinator, the leader starts a verification
//     (Table.StartVerification): the producer's entry gets a guard for the
//     epoch, unless its transaction is already ongoing here at that epoch
//     (then there is nothing to ask: Ongoing);
//   - the append carries the guard it was given; a transactional batch is
//     appended only if the producer's transaction is ongoing at its epoch,
//     or the entry still holds that very guard for its epoch (CheckGuard);
//     otherwise ErrInvalidTxnState, and nothing is written;
//   - the first transactional batch appended (OpenTxn) and any transaction
//     marker (Mark) clear the guard; so does the start of a verification
//     for a newer epoch (it replaces it).
//
// Guards live in memory only, on the leader: a rebuilt producer state (a
// restart, a cut) has none, and an append verified before it is refused, as
// in Kafka after a leader change. Guards are numbered by their table, in
// order: deterministic, no clock.

// Guard is what an append carries to prove its transactional batches were
// verified (see above). Values other than Unverified and Ongoing come from
// Table.StartVerification.
type Guard uint64

const (
	// Unverified: the caller does not verify transactions (a broker without
	// a transaction coordinator, a tool, a test): transactional batches are
	// appended on the producer state's checks alone.
	Unverified Guard = 0
	// Ongoing: the producer's transaction was ongoing in the partition at
	// the batch's epoch when the verification started: the append succeeds
	// only while it still is (no marker came in between).
	Ongoing Guard = 1
)

// startVerification is Table.StartVerification on the state, fresh the
// guard to create if one is needed.
func (s *State) startVerification(epoch int16, fresh Guard) Guard {
	switch {
	case s.txnOpen && s.epoch == epoch:
		return Ongoing
	case s.guard != Unverified && s.guardEpoch >= epoch:
		// Concurrent requests of one transaction share the guard; an
		// older epoch gets the newer one's, which its batches cannot use.
		return s.guard
	}
	s.guard, s.guardEpoch = fresh, epoch
	return fresh
}

// CheckGuard decides whether the header of a batch to append (not a
// duplicate: those are answered whatever the guard) may be appended under
// guard g: non-transactional batches and Unverified appends may; a
// transactional batch needs its producer's transaction ongoing at its epoch,
// or the state to hold g for its epoch (ErrInvalidTxnState otherwise).
func (s *State) CheckGuard(h record.Header, g Guard) error {
	if g == Unverified || !h.Transactional() {
		return nil
	}
	if s.txnOpen && s.epoch == h.ProducerEpoch {
		return nil
	}
	if g != Ongoing && s.guard == g && s.guardEpoch == h.ProducerEpoch {
		return nil
	}
	return fmt.Errorf("%w: producer %d epoch %d: no verified transaction here (it ended since it was verified)",
		ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch)
}

// Guarded reports whether a verification is in progress (a guard is set).
func (s *State) Guarded() bool { return s.guard != Unverified }

// StartVerification starts (or joins) the verification of producer id's
// transactional batches of epoch epoch, at unix ms now, and returns the
// guard its append must carry: Ongoing when the producer's transaction is
// already ongoing here at that epoch (nothing to ask the coordinator), else
// the entry's guard for the epoch (created, or shared with the requests of
// the same transaction that asked before the first append).
func (ps *Table) StartVerification(id int64, epoch int16, now int64) Guard {
	e := ps.Lock(id)
	g := e.State.startVerification(epoch, Guard(ps.guards.Add(1)+uint64(Ongoing)))
	if g != Ongoing {
		e.guardAt = max(e.guardAt, now)
	}
	ps.Unlock(id, e)
	return g
}
