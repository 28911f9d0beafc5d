package node

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
)

// TestTxnProduceGuard drives KIP-890 part 1's race through Produce, in
// the order that hangs a transaction without the guard: the coordinator
// answers the verification (the partition is in the transaction), the
// transaction aborts and its marker is written, then the batch is
// appended. The batch is refused with INVALID_TXN_STATE, nothing is
// written, and the last stable offset is the high watermark (no
// transaction hangs). Then: a transaction's later batches in a partition
// skip the coordinator (one question per transaction and partition), and
// the next transaction, after its predecessor's marker, is asked about
// again.
func TestTxnProduceGuard(t *testing.T) {
	c := newTestCluster(t, 1)
	c.await("a controller", func(im *meta.Image) bool { return im.Controller != -1 })
	n := c.nodes[1]
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, "t") })
	const pid = 88
	asked, abortInside := 0, false
	n.txnVerifier = func(ctx context.Context, id string, p int64, epoch int16, topic string, partition int32) error {
		asked++
		if id != "tx" || p != pid || epoch != 0 || topic != "t" || partition != 0 {
			t.Errorf("verifier asked about %q %d/%d %s/%d", id, p, epoch, topic, partition)
		}
		if abortInside {
			// The coordinator said yes; the transaction times out and
			// its abort marker lands before the batch.
			if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: pid, CoordinatorEpoch: 1}, "t", 0); err != nil {
				t.Errorf("abort marker: %v", err)
			}
		}
		return nil
	}
	tid := "tx"
	produce := func(seq int32) error {
		t.Helper()
		opts := record.DefaultBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, 0, seq, true
		b, err := record.Build(opts, []record.Record{{Value: []byte("v"), Timestamp: 1}})
		if err != nil {
			t.Fatal(err)
		}
		req := ProduceRequest{TransactionalID: &tid, Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: 0, Records: b}}}
		n.Produce(ctx, &req)
		return req.Partitions[0].Err
	}
	np, err := n.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	stable := func(what string, wantHW int64) {
		t.Helper()
		if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != hw || hw != wantHW {
			t.Fatalf("%s: LSO %d, HW %d; want both %d", what, lso, hw, wantHW)
		}
	}

	abortInside = true
	if err := produce(0); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Fatalf("batch verified before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	stable("after the refused batch", 1) // the marker only
	abortInside = false

	// The next transaction: asked about once, its later batches not.
	for seq := range int32(3) {
		if err := produce(seq); err != nil {
			t.Fatalf("batch %d of the transaction: %v", seq, err)
		}
	}
	if asked != 2 {
		t.Fatalf("coordinator asked %d times for a refused batch and a 3-batch transaction, want 2", asked)
	}
	if lso := np.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d with the transaction open from 1, want 1", lso)
	}
	if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: pid, Commit: true, CoordinatorEpoch: 1}, "t", 0); err != nil {
		t.Fatal(err)
	}
	stable("after the commit", 5)
	if err := produce(3); err != nil {
		t.Fatal(err)
	}
	if asked != 3 {
		t.Fatalf("coordinator asked %d times, want 3: the transaction after a marker is verified again", asked)
	}
}
