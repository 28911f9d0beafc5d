package txn

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const minute = time.Minute

func TestInitNewIDAndBump(t *testing.T) {
	h := newHarness(t)
	pid, epoch, err := h.init("a", minute, -1, -1)
	if err != nil || pid != 1001 || epoch != 0 {
		t.Fatalf("first InitProducerId = %d, %d, %v; want 1001, 0", pid, epoch, err)
	}
	v, _ := h.lastValue("a")
	if v.ProducerID != 1001 || v.Epoch != 0 || v.State != Empty || v.Timeout != minute || !v.Start.IsZero() {
		t.Fatalf("record after InitProducerId: %+v", v)
	}
	pid2, epoch2, err := h.init("a", 2*minute, -1, -1)
	if err != nil || pid2 != pid || epoch2 != 1 {
		t.Fatalf("second InitProducerId = %d, %d, %v; want %d, 1", pid2, epoch2, err, pid)
	}
	if s := h.state("a"); s.Timeout != 2*minute {
		t.Fatalf("timeout not updated: %v", s.Timeout)
	}
	// The first producer is fenced.
	wantErr(t, "AddPartitions of the fenced producer", h.add("a", pid, 0, tp("t", 0)), ErrProducerFenced)
	wantErr(t, "AddPartitions of an unknown producer id", h.add("a", pid+1, 1, tp("t", 0)), ErrInvalidProducerIDMapping)
	wantErr(t, "AddPartitions of an unknown id", h.add("b", pid, 1, tp("t", 0)), ErrInvalidProducerIDMapping)
	wantErr(t, "EndTxn of the fenced producer", h.end("a", pid, 0, true), ErrProducerFenced)
}

func TestInitRejects(t *testing.T) {
	h := newHarness(t)
	_, _, err := h.init("", minute, -1, -1)
	wantErr(t, "empty id", err, ErrInvalidRequest)
	for _, to := range []time.Duration{0, -time.Second, DefaultMaxTimeout + time.Millisecond} {
		_, _, err = h.init("a", to, -1, -1)
		wantErr(t, "timeout "+to.String(), err, ErrInvalidTransactionTimeout)
	}
	if len(h.m.txns) != 0 || len(h.log) != 0 {
		t.Fatalf("refused requests left state: %d ids, %d records", len(h.m.txns), len(h.log))
	}
	if _, _, err := h.init("a", DefaultMaxTimeout, -1, -1); err != nil {
		t.Fatalf("timeout at the maximum: %v", err)
	}
}

func TestCommit(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.now = h.now.Add(time.Second)
	start := h.now
	if err := h.add("a", pid, epoch, tp("t", 1), tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	v, _ := h.lastValue("a")
	if v.State != Ongoing || !v.Start.Equal(start) || len(v.Partitions) != 2 {
		t.Fatalf("record after AddPartitions: %+v", v)
	}
	// Partitions already in: answered without a write.
	n := len(h.log)
	if err := h.add("a", pid, epoch, tp("t", 0)); err != nil || len(h.log) != n {
		t.Fatalf("AddPartitions of a partition in the transaction: %v, %d records written", err, len(h.log)-n)
	}
	h.now = h.now.Add(time.Second)
	if err := h.add("a", pid, epoch, tp("u", 0)); err != nil {
		t.Fatal(err)
	}
	if s := h.state("a"); !s.Start.Equal(start) || len(s.Partitions) != 3 {
		t.Fatalf("adding to an open transaction: start %v, %d partitions", s.Start, len(s.Partitions))
	}
	wantErr(t, "EndTxn", h.end("a", pid, epoch, true), nil)
	if s := h.state("a"); s.State != PrepareCommit {
		t.Fatalf("after EndTxn: %v", s.State)
	}
	if len(h.markers) != 1 {
		t.Fatalf("%d marker writes asked for, want 1", len(h.markers))
	}
	mw := h.markers[0]
	want := Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: 7}
	if mw.Marker != want || !slices.Equal(mw.Partitions, []TopicPartition{tp("t", 0), tp("t", 1), tp("u", 0)}) {
		t.Fatalf("marker write %+v; want %+v on t-0, t-1, u-0", mw, want)
	}
	// While the markers are written.
	wantErr(t, "AddPartitions while completing", h.add("a", pid, epoch, tp("t", 0)), ErrConcurrentTransactions)
	wantErr(t, "EndTxn(commit) again while completing", h.end("a", pid, epoch, true), ErrConcurrentTransactions)
	wantErr(t, "EndTxn(abort) while committing", h.end("a", pid, epoch, false), ErrInvalidTxnState)
	_, _, err := h.init("a", minute, -1, -1)
	wantErr(t, "InitProducerId while completing", err, ErrConcurrentTransactions)

	h.mark(all)
	if len(h.writes) != 1 {
		t.Fatalf("after the markers: %d writes, want the CompleteCommit", len(h.writes))
	}
	h.commit(nil)
	if s := h.state("a"); s.State != CompleteCommit || len(s.Partitions) != 0 {
		t.Fatalf("after completing: %v with %d partitions", s.State, len(s.Partitions))
	}
	if v, _ := h.lastValue("a"); v.State != CompleteCommit || v.Partitions != nil {
		t.Fatalf("CompleteCommit record: %+v", v)
	}
	wantErr(t, "EndTxn(commit) retried", h.end("a", pid, epoch, true), nil)
	wantErr(t, "EndTxn(abort) after a commit", h.end("a", pid, epoch, false), ErrInvalidTxnState)
	// The next transaction.
	if err := h.add("a", pid, epoch, tp("v", 0)); err != nil {
		t.Fatal(err)
	}
	if s := h.state("a"); len(s.Partitions) != 1 || !s.Start.Equal(h.now) {
		t.Fatalf("next transaction: %+v", s)
	}
}

// TestEndTxnAnsweredOnCompletion: with a completion wait, EndTxn is
// answered once the transaction is complete (its Complete state applied
// once appended), not once its Prepare state is written; only the Complete
// states may be applied before they are committed.
func TestEndTxnAnsweredOnCompletion(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			h := newHarness(t)
			h.m.cfg.completionWait = time.Second
			pid, epoch, _ := h.init("a", minute, -1, -1)
			h.add("a", pid, epoch, tp("t", 0), tp("t", 1))
			w := h.waiter()
			if parked, err := h.m.endTxn(h.now, EndRequest{ID: "a", ProducerID: pid, Epoch: epoch, Commit: commit}, w); !parked || err != nil {
				t.Fatalf("EndTxn: parked %v, %v", parked, err)
			}
			h.collect()
			prep := h.commit(nil)
			if _, ok := h.replies[w]; ok {
				t.Fatal("EndTxn answered once its Prepare state was written, before the markers")
			}
			if d := h.m.deadline(); !d.Equal(h.now.Add(time.Second)) {
				t.Fatalf("deadline %v; want the completion wait's end", d)
			}
			// A retry while the answer is held waits with it.
			w2 := h.waiter()
			if parked, err := h.m.endTxn(h.now, EndRequest{ID: "a", ProducerID: pid, Epoch: epoch, Commit: commit}, w2); !parked || err != nil {
				t.Fatalf("EndTxn retried while held: parked %v, %v", parked, err)
			}
			h.now = h.now.Add(time.Millisecond)
			h.mark(all)
			if len(h.writes) != 1 || !h.writes[0].ApplyOnAppend {
				t.Fatalf("after the markers: %+v; want the Complete state, applied once appended", h.writes)
			}
			if prep.ApplyOnAppend {
				t.Fatal("the Prepare state may be applied before it is committed")
			}
			for i, wr := range h.log {
				if wr.ApplyOnAppend {
					t.Fatalf("record %d of the log (not a Complete state) may be applied before it is committed", i)
				}
			}
			h.commit(nil)
			want := map[bool]Status{true: CompleteCommit, false: CompleteAbort}[commit]
			if s := h.state("a"); s.State != want {
				t.Fatalf("after completing: %v", s.State)
			}
			for _, w := range []uint64{w, w2} {
				if r, ok := h.replies[w]; !ok || r.Err != nil {
					t.Fatalf("EndTxn (waiter %d) after completing: %+v, answered %v", w, r, ok)
				}
			}
			if d := h.m.deadline(); !d.Equal(h.state("a").Updated.Add(DefaultExpiration)) {
				t.Fatalf("deadline %v after completing; want the expiration only", d)
			}
		})
	}
}

// TestEndTxnAnsweredAfterCompletionWait: markers that keep failing hold
// EndTxn's answer back for the completion wait only; the transaction then
// completes on its own.
func TestEndTxnAnsweredAfterCompletionWait(t *testing.T) {
	h := newHarness(t)
	h.m.cfg.completionWait = 50 * time.Millisecond
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.add("a", pid, epoch, tp("t", 0))
	w := h.waiter()
	h.m.endTxn(h.now, EndRequest{ID: "a", ProducerID: pid, Epoch: epoch, Commit: true}, w)
	h.collect()
	h.commit(nil)
	decided := h.now
	h.mark(func(TopicPartition) bool { return false })
	if d := h.m.deadline(); !d.Equal(decided.Add(50 * time.Millisecond)) {
		t.Fatalf("deadline %v; want the completion wait's end before the marker backoff's", d)
	}
	h.now = decided.Add(50*time.Millisecond - time.Nanosecond)
	h.m.tick(h.now)
	h.collect()
	if _, ok := h.replies[w]; ok {
		t.Fatal("answered before the completion wait passed")
	}
	h.now = decided.Add(50 * time.Millisecond)
	h.m.tick(h.now)
	h.collect()
	if r, ok := h.replies[w]; !ok || r.Err != nil {
		t.Fatalf("after the completion wait: %+v, answered %v; want success", r, ok)
	}
	if s := h.state("a"); s.State != PrepareCommit {
		t.Fatalf("state %v; still completing", s.State)
	}
	wantErr(t, "AddPartitions while completing", h.add("a", pid, epoch, tp("t", 0)), ErrConcurrentTransactions)
	wantErr(t, "EndTxn retried once answered", h.end("a", pid, epoch, true), ErrConcurrentTransactions)
	if d := h.m.deadline(); !d.Equal(decided.Add(DefaultMarkerBackoff)) {
		t.Fatalf("deadline %v; want the marker retry", d)
	}
	h.now = decided.Add(DefaultMarkerBackoff)
	h.m.tick(h.now)
	h.collect()
	h.mark(all)
	h.commitAll()
	if s := h.state("a"); s.State != CompleteCommit {
		t.Fatalf("after the retry: %v", s.State)
	}
}

func TestEndTxnWithoutTransaction(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	wantErr(t, "EndTxn in Empty", h.end("a", pid, epoch, true), ErrInvalidTxnState)
	wantErr(t, "EndTxn of an unknown id", h.end("x", pid, epoch, true), ErrInvalidProducerIDMapping)
	wantErr(t, "EndTxn with an empty id", h.end("", pid, epoch, true), ErrInvalidRequest)
}

func TestMarkerRetry(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.add("a", pid, epoch, tp("t", 0), tp("t", 1))
	h.end("a", pid, epoch, false)
	h.mark(func(p TopicPartition) bool { return p.Partition == 0 })
	if len(h.markers) != 0 || len(h.writes) != 0 {
		t.Fatalf("retried before the backoff: %d marker writes, %d writes", len(h.markers), len(h.writes))
	}
	if d := h.m.deadline(); !d.Equal(h.now.Add(DefaultMarkerBackoff)) {
		t.Fatalf("deadline %v; want the backoff's end", d)
	}
	h.now = h.now.Add(DefaultMarkerBackoff - time.Millisecond)
	h.m.tick(h.now)
	h.collect()
	if len(h.markers) != 0 {
		t.Fatal("retried before the backoff")
	}
	h.now = h.now.Add(time.Millisecond)
	h.m.tick(h.now)
	h.collect()
	if len(h.markers) != 1 || !slices.Equal(h.markers[0].Partitions, []TopicPartition{tp("t", 1)}) ||
		h.markers[0].Marker.Commit || h.markers[0].Attempt != 2 {
		t.Fatalf("retry: %+v; want the abort marker of t-1 only", h.markers)
	}
	h.mark(all)
	h.commitAll()
	if s := h.state("a"); s.State != CompleteAbort {
		t.Fatalf("after the retry: %v", s.State)
	}
}

func TestTimeoutAbortsAndFences(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", 10*time.Second, -1, -1)
	h.add("a", pid, epoch, tp("t", 0))
	if d := h.m.deadline(); !d.Equal(h.now.Add(10 * time.Second)) {
		t.Fatalf("deadline %v; want the timeout", d)
	}
	start := h.now
	h.now = start.Add(10*time.Second - time.Millisecond)
	h.m.tick(h.now)
	h.collect()
	if len(h.writes) != 0 {
		t.Fatal("aborted before the timeout")
	}
	h.now = start.Add(10 * time.Second)
	h.m.tick(h.now)
	h.collect()
	h.commitAll()
	s := h.state("a")
	if s.State != PrepareAbort || s.Epoch != epoch+1 {
		t.Fatalf("after the timeout: %v at epoch %d; want PrepareAbort at %d", s.State, s.Epoch, epoch+1)
	}
	if mw := h.markers[0]; mw.Marker.Commit || mw.Marker.ProducerEpoch != epoch+1 {
		t.Fatalf("marker %+v; want an abort at the bumped epoch", mw.Marker)
	}
	h.mark(all)
	h.commitAll()
	wantErr(t, "EndTxn of the timed-out producer", h.end("a", pid, epoch, true), ErrProducerFenced)
	if _, ep, err := h.init("a", minute, -1, -1); err != nil || ep != epoch+2 {
		t.Fatalf("InitProducerId after the timeout: epoch %d, %v; want %d", ep, err, epoch+2)
	}
}

func TestInitFencesOpenTransaction(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.add("a", pid, epoch, tp("t", 0))
	_, _, err := h.init("a", minute, -1, -1)
	wantErr(t, "InitProducerId with a transaction open", err, ErrConcurrentTransactions)
	h.commitAll()
	if s := h.state("a"); s.State != PrepareAbort || s.Epoch != epoch+1 {
		t.Fatalf("after the fence: %v at %d", s.State, s.Epoch)
	}
	_, _, err = h.init("a", minute, -1, -1)
	wantErr(t, "InitProducerId while the abort completes", err, ErrConcurrentTransactions)
	h.mark(all)
	h.commitAll()
	p2, e2, err := h.init("a", minute, -1, -1)
	if err != nil || p2 != pid || e2 != epoch+2 {
		t.Fatalf("InitProducerId after the abort: %d, %d, %v; want %d, %d", p2, e2, err, pid, epoch+2)
	}
}

func TestInitExpectedEpoch(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	p, e, err := h.init("a", minute, pid, epoch)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("bump with the current epoch: %d, %d, %v", p, e, err)
	}
	// A retry (the answer was lost) gets the same answer.
	p, e, err = h.init("a", minute, pid, epoch)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("retried bump: %d, %d, %v; want %d, %d", p, e, err, pid, epoch+1)
	}
	_, _, err = h.init("a", minute, pid, epoch+5)
	wantErr(t, "bump with a wrong epoch", err, ErrProducerFenced)
	_, _, err = h.init("a", minute, pid+7, epoch+1)
	wantErr(t, "bump with a wrong producer id", err, ErrProducerFenced)
}

func TestEpochExhaustionRotates(t *testing.T) {
	h := newHarness(t)
	pid, _, _ := h.init("a", minute, -1, -1)
	h.m.txns["a"].Epoch = maxEpoch
	p, e, err := h.init("a", minute, pid, maxEpoch)
	if err != nil || p == pid || e != 0 {
		t.Fatalf("InitProducerId at the last epoch: %d, %d, %v; want a new id at epoch 0", p, e, err)
	}
	// Its retry, naming the old id, gets the same answer.
	p2, e2, err := h.init("a", minute, pid, maxEpoch)
	if err != nil || p2 != p || e2 != 0 {
		t.Fatalf("retry after the rotation: %d, %d, %v; want %d, 0", p2, e2, err, p)
	}
	// A fence at the last epoch still fits.
	h.m.txns["a"].Epoch = maxEpoch
	h.add("a", p, maxEpoch, tp("t", 0))
	h.m.tick(h.now.Add(minute))
	h.collect()
	h.commitAll()
	if s := h.state("a"); s.Epoch != maxEpoch+1 || s.State != PrepareAbort {
		t.Fatalf("fence at the last epoch: %v at %d", s.State, s.Epoch)
	}
}

func TestWriteFailure(t *testing.T) {
	h := newHarness(t)
	w := h.waiter()
	parked, _ := h.m.initProducerID(h.now, InitRequest{ID: "a", Timeout: minute, ProducerID: -1, Epoch: -1}, w, h.newPID)
	h.collect()
	if !parked {
		t.Fatal("not parked")
	}
	h.commit(errors.Join(ErrCoordinatorNotAvailable, errors.New("disk")))
	wantErr(t, "the reply", h.replies[w].Err, ErrCoordinatorNotAvailable)
	if h.m.txns["a"] != nil {
		t.Fatal("an id never written is kept")
	}
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.add("a", pid, epoch, tp("t", 0))
	w = h.waiter()
	h.m.endTxn(h.now, EndRequest{ID: "a", ProducerID: pid, Epoch: epoch, Commit: true}, w)
	h.collect()
	h.commit(ErrCoordinatorNotAvailable)
	wantErr(t, "EndTxn whose write failed", h.replies[w].Err, ErrCoordinatorNotAvailable)
	if s := h.state("a"); s.State != Ongoing || len(h.markers) != 0 {
		t.Fatalf("after a failed write: %v, %d marker writes", s.State, len(h.markers))
	}
	wantErr(t, "EndTxn retried", h.end("a", pid, epoch, true), nil)
}

func TestConcurrentWhilePending(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	w := h.waiter()
	if parked, err := h.m.addPartitions(h.now, AddRequest{ID: "a", ProducerID: pid, Epoch: epoch,
		Partitions: []TopicPartition{tp("t", 0)}}, w); !parked || err != nil {
		t.Fatalf("AddPartitions: %v, %v", parked, err)
	}
	_, err := h.m.endTxn(h.now, EndRequest{ID: "a", ProducerID: pid, Epoch: epoch, Commit: true}, h.waiter())
	wantErr(t, "EndTxn while AddPartitions is written", err, ErrConcurrentTransactions)
	_, err = h.m.initProducerID(h.now, InitRequest{ID: "a", Timeout: minute, ProducerID: -1}, h.waiter(), h.newPID)
	wantErr(t, "InitProducerId while AddPartitions is written", err, ErrConcurrentTransactions)
	// No timeout while pending.
	h.m.tick(h.now.Add(time.Hour))
	h.collect()
	if len(h.writes) != 1 {
		t.Fatalf("%d writes outstanding; want the AddPartitions only", len(h.writes))
	}
}

func TestVerify(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	r := AddRequest{ID: "a", ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{tp("t", 0), tp("t", 1)}}
	errs, err := h.m.verify(r)
	if err != nil || !errors.Is(errs[0], ErrInvalidTxnState) || !errors.Is(errs[1], ErrInvalidTxnState) {
		t.Fatalf("verify with no transaction: %v, %v", errs, err)
	}
	h.add("a", pid, epoch, tp("t", 0))
	errs, err = h.m.verify(r)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalidTxnState) {
		t.Fatalf("verify: %v, %v; want t-0 in, t-1 not", errs, err)
	}
	_, err = h.m.verify(AddRequest{ID: "a", ProducerID: pid, Epoch: epoch - 1, Partitions: r.Partitions})
	wantErr(t, "verify of a fenced epoch", err, ErrProducerFenced)
	_, err = h.m.verify(AddRequest{ID: "zz", ProducerID: pid, Epoch: epoch, Partitions: r.Partitions})
	wantErr(t, "verify of an unknown id", err, ErrInvalidProducerIDMapping)
	if len(h.writes) != 0 {
		t.Fatal("verify wrote")
	}
}

func TestExpiration(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", minute, -1, -1)
	h.init("b", minute, -1, -1)
	h.add("a", pid, epoch, tp("t", 0)) // open: never expires
	h.now = h.now.Add(DefaultExpiration)
	h.m.tick(h.now)
	h.collect()
	h.commitAll() // a's timeout abort and b's tombstone
	if _, ok := h.m.txns["b"]; ok {
		t.Fatal("b is kept after its expiration")
	}
	if _, ok := h.lastValue("b"); ok {
		t.Fatal("b's last record is not a tombstone")
	}
	if s := h.state("a"); s.State != PrepareAbort {
		t.Fatalf("a: %v", s.State)
	}
}

func TestCodec(t *testing.T) {
	m := meta{ProducerID: 42, Epoch: 3, Timeout: 1500 * time.Millisecond, State: Ongoing,
		Partitions: map[TopicPartition]struct{}{tp("b", 1): {}, tp("a", 2): {}, tp("a", 0): {}},
		Start:      t0, Updated: t0.Add(time.Second)}
	b := encodeValue(&m)
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if v.Version != 0 || v.ProducerID != 42 || v.ProducerEpoch != 3 || v.TimeoutMillis != 1500 || v.State != 1 ||
		len(v.Topics) != 2 || v.Topics[0].Topic != "a" || !slices.Equal(v.Topics[0].Partitions, []int32{0, 2}) ||
		v.StartTimestamp != t0.UnixMilli() || v.LastUpdateTimestamp != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("kmsg reads %+v", v)
	}
	got, err := decodeValue(b)
	if err != nil || got.ProducerID != 42 || got.State != Ongoing || !maps.Equal(got.Partitions, m.Partitions) ||
		!got.Start.Equal(t0) || got.LastEpoch != noEpoch {
		t.Fatalf("decodeValue = %+v, %v", got, err)
	}
	// Kafka 3.5+'s version 1, with tagged fields.
	v.Version, v.PreviousProducerID, v.NextProducerID = 1, 41, 43
	if got, err := decodeValue(v.AppendTo(nil)); err != nil || got.ProducerID != 42 || len(got.Partitions) != 3 {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 2, 0}, b[:len(b)-1], {0, 0, 1, 2}} {
		if _, err := decodeValue(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeValue(%x) = %v; want ErrCorrupt", bad, err)
		}
	}
	if id, err := decodeKey(encodeKey("x-1")); err != nil || id != "x-1" {
		t.Fatalf("key: %q, %v", id, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1, 0, 0}, {0, 0, 0, 5, 'a'}} {
		if _, err := decodeKey(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeKey(%x) = %v; want ErrCorrupt", bad, err)
		}
	}
	// Empty and Complete states: a null partition array and start -1.
	e := meta{ProducerID: 1, State: CompleteAbort, Updated: t0}
	if got, err := decodeValue(encodeValue(&e)); err != nil || got.Partitions != nil || !got.Start.IsZero() {
		t.Fatalf("empty: %+v, %v", got, err)
	}
}

func TestLoadResumes(t *testing.T) {
	h := newHarness(t)
	pa, ea, _ := h.init("a", minute, -1, -1)
	pb, eb, _ := h.init("b", minute, -1, -1)
	h.init("c", minute, -1, -1)
	h.add("a", pa, ea, tp("t", 0), tp("t", 1))
	h.add("b", pb, eb, tp("t", 0))
	startB := h.now
	h.end("a", pa, ea, true) // a is PrepareCommit; its markers are not written
	// Replay the records into a new machine at a later time.
	states := replayWrites(t, h.log)
	h2 := newHarness(t)
	h2.now = h.now.Add(time.Second)
	h2.m.load(h2.now, states)
	h2.collect()
	if len(h2.markers) != 1 || h2.markers[0].ID != "a" || !h2.markers[0].Marker.Commit ||
		h2.markers[0].Marker.ProducerEpoch != ea || len(h2.markers[0].Partitions) != 2 ||
		h2.markers[0].Marker.CoordinatorEpoch != 7 {
		t.Fatalf("markers after the load: %+v", h2.markers)
	}
	if d := h2.m.deadline(); !d.Equal(startB.Add(minute)) {
		t.Fatalf("deadline %v; want b's timeout %v", d, startB.Add(minute))
	}
	h2.mark(all)
	h2.commitAll()
	if s := h2.state("a"); s.State != CompleteCommit {
		t.Fatalf("a after the load: %v", s.State)
	}
	if s := h2.state("b"); s.State != Ongoing || s.ProducerID != pb {
		t.Fatalf("b after the load: %+v", s)
	}
	if s := h2.state("c"); s.State != Empty {
		t.Fatalf("c after the load: %+v", s)
	}
}

// replayWrites applies records as Load does.
func replayWrites(t *testing.T, log []Write) map[string]meta {
	t.Helper()
	states := map[string]meta{}
	for _, w := range log {
		id, err := decodeKey(w.Key)
		if err != nil {
			t.Fatal(err)
		}
		if w.Value == nil {
			delete(states, id)
			continue
		}
		m, err := decodeValue(w.Value)
		if err != nil {
			t.Fatal(err)
		}
		states[id] = m
	}
	return states
}

// A write a tick made that fails is not made again before the backoff, so
// a log that refuses appends for a while is not retried in a loop.
func TestFailedWriteBacksOff(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init("a", 10*time.Second, -1, -1)
	h.add("a", pid, epoch, tp("t", 0))
	h.now = h.now.Add(10 * time.Second)
	h.m.tick(h.now)
	h.collect()
	h.commit(ErrCoordinatorNotAvailable) // the timeout's abort fails
	if s := h.state("a"); s.State != Ongoing || s.Epoch != epoch {
		t.Fatalf("after the failed abort: %v at %d", s.State, s.Epoch)
	}
	h.m.tick(h.now)
	h.collect()
	if len(h.writes) != 0 {
		t.Fatal("the failed abort retried at once")
	}
	if d := h.m.deadline(); !d.Equal(h.now.Add(DefaultMarkerBackoff)) {
		t.Fatalf("deadline %v; want the backoff's end %v", d, h.now.Add(DefaultMarkerBackoff))
	}
	h.now = h.now.Add(DefaultMarkerBackoff)
	h.m.tick(h.now)
	h.collect()
	if len(h.writes) != 1 {
		t.Fatalf("%d writes after the backoff; want the abort again", len(h.writes))
	}
	h.commitAll()
	// The completion's write fails too: retried after the backoff.
	h.mark(all)
	h.commit(ErrCoordinatorNotAvailable)
	h.m.tick(h.now)
	h.collect()
	if len(h.writes) != 0 {
		t.Fatal("the failed completion retried at once")
	}
	h.now = h.now.Add(DefaultMarkerBackoff)
	h.m.tick(h.now)
	h.collect()
	h.commitAll()
	if s := h.state("a"); s.State != CompleteAbort {
		t.Fatalf("after the retries: %v", s.State)
	}
}
