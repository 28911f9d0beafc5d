package node

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/producers"
)

// TestTxnOffsetCommitGuard drives KIP-890 part 1's race through
// TxnOffsetCommit, in the order that left a transaction open in
// __consumer_offsets without the guard: the coordinator answers the
// verification (the group's partition is in the transaction), the
// transaction aborts and its marker is written there, then the offsets are
// appended. The commit is refused with INVALID_TXN_STATE, nothing is
// written, the offsets partition's last stable offset is its high
// watermark, and the offsets are neither visible nor unstable. Then: a
// transaction's later commits skip the coordinator (one question per
// transaction and partition), its commit marker makes them visible, and
// the next transaction is asked about again.
func TestTxnOffsetCommitGuard(t *testing.T) {
	c := newTestCluster(t, 1)
	c.await("a controller", func(im *meta.Image) bool { return im.Controller != -1 })
	n := c.nodes[1]
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.GroupCoordinator("g"); err != nil { // creates OffsetsTopic
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, "t") && led(im, OffsetsTopic) })
	waitLoaded(t, n, "g")
	op := n.offsetsPartitionFor("g")
	const pid = 77
	asked, abortInside := 0, false
	n.txnVerifier = func(ctx context.Context, id string, p int64, epoch int16, topic string, partition int32) error {
		asked++
		if id != "tx" || p != pid || epoch != 0 || topic != OffsetsTopic || partition != op {
			t.Errorf("verifier asked about %q %d/%d %s/%d", id, p, epoch, topic, partition)
		}
		if abortInside {
			// The coordinator said yes; the transaction times out and
			// its abort marker lands before the offsets.
			if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: pid, CoordinatorEpoch: 1}, OffsetsTopic, op); err != nil {
				t.Errorf("abort marker: %v", err)
			}
		}
		return nil
	}
	tp := groups.TopicPartition{Topic: "t", Partition: 0}
	commit := func(offset int64) error {
		t.Helper()
		res, err := n.TxnOffsetCommit(ctx, groups.TxnCommitRequest{Group: "g", TransactionalID: "tx", ProducerID: pid,
			GenerationID: -1, Offsets: []groups.OffsetCommit{{TopicPartition: tp, Offset: offset, LeaderEpoch: -1}}})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			t.Fatalf("TxnOffsetCommit answered %d partitions, want 1", len(res))
		}
		return res[tp]
	}
	np, err := n.Partition(OffsetsTopic, op)
	if err != nil {
		t.Fatal(err)
	}
	coord, err := n.GroupCoordinator("g")
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, offset int64, unstable bool) {
		t.Helper()
		got, u, err := coord.FetchStable("g", nil, -1, []groups.TopicPartition{tp})
		if err != nil {
			t.Fatal(err)
		}
		off := int64(-1)
		if c, ok := got[tp]; ok {
			off = c.Offset
		}
		if off != offset || u[tp] != unstable {
			t.Fatalf("%s: offset %d (unstable %v), want %d (%v)", what, off, u[tp], offset, unstable)
		}
	}
	stable := func(what string) {
		t.Helper()
		if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != hw {
			t.Fatalf("%s: %s-%d LSO %d, HW %d; want them equal", what, OffsetsTopic, op, lso, hw)
		}
	}

	abortInside = true
	end := np.HighWatermark()
	if err := commit(5); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Fatalf("commit verified before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	if hw := np.HighWatermark(); hw != end+1 { // the marker only
		t.Fatalf("HW %d after the marker and the refused commit, want %d", hw, end+1)
	}
	stable("after the refused commit")
	want("after the refused commit", -1, false)
	abortInside = false

	// The next transaction: asked about once, its later commits not.
	for off := range int64(3) {
		if err := commit(10 + off); err != nil {
			t.Fatalf("commit %d of the transaction: %v", off, err)
		}
	}
	if asked != 2 {
		t.Fatalf("coordinator asked %d times for a refused commit and a 3-commit transaction, want 2", asked)
	}
	if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso >= hw {
		t.Fatalf("LSO %d, HW %d with the transaction open; want the LSO behind", lso, hw)
	}
	want("transaction open", -1, true)
	if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: pid, Commit: true, CoordinatorEpoch: 1}, OffsetsTopic, op); err != nil {
		t.Fatal(err)
	}
	stable("after the commit marker")
	want("after the commit marker", 12, false)
	if err := commit(20); err != nil {
		t.Fatal(err)
	}
	if asked != 3 {
		t.Fatalf("coordinator asked %d times, want 3: the transaction after a marker is verified again", asked)
	}
}
