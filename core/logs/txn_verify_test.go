package logs

import (
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/producers"
)

// TestTxnVerificationGuard: KIP-890 part 1's race against the log. A
// leader starts the verification of producer 4's first batch (the
// coordinator answers that the partition is in the transaction), the
// transaction aborts and its marker is written, then the batch arrives: it
// is refused with ErrInvalidTxnState, nothing is written, and no
// transaction hangs (the last stable offset is the log end). The next
// transaction is verified once: its later batches carry producers.Ongoing;
// a retry of an appended batch is answered as a duplicate even after the
// marker; an Ongoing batch after the marker is refused too.
func TestTxnVerificationGuard(t *testing.T) {
	p := topicPartition(t, nil, newClock(), nil)
	mustAppend(t, p, plainBatch(t, 2))

	g, err := p.StartTxnVerification(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g == producers.Unverified || g == producers.Ongoing {
		t.Fatalf("first verification: guard %d, want a fresh one", g)
	}
	end := mustMarker(t, p, Marker{ProducerID: 4, Commit: false}) + 1
	if _, err := p.AppendVerified(ctx, txnBatch(t, 4, 0, 0, 3), 0, g); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Fatalf("batch verified before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	if got := p.Log().EndOffset(); got != end {
		t.Fatalf("log ends at %d after the refused batch, want %d", got, end)
	}
	wantFUO(t, p, 0, false)

	// The next transaction: verified once, then ongoing.
	if g, err = p.StartTxnVerification(4, 0); err != nil {
		t.Fatal(err)
	}
	first, err := p.AppendVerified(ctx, txnBatch(t, 4, 0, 0, 2), 0, g)
	if err != nil {
		t.Fatalf("verified first batch: %v", err)
	}
	wantFUO(t, p, first.BaseOffset, true)
	if g, err = p.StartTxnVerification(4, 0); err != nil || g != producers.Ongoing {
		t.Fatalf("verification with the transaction ongoing: %d %v, want Ongoing", g, err)
	}
	if _, err := p.AppendVerified(ctx, txnBatch(t, 4, 0, 2, 1), 0, g); err != nil {
		t.Fatalf("batch of the ongoing transaction: %v", err)
	}
	end = mustMarker(t, p, Marker{ProducerID: 4, Commit: true}) + 1
	wantFUO(t, p, 0, false)
	// A retry of the appended batch: a duplicate, whatever the guard.
	if r, err := p.AppendVerified(ctx, txnBatch(t, 4, 0, 2, 1), 0, producers.Ongoing); err != nil || !r.Duplicate || r.BaseOffset != first.NextOffset {
		t.Fatalf("retry after the marker: %+v %v, want the duplicate at %d", r, err, first.NextOffset)
	}
	// Ongoing, then the marker (above), then a new batch: refused.
	if _, err := p.AppendVerified(ctx, txnBatch(t, 4, 0, 3, 1), 0, producers.Ongoing); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Fatalf("batch that skipped the coordinator, after the marker: %v, want ErrInvalidTxnState", err)
	}
	if got := p.Log().EndOffset(); got != end {
		t.Fatalf("log ends at %d after the refused batch, want %d", got, end)
	}
	wantFUO(t, p, 0, false)
	// Unverified (AppendEpoch, a leader that does not verify) appends as before.
	if _, err := p.Append(ctx, txnBatch(t, 4, 0, 3, 1)); err != nil {
		t.Fatalf("unverified append: %v", err)
	}
}

// TestTxnVerificationGuardDeferred: AppendDeferredVerified (the group
// coordinator's transactional offset commits) carries the guard as
// AppendVerified does: a batch verified before an abort marker is refused,
// nothing written, no transaction left open; a fresh verification's batch
// is appended and opens the transaction, whose next batch needs no
// question (Ongoing).
func TestTxnVerificationGuardDeferred(t *testing.T) {
	p := topicPartition(t, nil, newClock(), nil)
	g, err := p.StartTxnVerification(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := mustMarker(t, p, Marker{ProducerID: 7, Commit: false}) + 1
	if _, _, err := p.AppendDeferredVerified(ctx, txnBatch(t, 7, 0, 0, 2), 0, g); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Fatalf("deferred batch verified before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	if got := p.Log().EndOffset(); got != end {
		t.Fatalf("log ends at %d after the refused batch, want %d", got, end)
	}
	wantFUO(t, p, 0, false)

	if g, err = p.StartTxnVerification(7, 0); err != nil {
		t.Fatal(err)
	}
	res, wait, err := p.AppendDeferredVerified(ctx, txnBatch(t, 7, 0, 0, 2), 0, g)
	if err != nil {
		t.Fatalf("verified deferred batch: %v", err)
	}
	if err := wait(ctx); err != nil {
		t.Fatal(err)
	}
	wantFUO(t, p, res.BaseOffset, true)
	if g, err = p.StartTxnVerification(7, 0); err != nil || g != producers.Ongoing {
		t.Fatalf("verification with the transaction ongoing: %d %v, want Ongoing", g, err)
	}
	if _, _, err := p.AppendDeferredVerified(ctx, txnBatch(t, 7, 0, 2, 1), 0, g); err != nil {
		t.Fatalf("deferred batch of the ongoing transaction: %v", err)
	}
}
