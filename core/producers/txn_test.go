package producers

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/weir-broker/weir/core/record"
)

func txnHeader(id int64, epoch int16, first int32, n int) record.Header {
	h := header(id, epoch, first, n)
	h.Attributes = 0x10
	return h
}

// TestTxnLifecycle: a transactional batch opens the producer's transaction,
// later ones keep its first offset, a plain batch meanwhile is
// ErrInvalidTxnState, and the marker closes it and returns its start.
func TestTxnLifecycle(t *testing.T) {
	var s State
	h := txnHeader(4, 0, 0, 3)
	if v, _, err := s.Check(h); err != nil || v != AppendBatch {
		t.Fatalf("first transactional batch: %v %v", v, err)
	}
	s.Push(0, Batch{FirstSeq: 0, LastSeq: 2, Base: 10, Next: 13})
	if !s.OpenTxn(10) || s.OpenTxn(20) {
		t.Fatal("OpenTxn: want the first call to open, the second to keep the transaction")
	}
	if first, ok := s.Txn(); !ok || first != 10 {
		t.Fatalf("Txn = %d %v, want 10", first, ok)
	}
	if _, _, err := s.Check(header(4, 0, 3, 1)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("plain batch inside a transaction: %v, want ErrInvalidTxnState", err)
	}
	if err := s.CheckMarker(4, 0, 5); err != nil {
		t.Fatal(err)
	}
	if first, ok := s.Mark(0, 5); !ok || first != 10 {
		t.Fatalf("Mark closed %d %v, want 10", first, ok)
	}
	if _, ok := s.Txn(); ok {
		t.Fatal("transaction still open after its marker")
	}
	// Same epoch: the sequences go on after the marker.
	if v, _, err := s.Check(header(4, 0, 3, 1)); err != nil || v != AppendBatch {
		t.Fatalf("batch after the marker: %v %v", v, err)
	}
	if _, _, err := s.Check(header(4, 0, 0, 1)); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("sequence 0 again in the same epoch: %v", err)
	}
	// Fencing: an older coordinator epoch, then an older producer epoch.
	if err := s.CheckMarker(4, 0, 4); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of coordinator epoch 4 after 5: %v", err)
	}
	s.Mark(1, 5) // the coordinator bumped the epoch to abort
	if err := s.CheckMarker(4, 0, 5); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of epoch 0 after 1: %v", err)
	}
	if _, _, err := s.Check(header(4, 0, 3, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("zombie batch of epoch 0: %v", err)
	}
	if _, _, err := s.Check(header(4, 1, 3, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("epoch 1 not from sequence 0: %v", err)
	}
	if v, _, err := s.Check(header(4, 1, 0, 1)); err != nil || v != AppendBatch {
		t.Fatalf("epoch 1 from sequence 0: %v %v", v, err)
	}
	if err := s.CheckMarker(4, -1, 5); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of epoch -1: %v", err)
	}
}

// TestTxnSnapshot: a producer known only from a marker stays
// in the table (its epoch fences zombies) and in snapshots; an open
// transaction survives a snapshot only if it began below its offset.
func TestTxnSnapshot(t *testing.T) {
	var ps Table
	e := ps.Lock(1)
	e.State.Mark(3, 7)
	ps.Unlock(1, e)
	e = ps.Lock(2)
	e.State.Push(0, Batch{FirstSeq: 0, LastSeq: 0, Base: 5, Next: 6})
	e.State.OpenTxn(5)
	ps.Unlock(2, e)
	if ps.Count() != 2 {
		t.Fatalf("%d producers, want the marked one kept", ps.Count())
	}
	if got := ps.OpenTxns(); len(got) != 1 || got[2] != 5 {
		t.Fatalf("OpenTxns = %v", got)
	}
	b := ps.AppendSnapshot(nil, 6)
	var back Table
	if _, err := back.Restore(b); err != nil {
		t.Fatal(err)
	}
	if got := back.OpenTxns(); len(got) != 1 || got[2] != 5 {
		t.Fatalf("restored OpenTxns = %v", got)
	}
	e = back.Lock(1)
	if !e.State.Known() || e.State.Epoch() != 3 || e.State.CoordinatorEpoch() != 7 {
		t.Fatalf("restored marked producer %+v", e.State)
	}
	back.Unlock(1, e)
	list := back.List()
	if len(list) != 2 || list[0].CoordinatorEpoch != 7 || list[0].LastOffset != -1 || list[1].CurrentTxnStartOffset != 5 {
		t.Fatalf("List = %+v", list)
	}
	if string(back.AppendSnapshot(nil, 6)) != string(b) {
		t.Fatal("restored table encodes differently")
	}
	// As of offset 5 the transaction had not begun, and producer 2's
	// batch not been appended: only producer 1 remains.
	if _, err := back.Restore(ps.AppendSnapshot(nil, 5)); err != nil {
		t.Fatal(err)
	}
	if got := back.OpenTxns(); len(got) != 0 || back.Count() != 1 {
		t.Fatalf("as of 5: OpenTxns %v, %d producers", got, back.Count())
	}
}

// TestSnapshotVersion1: snapshots written before transactions still restore.
func TestSnapshotVersion1(t *testing.T) {
	be := binary.BigEndian
	b := append([]byte("WPSN"), 0, 1)
	b = be.AppendUint64(b, 50)
	b = be.AppendUint32(b, 1)
	b = be.AppendUint64(b, 9)  // id
	b = be.AppendUint16(b, 2)  // epoch
	b = be.AppendUint64(b, 77) // used
	b = append(b, 1)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, 4)
	b = be.AppendUint64(b, 40)
	b = be.AppendUint64(b, 45)
	b = be.AppendUint32(b, crc32.Checksum(b, castagnoli))
	var ps Table
	if off, err := ps.Restore(b); err != nil || off != 50 {
		t.Fatalf("Restore v1 = %d, %v", off, err)
	}
	e := ps.Lock(9)
	defer ps.Unlock(9, e)
	if last, ok := e.State.Last(); !ok || last.Next != 45 || e.State.Epoch() != 2 || e.Used != 77 {
		t.Fatalf("restored %+v", e.State)
	}
	if _, ok := e.State.Txn(); ok {
		t.Fatal("a version 1 snapshot opened a transaction")
	}
}

// TestExpireKeepsOpenTxn: expiry never forgets a producer whose
// transaction is open (the last stable offset would move past it).
func TestExpireKeepsOpenTxn(t *testing.T) {
	var ps Table
	for id := range int64(2) {
		e := ps.Lock(id)
		e.State.Push(0, Batch{FirstSeq: 0, LastSeq: 0, Base: id, Next: id + 1})
		if id == 1 {
			e.State.OpenTxn(id)
		}
		ps.Unlock(id, e)
	}
	if n := ps.Expire(1); n != 1 || ps.Count() != 1 || len(ps.OpenTxns()) != 1 {
		t.Fatalf("Expire forgot %d, left %d producers, %v open", n, ps.Count(), ps.OpenTxns())
	}
}
