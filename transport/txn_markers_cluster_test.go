package transport

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/node"
)

// TestWriteTxnMarkersAcrossBrokers: two brokers on one coordination
// store; a transaction spanning partitions led by both is aborted from one
// of them (node.WriteTxnMarkers): its own partitions get the marker by a
// direct append, the other broker's by WriteTxnMarkers over the network,
// each once its in-sync replicas have it. Every partition then has the
// transaction aborted (in its index) and nothing unstable.
func TestWriteTxnMarkersAcrossBrokers(t *testing.T) {
	srv := memstore.NewServer()
	on := func(id int32) brokerOpt {
		return func(_ *Config, o *node.Config) { o.Coord, o.NodeID = srv.Connect(), id }
	}
	b1 := startBroker(t, on(1), withoutTxnVerification) // the test plays the coordinator
	b2 := startBroker(t, on(2), withoutTxnVerification)
	b1.createTopic(t, "tx", 4, nil)
	brokers := []*testBroker{b1, b2}
	leaderOf := func(p int32) *testBroker {
		t.Helper()
		var found *testBroker
		pollUntil(t, "a leader of every partition", func() bool {
			for _, b := range brokers {
				if _, err := b.node.Partition("tx", p); err == nil {
					found = b
					return true
				}
			}
			return false
		})
		return found
	}
	const pid = 4000
	var parts []node.TopicPartition
	led := map[*testBroker]int{}
	for p := range int32(4) {
		b := leaderOf(p)
		led[b]++
		req := node.ProduceRequest{Acks: -1, Partitions: []node.ProducePartition{{Topic: "tx", Partition: p, Records: txnRecords(t, pid, 0, "v")}}}
		b.node.Produce(context.Background(), &req)
		if err := req.Partitions[0].Err; err != nil {
			t.Fatal(err)
		}
		parts = append(parts, node.TopicPartition{Topic: "tx", Partition: p})
	}
	if led[b1] == 0 || led[b2] == 0 {
		t.Skipf("leaders all on one broker (%d, %d): nothing remote to test", led[b1], led[b2])
	}
	parts = append(parts, node.TopicPartition{Topic: "gone", Partition: 0}) // a deleted topic: nothing to do
	errs := b1.node.WriteTxnMarkers(testCtx(t), logs.Marker{ProducerID: pid, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 2}, parts)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%+v: %v", parts[i], err)
		}
	}
	for p := range int32(4) {
		np, err := leaderOf(p).node.Partition("tx", p)
		if err != nil {
			t.Fatal(err)
		}
		if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != 2 || hw != 2 {
			t.Errorf("partition %d: LSO %d, high watermark %d; want 2, 2 (data, marker)", p, lso, hw)
		}
		if ab := np.AbortedTxns(0, 2); len(ab) != 1 || ab[0] != (logs.AbortedTxn{ProducerID: pid, FirstOffset: 0}) {
			t.Errorf("partition %d: aborted %v", p, ab)
		}
	}
	// A marker of an older producer epoch is refused wherever it goes.
	errs = b1.node.WriteTxnMarkers(testCtx(t), logs.Marker{ProducerID: pid, ProducerEpoch: -1, Commit: true}, parts[:4])
	for i, err := range errs {
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%+v: marker of epoch -1: %v, want a refusal", parts[i], err)
		}
	}
}
