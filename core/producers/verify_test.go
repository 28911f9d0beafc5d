package producers

import (
	"errors"
	"testing"
)

// appendUnder plays a partition's append of one batch under guard g at
// offset off, as core/logs does: check, guard, then record; it reports the
// refusal, if any, with the state unchanged.
func appendUnder(ps *Table, g Guard, off int64, first int32, epoch int16) error {
	h := txnHeader(9, epoch, first, 1)
	e := ps.Lock(9)
	defer ps.Unlock(9, e)
	st := e.State
	if _, _, err := st.Check(h); err != nil {
		return err
	}
	if err := st.CheckGuard(h, g); err != nil {
		return err
	}
	st.Push(epoch, Batch{FirstSeq: first, LastSeq: first, Base: off, Next: off + 1})
	st.OpenTxn(off)
	e.State = st
	return nil
}

// mark plays a marker written at epoch.
func mark(ps *Table, epoch int16) {
	e := ps.Lock(9)
	e.State.Mark(epoch, 0)
	ps.Unlock(9, e)
}

// TestVerificationRace is KIP-890 part 1's race, in the order that hangs a
// transaction without the guard: the verification starts (the coordinator
// says the partition is in the transaction), the abort marker is written,
// then the batch arrives: it is refused, and no transaction is left open.
// The same for a batch that skipped the coordinator because the transaction
// was ongoing (Ongoing), with its marker coming in between.
func TestVerificationRace(t *testing.T) {
	var ps Table
	g := ps.StartVerification(9, 0, 100)
	if g == Unverified || g == Ongoing {
		t.Fatalf("first verification of a new producer: guard %d, want a fresh one", g)
	}
	mark(&ps, 0) // the transaction aborted before its first batch here
	if err := appendUnder(&ps, g, 0, 0, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch verified before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	if open := ps.OpenTxns(); len(open) != 0 {
		t.Fatalf("a refused batch left transactions open: %v", open)
	}

	// The next transaction: verified, appended, then ongoing (no question).
	g = ps.StartVerification(9, 0, 101)
	if err := appendUnder(&ps, g, 1, 0, 0); err != nil {
		t.Fatalf("verified first batch: %v", err)
	}
	if g2 := ps.StartVerification(9, 0, 102); g2 != Ongoing {
		t.Fatalf("verification with the transaction ongoing: guard %d, want Ongoing", g2)
	}
	if err := appendUnder(&ps, Ongoing, 2, 1, 0); err != nil {
		t.Fatalf("batch of the ongoing transaction: %v", err)
	}
	// Ongoing, then the abort marker, then the batch: refused.
	mark(&ps, 0)
	if err := appendUnder(&ps, Ongoing, 3, 2, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch that skipped the coordinator, after the marker: %v, want ErrInvalidTxnState", err)
	}
	if open := ps.OpenTxns(); len(open) != 0 {
		t.Fatalf("a refused batch left transactions open: %v", open)
	}
	// The guard of the first transaction cannot be used again either.
	if err := appendUnder(&ps, g, 3, 2, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a used guard: %v, want ErrInvalidTxnState", err)
	}
}

// TestVerificationGuardRules: concurrent verifications of one transaction
// share the guard; a newer epoch replaces it (the older one's batches are
// refused); a marker of a newer epoch voids it; Unverified appends and
// non-transactional batches are not checked; an entry held only by a guard
// is kept (it is not a garbage id) and expires with its verification time.
func TestVerificationGuardRules(t *testing.T) {
	var ps Table
	g1 := ps.StartVerification(9, 0, 100)
	if g2 := ps.StartVerification(9, 0, 100); g2 != g1 {
		t.Fatalf("second verification of the same transaction: guard %d, want the first's %d", g2, g1)
	}
	if ps.Count() != 1 {
		t.Fatalf("%d producers known, want the guarded one kept", ps.Count())
	}
	g3 := ps.StartVerification(9, 1, 100)
	if g3 == g1 || g3 == Ongoing {
		t.Fatalf("verification of a newer epoch: guard %d, want a new one (was %d)", g3, g1)
	}
	if g := ps.StartVerification(9, 0, 100); g != g3 {
		t.Fatalf("verification of an older epoch: guard %d, want the newer epoch's %d", g, g3)
	}
	if err := appendUnder(&ps, g1, 0, 0, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch under the replaced guard: %v", err)
	}
	if err := appendUnder(&ps, g3, 0, 0, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("epoch-0 batch under the epoch-1 guard: %v", err)
	}
	mark(&ps, 2) // fenced: the coordinator aborted with a newer epoch
	if err := appendUnder(&ps, g3, 0, 0, 1); !errors.Is(err, ErrInvalidTxnState) && !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("batch verified before a fencing marker: %v", err)
	}
	if err := appendUnder(&ps, Unverified, 0, 0, 2); err != nil {
		t.Fatalf("unverified append: %v", err)
	}
	var s State
	if err := s.CheckGuard(header(9, 0, 0, 1), Ongoing); err != nil {
		t.Fatalf("non-transactional batch under a guard: %v", err)
	}

	var ex Table
	ex.StartVerification(5, 0, 100)
	if n := ex.Expire(100); n != 0 {
		t.Fatalf("expired %d guarded entries verified at the cut-off", n)
	}
	if n := ex.Expire(101); n != 1 {
		t.Fatalf("expired %d guarded entries verified before the cut-off, want 1", n)
	}
}
